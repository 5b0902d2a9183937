package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/log"
)

const produceHelp = `
Appends one record per line of stdin to a topic, as
kafka-console-producer.sh does. The line (without its newline) is the
value; with --key-separator the text before the first separator is the key
and the rest the value, and a line without the separator is an error.
--header adds a header to every record. Records go to the partition Kafka's
default partitioner picks (murmur2 of the key; sticky for records without
one), or to --partition. Nothing is printed on success; --verbose prints
each record's partition and offset to stderr. The exit code is 1 if any
record failed.

kcat's flags mean what they mean to kcat: -b, -t, -p, -K DELIM (the key
separator), -z CODEC, and -P, which produce needs not:

  strata produce -b localhost:9092 -t orders -K : < lines

--compression-codec [CODEC] (alone: gzip) compresses the batches, as
compression.type does. --producer.config FILE (a Java properties file) and
--producer-property KEY=VALUE take Kafka producer properties: acks,
compression.type, linger.ms, batch.size, buffer.memory,
request.timeout.ms, delivery.timeout.ms, enable.idempotence,
max.in.flight.requests.per.connection, retry.backoff.ms,
bootstrap.servers, client.id and the TLS and SASL ones; any other is
warned of on stderr and ignored, as Kafka's clients do, and a bad value is
an error. Flags given win over properties.`

