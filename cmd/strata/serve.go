package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/metrics/logmetrics"
)

const serveHelp = `
Serves a data dir to Kafka clients over the Kafka protocol (any client:
franz-go, sarama, the Java client, strata --bootstrap-server) until SIGINT
or SIGTERM, then shuts down cleanly (the listener, then the data dir) and
exits 0. The data dir is created if it does not exist.

On startup it binds its ports, opens the data dir (recovering what a crash
left), then prints "metrics on HOST:PORT" (with --metrics-addr) and
"listening on HOST:PORT" to stdout, the addresses it bound: --listen
127.0.0.1:0 picks a free port. A script that waits for "listening on" can
connect at once. A start that fails (a port in use, a bad flag) creates no
data dir. Log lines go to stderr through log/slog.

--metrics-addr serves GET /metrics in the Prometheus text format: per
partition log end offset, high watermark, size and segments, bytes and
records in and out per topic, Produce and Fetch latency histograms, and
consumer group lag, under Kafka's metric names (kafka_log_log_size, ...).

With --raft-addr and --peer (one per member, the same list on every member)
it runs a cluster member instead: a Raft voter of the controller quorum and
a replicating broker on --listen (package replica); SIGTERM is a controlled
shutdown. --tls-cert/--tls-key (and --tls-client-ca) and --sasl-users
secure a standalone broker's listener.

A cluster member's --listen and --raft-addr are for the members: keep them
on a private network, or secure both with mutual TLS (--cluster-tls-cert,
--cluster-tls-key, --cluster-ca: only certificates of the cluster's CA are
accepted). For clients, give each member a client listener with
--client-addr (and --client-advertised-addr when clients reach it by
another name): --tls-cert/--tls-key, --tls-client-ca and --sasl-users then
secure it, and a client given any member's client listener learns every
member's client listener, never their --listen addresses. It prints
"client listener on HOST:PORT" after "listening on".

Broker and default topic settings take Kafka's server.properties names with
--override KEY=VALUE (as kafka-server-start.sh does), repeatable:

  num.partitions, default.replication.factor, min.insync.replicas,
  log.segment.bytes, log.roll.ms, log.retention.ms, log.retention.bytes,
  log.flush.interval.messages, log.flush.interval.ms,
  log.index.interval.bytes, log.index.size.max.bytes, message.max.bytes,
  log.cleanup.policy, log.retention.check.interval.ms,
  log.flush.offset.checkpoint.interval.ms, group.min.session.timeout.ms,
  group.initial.rebalance.delay.ms, socket.request.max.bytes,
  max.connections, max.connections.per.ip,
  max.connections.per.ip.overrides (IP:N,IP:N), connections.max.idle.ms,
  connection.failed.authentication.delay.ms, fetch.max.bytes, node.id,
  auto.create.topics.enable, transaction.max.timeout.ms,
  transactional.id.expiration.ms, transaction.version (0 to 2; default 2),
  transaction.abort.timed.out.transaction.cleanup.interval.ms,
  authorizer.class.name, super.users (User:admin;User:ops),
  allow.everyone.if.no.acl.found

Any of the last three enforces ACLs (kept in the data dir, managed with
"strata acls" or any Kafka admin client as a super user).

A cluster member takes, besides those three, leader.replication.throttled.rate
and follower.replication.throttled.rate (bytes per second; default: none): they
cap the replication of replicas catching up, as a reassignment's new ones do;
and the four transaction settings, transaction.version and the coordinators'
timeouts (give every member the same).

The common ones also have flags of their own (below).`

// serveConfig is what serve's flags set.
type serveConfig struct {
	dataDir, listen, advertised, metricsAddr string
	logFormat, logLevel                      string
	broker                                   log.Config
	server                                   kafka.Config
	security                                 serverSecurity
	throttles                                replicationThrottles
}

