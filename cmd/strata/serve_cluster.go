package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	stdlog "log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/metrics/replicametrics"
	"github.com/strata-log/strata/replica"
)

// clusterFlags make serve a cluster member (replica.Start) instead of a
// standalone broker: the Raft address of this member and the controller
// quorum's voters, the same list on every member. A member whose --node-id
// is not among them is a broker only (KRaft's process.roles=broker).
type clusterFlags struct {
	raftAddr string
	peers    []replica.Peer
	loopback bool
	// Broker sessions (Kafka's broker.heartbeat.interval.ms and
	// broker.session.timeout.ms); 0: replica's defaults.
	heartbeat, session time.Duration
	// Mutual TLS between members (and so on --listen too).
	certFile, keyFile, caFile string
	// The client listener (replica.Listener), secured by --tls-cert and
	// --sasl-users.
	clientAddr, clientAdvertised string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.raftAddr, "raft-addr", "", "`ADDR`: this member's controller (Raft) host:port; with --peer, serve runs a cluster member\n(keep it, and every member's --listen, on a private network: see the README)")
	fs.Func("peer", "`ID=KAFKA_ADDR,RAFT_ADDR`: a controller voter; repeatable, the same list on every member (a --node-id\nnot in it joins the running cluster as a broker only: it holds replicas and serves clients, and votes in nothing)", func(v string) error {
		p, err := parsePeer(v)
		if err == nil {
			c.peers = append(c.peers, p)
		}
		return err
	})
	fs.BoolVar(&c.loopback, "raft-loopback", false, "Raft timings for members on one machine (elections in about 200 ms, not seconds)")
	fs.DurationVar(&c.heartbeat, "broker-heartbeat-interval", controller.DefaultHeartbeatInterval, "`DURATION` between a member's heartbeats to the active controller (Kafka's broker.heartbeat.interval.ms)")
	fs.DurationVar(&c.session, "broker-session-timeout", controller.DefaultSessionTimeout, "`DURATION` without a heartbeat after which the controller fences a member and moves the leadership\nof its partitions (Kafka's broker.session.timeout.ms; Kafka's default is 9s)")
	fs.StringVar(&c.certFile, "cluster-tls-cert", "", "`FILE`: PEM certificate of this member, signed by --cluster-ca: mutual TLS on the Raft port and on --listen")
	fs.StringVar(&c.keyFile, "cluster-tls-key", "", "`FILE`: PEM private key of --cluster-tls-cert")
	fs.StringVar(&c.caFile, "cluster-ca", "", "`FILE`: PEM certificate of the cluster's CA, the only one whose certificates members and clients may present")
	fs.StringVar(&c.clientAddr, "client-addr", "", "`ADDR`: a cluster member's client listener host:port, secured by --tls-cert/--tls-key/--tls-client-ca\nand --sasl-users; clients given it learn every member's client listener, while --listen\nstays the members' own (port 0: any free port)")
	fs.StringVar(&c.clientAdvertised, "client-advertised-addr", "", "`ADDR`: the host:port clients are given for --client-addr (default: the bound address)")
}