func runProduce(e *env, args []string) (err error) {
	fs := newFlags(e, "produce", "--bootstrap-server ADDR|--data-dir DIR --topic T [flags] < lines", produceHelp)
	var t target
	t.register(fs)
	topic := fs.String("topic", "", "`NAME` of the topic (required)")
	sep := fs.String("key-separator", "", "`SEP` between key and value on each line; unset: lines are values, keys are null")
	partition := fs.Int("partition", -1, "`N`: send every record to partition N (default: Kafka's partitioner)")
	var headers stringList
	fs.Var(&headers, "header", "`KEY=VALUE` header added to every record; KEY alone is a null value; repeatable")
	acks := fs.String("acks", "all", "`ACKS`: all (or -1), 1 or 0, as Kafka's --request-required-acks")
	fs.StringVar(acks, "request-required-acks", "all", "`ACKS`: the same as --acks (Kafka's flag)")
	verbose := fs.Bool("verbose", false, "print each record's partition and offset to stderr")
	var props stringList
	fs.Var(&props, "property", "`KEY=VALUE` of kafka-console-producer.sh's line reader: parse.key=true, key.separator=SEP (Kafka's default: a tab); repeatable")
	var cprops clientProps
	cprops.register(fs, "producer", producerPropertyNames)
	codec := fs.String("compression-codec", "", "`CODEC`: none, gzip, snappy, lz4 or zstd (alone: gzip, as Kafka's console producer); the same as compression.type")
	// kcat's flags, with kcat's meanings.
	fs.StringVar(&t.bootstrap, "b", "", "`ADDR`: the same as --bootstrap-server (kcat)")
	fs.StringVar(topic, "t", "", "`NAME`: the same as --topic (kcat)")
	fs.IntVar(partition, "p", -1, "`N`: the same as --partition (kcat; -1: the partitioner)")
	kcatKey := fs.String("K", "", "`DELIM`: the same as --key-separator (kcat; \\t, \\n escapes)")
	fs.StringVar(codec, "z", "", "`CODEC`: the same as --compression-codec (kcat)")
	fs.Bool("P", false, "producer mode (kcat): what produce does")
	kcatConsume := fs.Bool("C", false, "consumer mode (kcat): an error here, use strata consume")
	pos, err := parseInterleaved(fs, optionalValue(args, "compression-codec", "gzip", compressionNames))
	if err != nil {
		return err
	}
	if *kcatConsume {
		return usagef("-C is kcat's consumer mode: use strata consume")
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q: records come from stdin", pos)
	}
	if isFlagSet(fs, "K") {
		if isFlagSet(fs, "key-separator") {
			return usagef("give -K or --key-separator, not both")
		}
		*sep = unescapeDelim(*kcatKey)
	}
	if *sep == "" && (isFlagSet(fs, "key-separator") || isFlagSet(fs, "K")) {
		return usagef("--key-separator must not be empty")
	}
	if err := applyProducerProperties(props, sep); err != nil {
		return err
	}
	hdrs, err := parseHeaders(headers)
	if err != nil {
		return err
	}
	// Kafka's console producer is idempotent with acks=all (since Kafka
	// 3.0): a batch whose leader died in flight is sent again to the next
	// leader and written once. The producer properties apply first, the
	// flags given over them.
	pcfg := log.ProducerConfig{Logger: warnLogger(e), Acks: log.AcksAll}
	cp, err := cprops.read()
	if err != nil {
		return err
	}
	applyConnection(&t, cp)
	idemSet, err := applyProducerConfig(&pcfg, &cprops, cp)
	if err != nil {
		return err
	}
	warnUnused(e, "produce", cp, producerPropertyNames)
	if isFlagSet(fs, "acks") || isFlagSet(fs, "request-required-acks") {
		if pcfg.Acks, err = parseAcks(*acks); err != nil {
			return err
		}
	}
	if !idemSet {
		pcfg.Idempotent = pcfg.Acks == log.AcksAll
	}
	if *codec != "" {
		if pcfg.Compression, err = parseCompression(*codec); err != nil {
			return usagef("--compression-codec: %v", err)
		}
	}
	if *topic == "" {
		return usagef("--topic is required")
	}
	if *partition >= 0 {
		pcfg.Partitioner = log.PartitionerManual
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	if _, err := c.topicPartitions(*topic); err != nil {
		return err
	}
	prod, err := log.NewProducer(c, pcfg)
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		failed   int
		firstErr error
	)
	ctx, stop := interruptible()
	defer stop()
	quit := make(chan struct{})
	defer close(quit)
	lines := readLines(e.stdin, quit)
	lineNo := 0
	var readErr error
read:
	for {
		var l line
		select {
		case <-ctx.Done():
			readErr = errInterrupted
			break read
		case l = <-lines:
		}
		if l.err != nil {
			if l.err != io.EOF {
				readErr = fmt.Errorf("read stdin: %w", l.err)
			}
			break
		}
		text := l.text
		lineNo++
		r := log.Record{Topic: *topic, Partition: max(*partition, 0), Value: text, Headers: hdrs}
		if *sep != "" {
			k, v, ok := bytes.Cut(text, []byte(*sep))
			if !ok {
				readErr = fmt.Errorf("line %d: no key separator %q", lineNo, *sep)
				break
			}
			r.Key, r.Value = k, v
		}
		n := lineNo
		prod.SendAsync(r, func(r log.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("record of line %d: %w", n, err)
				}
				return
			}
			if *verbose {
				fmt.Fprintf(e.stderr, "line %d: partition %d offset %d\n", n, r.Partition, r.Offset)
			}
		})
	}
	if err := prod.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		if failed > 1 {
			return fmt.Errorf("%d records failed; the first: %w", failed, firstErr)
		}
		return firstErr
	}
	return readErr
}

// isFlagSet reports whether the command line set the flag.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// applyProducerProperties applies Kafka's line reader properties: with
// parse.key=true lines are key SEP value, SEP being key.separator (a tab
// unless given, as in Kafka) or --key-separator.
func applyProducerProperties(props []string, sep *string) error {
	parseKey, keySep := false, ""
	for _, kv := range props {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return usagef("--property %q: want KEY=VALUE", kv)
		case k == "parse.key":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return usagef("--property %s: want true or false", kv)
			}
			parseKey = b
		case k == "key.separator":
			if v == "" {
				return usagef("--property key.separator must not be empty")
			}
			keySep = v
		default:
			return usagef("--property %q: unknown (known: parse.key, key.separator)", k)
		}
	}
	switch {
	case parseKey && *sep == "" && keySep == "":
		*sep = "\t"
	case parseKey && *sep == "":
		*sep = keySep
	case parseKey && keySep != "" && keySep != *sep:
		return usagef("--key-separator %q and --property key.separator=%s disagree", *sep, keySep)
	}
	return nil
}

