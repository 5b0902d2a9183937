package main

const serveHelp = `
Serves a data dir to Kafka clients over the Kafka protocol, until SIGINT or
SIGTERM. Not available yet: it needs the Kafka server (package kafka), which
is not built yet. Until then, embed the library (log.Open) or use the other
subcommands with --data-dir.`

func runServe(e *env, args []string) error {
	fs := newFlags(e, "serve", "--data-dir DIR [--listen 127.0.0.1:9092] [--metrics-addr ADDR]", serveHelp)
	fs.String("data-dir", "", "`DIR`: the data directory to serve")
	fs.String("listen", "127.0.0.1:9092", "`ADDR`: the Kafka listener's address")
	fs.String("metrics-addr", "", "`ADDR`: serve Prometheus /metrics there")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	return errNeedsKafkaServer
}