// tlsConfig returns the members' mutual TLS, nil without the flags.
func (c *clusterFlags) tlsConfig() (*tls.Config, error) {
	if c.certFile == "" && c.keyFile == "" && c.caFile == "" {
		return nil, nil
	}
	if c.certFile == "" || c.keyFile == "" || c.caFile == "" {
		return nil, usagef("--cluster-tls-cert, --cluster-tls-key and --cluster-ca go together")
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, usagef("--cluster-tls-cert/--cluster-tls-key: %v", err)
	}
	pool, err := readCertPool(c.caFile)
	if err != nil {
		return nil, usagef("--cluster-ca: %v", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func (c *clusterFlags) enabled() bool { return c.raftAddr != "" || len(c.peers) > 0 }

// parsePeer parses ID=KAFKA_ADDR,RAFT_ADDR.
func parsePeer(v string) (replica.Peer, error) {
	id, addrs, ok := strings.Cut(v, "=")
	kafkaAddr, raftAddr, ok2 := strings.Cut(addrs, ",")
	n, err := strconv.Atoi(id)
	if !ok || !ok2 || err != nil || n <= 0 || kafkaAddr == "" || raftAddr == "" {
		return replica.Peer{}, fmt.Errorf("want ID=KAFKA_ADDR,RAFT_ADDR with a positive ID, not %q", v)
	}
	return replica.Peer{ID: n, Addr: kafkaAddr, RaftAddr: raftAddr}, nil
}

// serveCluster runs a cluster member until SIGINT or SIGTERM; Close is
// Kafka's controlled shutdown (leadership moves off, then the member stops).
func serveCluster(e *env, c *serveConfig, cl *clusterFlags, overrides int, logger *stdlog.Logger) (err error) {
	switch {
	case overrides > 0:
		return usagef("--override and the topic-setting flags are for a standalone broker (a cluster member takes its topics' settings at topic creation), but for %s", strings.Join(append(append(slices.Clone(aclOverrideKeys), throttleOverrideKeys...), clusterTxnOverrideKeys...), ", "))
	case c.server.Authorizer != nil && cl.clientAddr == "":
		return usagef("%s authorize a cluster member's client listener: give it with --client-addr", strings.Join(aclOverrideKeys, ", "))
	case cl.raftAddr == "":
		return usagef("a cluster member needs --raft-addr")
	case len(cl.peers) == 0:
		return usagef("a cluster member needs --peer for every controller voter")
	case (c.server.TLS != nil || c.server.SASL != nil) && cl.clientAddr == "":
		return usagef("--tls-cert and --sasl-users secure a cluster member's client listener: give it with --client-addr (--listen takes the members' mutual TLS, --cluster-tls-cert)")
	case cl.clientAdvertised != "" && cl.clientAddr == "":
		return usagef("--client-advertised-addr needs --client-addr")
	case cl.heartbeat <= 0 || cl.session <= cl.heartbeat:
		return usagef("--broker-session-timeout (%v) must exceed --broker-heartbeat-interval (%v), which must be positive", cl.session, cl.heartbeat)
	}
	voter := false // not in --peer: a broker only
	for _, p := range cl.peers {
		if p.ID == int(c.server.NodeID) {
			voter = true
			if p.RaftAddr != cl.raftAddr {
				return usagef("--peer %d says its Raft address is %s, --raft-addr says %s", p.ID, p.RaftAddr, cl.raftAddr)
			}
		} else if p.RaftAddr == cl.raftAddr {
			return usagef("--raft-addr %s is voter %d's, not --node-id %d's", cl.raftAddr, p.ID, c.server.NodeID)
		}
	}
	ctx, stopSignals := interruptible()
	defer stopSignals()
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	cfg := replica.Config{
		ID: int(c.server.NodeID), Dir: c.dataDir, Addr: c.listen, RaftAddr: cl.raftAddr,
		Peers: cl.peers, Logger: logger,
		HeartbeatInterval: cl.heartbeat, SessionTimeout: cl.session,
		// --override's transaction settings (transactions_serve.go):
		TransactionVersion:               c.server.TransactionVersion,
		TransactionMaxTimeout:            c.broker.TransactionMaxTimeout,
		TransactionalIDExpiration:        c.broker.TransactionalIDExpiration,
		TransactionAbortTimedOutInterval: c.broker.TransactionAbortTimedOutInterval,
	}
	if cl.loopback {
		cfg.Raft = controller.LoopbackRaft()
	}
	if cl.clientAddr != "" {
		cfg.Listeners = []replica.Listener{{
			Name: replica.DefaultListenerName, Addr: cl.clientAddr, AdvertisedAddr: cl.clientAdvertised,
			TLS: c.server.TLS, SASL: c.server.SASL,
		}}
	}
	cfg.Authorizer = c.server.Authorizer
	c.throttles.apply(&cfg)
	if cfg.TLS, err = cl.tlsConfig(); err != nil {
		return err
	}
	var rec *metrics.Recorder
	if c.metricsAddr != "" {
		rec = metrics.NewRecorder()
		cfg.Metrics = rec
	}
	b, err := replica.Start(cfg)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := b.Close(); err == nil && cerr != nil && !errors.Is(cerr, log.ErrClosed) {
			err = fmt.Errorf("close member: %w", cerr)
		}
	}()
	fmt.Fprintf(e.stdout, "listening on %s\n", b.Addr())
	if addr, ok := b.ListenerAddr(replica.DefaultListenerName); ok {
		fmt.Fprintf(e.stdout, "client listener on %s\n", addr)
	}
	if c.metricsAddr != "" {
		stop, addr, err := serveMetricsHandler(c.metricsAddr, replicametrics.Handler(b, rec), logger)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(e.stdout, "metrics on %s\n", addr)
	}
	logger.Info("serving as a cluster member", "id", cfg.ID, "voter", voter, "addr", b.Addr(), "raft", cl.raftAddr, "voters", len(cl.peers), "data_dir", c.dataDir,
		"leader_replication_throttled_rate", cfg.LeaderReplicationThrottledRate, "follower_replication_throttled_rate", cfg.FollowerReplicationThrottledRate)
	<-ctx.Done()
	logger.Info("shutting down")
	return nil
}

// clusterTxnOverrideKeys are the transaction settings a cluster member
// takes with --override: all of a standalone broker's (its Kafka servers'
// finalized transaction.version, its transaction coordinators' timeouts:
// replica.Config's of the same names). Every member should have the same.
var clusterTxnOverrideKeys = txnOverrideKeys

// clusterOverrides counts the overrides a cluster member does not take:
// all but the authorizer's (aclOverrideKeys), the replication throttles
// (throttleOverrideKeys) and clusterTxnOverrideKeys.
func clusterOverrides(overrides []string) int {
	n := 0
	for _, kv := range overrides {
		k, _, _ := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !slices.Contains(aclOverrideKeys, k) && !slices.Contains(throttleOverrideKeys, k) && !slices.Contains(clusterTxnOverrideKeys, k) {
			n++
		}
	}
	return n
}