// parseHeaders turns KEY=VALUE flags into record headers.
func parseHeaders(kvs []string) ([]log.Header, error) {
	var hdrs []log.Header
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return nil, usagef("--header %q: the key is empty", kv)
		}
		h := log.Header{Key: k}
		if ok {
			h.Value = []byte(v)
		}
		hdrs = append(hdrs, h)
	}
	return hdrs, nil
}

// producerPropertyNames are the producer properties produce maps to
// log.ProducerConfig.
var producerPropertyNames = []string{"acks", "compression.type", "linger.ms", "batch.size", "buffer.memory",
	"request.timeout.ms", "delivery.timeout.ms", "enable.idempotence", "max.in.flight.requests.per.connection", "retry.backoff.ms"}

// applyProducerConfig sets cfg from the producer properties it knows and
// deletes them from props, leaving those it does not use. idemSet says
// enable.idempotence was given.
func applyProducerConfig(cfg *log.ProducerConfig, p *clientProps, props map[string]string) (idemSet bool, err error) {
	for _, k := range []string{"key.serializer", "value.serializer"} {
		delete(props, k) // the console producer's own: produce sends bytes
	}
	for k, v := range props {
		switch k {
		case "max.in.flight.requests.per.connection", "retry.backoff.ms":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return false, usagef("%s: want a positive number", p.source(k))
			}
			if k == "retry.backoff.ms" {
				cfg.RetryBackoff = time.Duration(n) * time.Millisecond
			} else {
				cfg.MaxInFlight = n
			}
		default:
			if !slices.Contains(producerPropertyNames, k) {
				continue
			}
			if err := setProducerProp(cfg, k+"="+v); err != nil {
				return false, usagef("%s: %v", p.source(k), err)
			}
			idemSet = idemSet || k == "enable.idempotence"
		}
		delete(props, k)
	}
	return idemSet, nil
}

// compressionNames are the codecs of --compression-codec and
// compression.type.
var compressionNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func parseCompression(v string) (log.Compression, error) {
	codecs := map[string]log.Compression{"none": log.CompressionNone, "gzip": log.CompressionGzip,
		"snappy": log.CompressionSnappy, "lz4": log.CompressionLz4, "zstd": log.CompressionZstd}
	codec, ok := codecs[strings.ToLower(v)]
	if !ok {
		return 0, fmt.Errorf("%q: want none, gzip, snappy, lz4 or zstd", v)
	}
	return codec, nil
}

// optionalValue rewrites a flag whose value Kafka's tools make optional
// (--compression-codec alone means gzip): "--name" followed by one of
// values becomes "--name=value", and "--name" alone "--name=dflt".
func optionalValue(args []string, name, dflt string, values []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a != "-"+name && a != "--"+name {
			out = append(out, a)
			continue
		}
		if i+1 < len(args) && slices.Contains(values, strings.ToLower(args[i+1])) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a+"="+dflt)
	}
	return out
}

// unescapeDelim turns the escapes \t, \n, \r and \\ of a kcat delimiter
// into their bytes.
func unescapeDelim(s string) string {
	return strings.NewReplacer(`\t`, "\t", `\n`, "\n", `\r`, "\r", `\\`, `\`).Replace(s)
}

func parseAcks(s string) (log.Acks, error) {
	switch s {
	case "all", "-1":
		return log.AcksAll, nil
	case "1":
		return log.AcksLeader, nil
	case "0":
		return log.AcksNone, nil
	}
	return 0, usagef("--acks %q: want all, -1, 1 or 0", s)
}