func runServe(e *env, args []string) error {
	fs := newFlags(e, "serve", "--data-dir DIR [--listen 127.0.0.1:9092] [--metrics-addr ADDR] [flags]", serveHelp)
	var c serveConfig
	fs.StringVar(&c.dataDir, "data-dir", "", "`DIR`: the data directory to serve (required)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:9092", "`ADDR`: the Kafka listener's host:port (port 0: any free port)")
	fs.StringVar(&c.advertised, "advertised-addr", "", "`ADDR`: the host:port given to clients in Metadata (default: the bound address)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "`ADDR`: serve Prometheus /metrics on this host:port")
	fs.StringVar(&c.logFormat, "log-format", "text", "`FORMAT` of log lines: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "`LEVEL`: debug, info, warn or error")
	autoCreate := fs.Bool("auto-create-topics", false, "create a topic a client asks Metadata for (Kafka's auto.create.topics.enable)")
	nodeID := fs.Int("node-id", 1, "`ID` of this broker in Metadata")
	c.security.register(fs)
	var cluster clusterFlags
	cluster.register(fs)
	var overrides stringList
	fs.Var(&overrides, "override", "`KEY=VALUE`: a broker or default topic setting, Kafka's server.properties names; repeatable")
	// The most used settings as flags of their own, applied as overrides.
	shortcut := func(flagName, key, usage string) {
		fs.Func(flagName, usage+" ("+key+")", func(v string) error {
			overrides = append(overrides, key+"="+v)
			return nil
		})
	}
	shortcut("num-partitions", "num.partitions", "`N`: partitions of a topic created without a count")
	shortcut("segment-bytes", "log.segment.bytes", "`BYTES` of a segment before it rolls")
	shortcut("retention-ms", "log.retention.ms", "`MS` records are kept; -1: forever")
	shortcut("retention-bytes", "log.retention.bytes", "`BYTES` kept per partition; -1: unlimited")
	shortcut("flush-messages", "log.flush.interval.messages", "`N`: fsync after N records (1: every append)")
	shortcut("flush-ms", "log.flush.interval.ms", "`MS`: fsync at least this often")
	shortcut("max-connections-per-ip", "max.connections.per.ip", "`N` connections from one IP address at most")
	fs.DurationVar(&c.server.RequestTimeout, "request-timeout", 0, "`DURATION` a request may take to arrive once begun, and a new connection to send its first (default 30s; +1s per MiB)")
	fs.DurationVar(&c.server.AuthenticationTimeout, "auth-timeout", 0, "`DURATION` a new connection has to authenticate with --sasl-users (default 30s)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if c.dataDir == "" {
		return usagef("--data-dir is required")
	}
	c.server.NodeID = int32(*nodeID)
	c.server.AutoCreateTopics = *autoCreate
	c.server.AdvertisedAddr = c.advertised
	for _, kv := range overrides {
		if err := c.override(kv); err != nil {
			return usagef("--override %s: %v", kv, err)
		}
	}
	if *nodeID <= 0 || *nodeID > 1<<31-1 {
		return usagef("--node-id must be positive")
	}
	if err := c.security.apply(&c.server); err != nil {
		return err
	}
	if isFlagSet(fs, "auto-create-topics") {
		c.server.AutoCreateTopics = *autoCreate // the flag wins over an override
	}
	logger, err := newLogger(e, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	if cluster.enabled() {
		// A member that fails to start leaves no data dir it created:
		// it started once it printed "listening on".
		_, statErr := os.Stat(c.dataDir)
		out := &startedWriter{w: e.stdout}
		ce := *e
		ce.stdout = out
		err := serveCluster(&ce, &c, &cluster, clusterOverrides(overrides), logger)
		if err != nil && os.IsNotExist(statErr) && !out.started {
			os.RemoveAll(c.dataDir)
		}
		return err
	}
	if c.throttles.set {
		return usagef("%s are a cluster member's (a standalone broker replicates nothing): give --raft-addr and --peer", strings.Join(throttleOverrideKeys, " and "))
	}
	return serve(e, &c, logger)
}

// newLogger returns the slog logger of --log-format and --log-level,
// writing to stderr.
func newLogger(e *env, format, level string) (*stdlog.Logger, error) {
	var lv stdlog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &stdlog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return stdlog.New(stdlog.NewTextHandler(e.stderr, opts)), nil
	case "json":
		return stdlog.New(stdlog.NewJSONHandler(e.stderr, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

// brokerTopicKeys maps server.properties names of default topic settings
// to the topic configuration names setTopicConfig takes.
var brokerTopicKeys = map[string]string{
	"log.segment.bytes":           "segment.bytes",
	"log.roll.ms":                 "segment.ms",
	"log.retention.ms":            "retention.ms",
	"log.retention.bytes":         "retention.bytes",
	"log.flush.interval.messages": "flush.messages",
	"log.flush.interval.ms":       "flush.ms",
	"log.index.interval.bytes":    "index.interval.bytes",
	"log.index.size.max.bytes":    "segment.index.bytes",
	"message.max.bytes":           "max.message.bytes",
	"log.cleanup.policy":          "cleanup.policy",
	"min.insync.replicas":         "min.insync.replicas",
}

// override applies one KEY=VALUE of Kafka's server.properties.
func (c *serveConfig) override(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return errors.New("want KEY=VALUE")
	}
	if tk, ok := brokerTopicKeys[k]; ok {
		return setTopicConfig(&c.broker.DefaultTopic, tk+"="+v)
	}
	n, nerr := strconv.ParseInt(v, 10, 64)
	positive := func() error {
		if nerr != nil || n <= 0 {
			return fmt.Errorf("%s: want a positive number", k)
		}
		return nil
	}
	msDur := func(dst *time.Duration) error {
		if err := positive(); err != nil {
			return err
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
	switch k {
	case "num.partitions":
		if err := positive(); err != nil {
			return err
		}
		c.broker.DefaultTopic.Partitions = int(n)
	case "default.replication.factor":
		if err := positive(); err != nil {
			return err
		}
		c.broker.DefaultTopic.ReplicationFactor = int(n)
	case "log.retention.check.interval.ms":
		return msDur(&c.broker.RetentionCheckInterval)
	case "log.flush.offset.checkpoint.interval.ms":
		return msDur(&c.broker.CheckpointInterval)
	case "group.min.session.timeout.ms":
		return msDur(&c.broker.GroupMinSessionTimeout)
	case "group.initial.rebalance.delay.ms":
		if nerr != nil || n < 0 {
			return fmt.Errorf("%s: want a non-negative number", k)
		}
		c.broker.GroupInitialRebalanceDelay = time.Duration(n) * time.Millisecond
	case "socket.request.max.bytes":
		if err := positive(); err != nil {
			return err
		}
		c.server.MaxRequestBytes = int(n)
	case "max.connections":
		if err := positive(); err != nil {
			return err
		}
		c.server.MaxConnections = int(n)
	case "connections.max.idle.ms":
		return msDur(&c.server.IdleTimeout)
	case "max.connections.per.ip":
		if err := positive(); err != nil {
			return err
		}
		c.server.MaxConnectionsPerIP = int(min(n, math.MaxInt32))
	case "max.connections.per.ip.overrides":
		over, err := parseIPOverrides(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		c.server.MaxConnectionsPerIPOverrides = over
	case "connection.failed.authentication.delay.ms":
		if nerr != nil || n < 0 {
			return fmt.Errorf("%s: want a non-negative number", k)
		}
		c.server.FailedAuthenticationDelay = time.Duration(n) * time.Millisecond
		if n == 0 {
			c.server.FailedAuthenticationDelay = -1 // none, as Kafka's 0
		}
	case "fetch.max.bytes":
		if nerr != nil || n < 1024 || n > math.MaxInt32 {
			return fmt.Errorf("%s: want 1024 to %d", k, math.MaxInt32)
		}
		c.server.FetchMaxBytes = int(n)
	case "node.id", "broker.id":
		if err := positive(); err != nil {
			return err
		}
		c.server.NodeID = int32(n)
	case "auto.create.topics.enable":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s: want true or false", k)
		}
		c.server.AutoCreateTopics = b
	default:
		if ok, err := c.aclOverride(k, v); ok {
			return err
		}
		if ok, err := c.throttleOverride(k, v); ok {
			return err
		}
		if ok, err := c.txnOverride(k, v); ok { // transactions_serve.go
			return err
		}
		names := []string{"num.partitions", "default.replication.factor", "log.retention.check.interval.ms",
			"log.flush.offset.checkpoint.interval.ms", "group.min.session.timeout.ms", "group.initial.rebalance.delay.ms",
			"socket.request.max.bytes", "max.connections", "connections.max.idle.ms", "node.id", "auto.create.topics.enable",
			"max.connections.per.ip", "max.connections.per.ip.overrides", "connection.failed.authentication.delay.ms", "fetch.max.bytes"}
		names = append(names, aclOverrideKeys...)
		names = append(names, throttleOverrideKeys...)
		names = append(names, txnOverrideKeys...)
		for bk := range brokerTopicKeys {
			names = append(names, bk)
		}
		slices.Sort(names)
		return fmt.Errorf("unknown setting %q (known: %s)", k, strings.Join(names, ", "))
	}
	return nil
}

// parseIPOverrides reads Kafka's max.connections.per.ip.overrides,
// IP:N,IP:N (an IPv6 address's colons are its own: N follows the last).
func parseIPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return nil, fmt.Errorf("%q: want IP:N", item)
		}
		ip, ns := strings.Trim(item[:i], "[]"), item[i+1:]
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("%q: %q is not an IP address", item, ip)
		}
		n, err := strconv.Atoi(ns)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want a non-negative count", item)
		}
		out[ip] = n
	}
	return out, nil
}

// serve runs the broker until SIGINT or SIGTERM. It binds its ports
// first, then opens (or creates) the data dir, which recovers what a crash
// left, and prints "listening on" only when every port is bound and the
// data dir is open: a script that waits for the line can connect. A start
// that fails (a port in use, a data dir in use) leaves no data dir it
// created behind.
func serve(e *env, c *serveConfig, logger *stdlog.Logger) (err error) {
	ctx, stopSignals := interruptible()
	defer stopSignals()
	var lc net.ListenConfig
	lc.SetMultipathTCP(false) // as kafka.Listen: sendfile needs plain TCP
	ln, err := lc.Listen(context.Background(), "tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close() // after a failed start; the server's Close closes it too
	var metricsLn net.Listener
	if c.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", c.metricsAddr); err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		defer metricsLn.Close()
	}
	created, err := makeDataDir(c.dataDir)
	if err != nil {
		return err
	}
	started := false
	defer func() {
		if !started && created {
			os.RemoveAll(c.dataDir) // made by this start, which failed: leave nothing behind
		}
	}()
	c.broker.Logger = logger
	c.server.Logger = logger
	c.server.Listener = ln
	var rec *metrics.Recorder
	if c.metricsAddr != "" {
		// The library pushes what polling cannot see (requests, traffic,
		// flushes, the purgatory, cleaner passes); /metrics polls the rest.
		// Without --metrics-addr the hooks stay nil and cost nothing.
		rec = metrics.NewRecorder()
		c.broker.Metrics, c.server.Metrics = rec, rec
	}
	b, err := log.Open(c.dataDir, c.broker)
	if errors.Is(err, log.ErrDirInUse) {
		return fmt.Errorf("data dir %s is in use by another broker or strata command: %w", c.dataDir, err)
	}
	if err != nil {
		return err
	}
	defer closeBroker(b, &err)
	srv, err := kafka.Listen(c.listen, b, c.server)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer func() {
		if cerr := srv.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close listener: %w", cerr)
		}
	}()
	if metricsLn != nil {
		stop, addr := serveMetricsOn(metricsLn, logmetrics.Handler(b, rec), logger)
		defer stop()
		fmt.Fprintf(e.stdout, "metrics on %s\n", addr)
		logger.Info("serving metrics", "addr", addr, "path", "/metrics")
	}
	started = true
	fmt.Fprintf(e.stdout, "listening on %s\n", srv.Addr())
	logger.Info("serving", "addr", srv.Addr(), "data_dir", c.dataDir, "topics", len(b.Topics()))
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// startedWriter passes writes on to w and notes "listening on": the line
// serve prints once it has started.
type startedWriter struct {
	w       io.Writer
	started bool
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("listening on ")) {
		s.started = true
	}
	return s.w.Write(p)
}

// makeDataDir creates dir if it does not exist; created says it did.
func makeDataDir(dir string) (created bool, err error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("data dir: %w", err)
	}
	return true, nil
}

// serveMetricsHandler serves h as /metrics on addr.
func serveMetricsHandler(addr string, h http.Handler, logger *stdlog.Logger) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("metrics listener: %w", err)
	}
	stop, bound = serveMetricsOn(ln, h, logger)
	return stop, bound, nil
}

// serveMetricsOn serves h as /metrics on ln until stop.
func serveMetricsOn(ln net.Listener, h http.Handler, logger *stdlog.Logger) (stop func(), bound string) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: stdlog.NewLogLogger(logger.Handler(), stdlog.LevelWarn)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
		wg.Wait()
	}, ln.Addr().String()
}
