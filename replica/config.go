package replica

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/replica/internal/transport"
)

// Peer is one controller voter as every member's Config lists it.
type Peer struct {
	ID       int
	Addr     string // data plane (Kafka protocol)
	RaftAddr string // controller quorum (Raft and forwarded controller requests)
}

// Config configures a cluster member. The zero value of every optional
// field means the default.
type Config struct {
	ID       int    // unique, > 0
	Dir      string // data dir: partitions in Dir/data, the controller's Raft state in Dir/controller
	Addr     string // data plane (Kafka protocol); "127.0.0.1:0" allowed
	RaftAddr string
	// Peers are the controller quorum's initial voters, identical on every
	// member. A member whose ID is not among them is a broker only
	// (KRaft's process.roles=broker): it joins the quorum as a non-voter,
	// follows the metadata, registers, holds replicas and serves clients,
	// and votes in nothing. It can join a running cluster at any time.
	Peers []Peer

	Logger *slog.Logger // nil → discard
	Clock  clock.Clock  // ISR lag and ticks; nil → the system clock

	// Network carries the controller's Raft and forwarding traffic on
	// RaftAddr and, unless Local is set, the data plane on Addr (Kafka
	// clients, replication, forwarded calls); nil → TCP. Tests pass a
	// testnet node, with both addresses reserved on it.
	Network controller.Network
	// TLS, when set, is mutual TLS between members, with certificates of
	// the cluster's CA only (see tls.go): on RaftAddr (Raft, forwarded
	// controller requests) and on the data plane (replication, forwarded
	// calls, and so Kafka clients on Addr too). Its Certificates are this
	// member's, its RootCAs (or ClientCAs) the cluster's CA.
	TLS *tls.Config
	// Listeners are client listeners (listeners.go): Kafka-protocol
	// servers for clients, each with its own TLS and SASL, while Addr
	// stays the inter-broker listener (and, with TLS, takes only the
	// cluster's certificates). Metadata on a listener gives every broker's
	// address on that listener. None: clients use Addr, as before. They
	// listen through Network when the data plane on Addr does.
	Listeners []Listener
	// Authorizer, when set, checks every request on the client listeners
	// against the cluster's ACLs (kept in the metadata: security.go), as
	// kafka.Config.Authorizer does: super users, and everyone where no ACL
	// names a resource if AllowIfNoACL (Kafka's super.users and
	// allow.everyone.if.no.acl.found). It needs Listeners.
	Authorizer *acl.Config
	// Local, when set, joins this member to an in-process network of
	// members (tests, examples; replicatest.NewLocalNetwork makes one),
	// which then carries replication and forwarded client calls between
	// members instead of the Kafka protocol on the data plane.
	Local *transport.LocalNetwork

	// ReplicaLagTime: a follower not caught up for this long leaves the
	// ISR (Kafka's replica.lag.time.max.ms); 0 → 30 s.
	ReplicaLagTime time.Duration
	// FetchMaxWait is how long a leader holds a follower's fetch that finds
	// nothing new (replica.fetch.wait.max.ms); 0 → 500 ms.
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds one partition in a follower's fetch; 0 → 1 MiB.
	FetchMaxBytes int
	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate
	// cap, in bytes per second, what this member sends as a leader to,
	// and fetches as a follower for, replicas out of the ISR — those
	// catching up, as a reassignment's new replicas do (Kafka's
	// leader/follower.replication.throttled.rate, throttle.go); 0 → no
	// cap. ReplicationQuotaWindow is the quotas' sample window (Kafka's
	// replication.quota.window.size.seconds; 11 samples); 0 → 1 s.
	LeaderReplicationThrottledRate   int64
	FollowerReplicationThrottledRate int64
	ReplicationQuotaWindow           time.Duration
	// ProduceTimeout bounds an acks=all produce whose context has no
	// deadline; 0 → 30 s.
	ProduceTimeout time.Duration
	// LeaderImbalanceCheckInterval and LeaderImbalancePercentage are the
	// controller's preferred-leader rebalancing (Kafka's
	// auto.leader.rebalance.enable): every interval, leadership moves back
	// to each partition's first replica where a broker leads less than
	// (100 - percentage)% of the partitions it is preferred for; 0 → 300 s
	// and 10%, an interval < 0 turns it off.
	LeaderImbalanceCheckInterval time.Duration
	LeaderImbalancePercentage    int

	// StartTimeout bounds how long Start waits for the member to be
	// registered, caught up with the metadata and unfenced when a quorum
	// of voters is reachable (ready.go); past it Start fails with
	// ErrNotCaughtUp. 0 → DefaultStartTimeout (60 s, Kafka's
	// initial.broker.registration.timeout.ms).
	StartTimeout time.Duration

	// HeartbeatInterval and SessionTimeout are the controller's (broker
	// heartbeats and fencing); 0 → controller.DefaultHeartbeatInterval
	// and DefaultSessionTimeout (500 ms and 2 s).
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	// Raft holds the controller quorum's Raft timings; controller.LoopbackRaft
	// suits members on one machine.
	Raft controller.RaftConfig

	// OffsetsTopicPartitions is the partition count __consumer_offsets is
	// created with (Kafka's offsets.topic.num.partitions); 0 → 50.
	OffsetsTopicPartitions int
	// TransactionStatePartitions is the partition count
	// __transaction_state is created with (Kafka's
	// transaction.state.log.num.partitions); 0 → 50.
	TransactionStatePartitions int
	// TransactionMaxTimeout, TransactionalIDExpiration and
	// TransactionAbortTimedOutInterval are the transaction coordinators'
	// settings, as log.Config's of the same names (Kafka's
	// transaction.max.timeout.ms, transactional.id.expiration.ms,
	// transaction.abort.timed.out.transaction.cleanup.interval.ms); 0 →
	// 15 minutes, 7 days and 10 s (txn.go).
	TransactionMaxTimeout            time.Duration
	TransactionalIDExpiration        time.Duration
	TransactionAbortTimedOutInterval time.Duration
	// TransactionVersion is the transaction.version feature the member's
	// Kafka servers finalize, as kafka.Config's (every member of a
	// cluster should have the same): 0 → 2, Kafka 4's for a new cluster
	// (KIP-890 part 2: Kafka 4 clients skip AddPartitionsToTxn and
	// AddOffsetsToTxn and get a new epoch per transaction; the
	// coordinators abort a timed-out or fenced transaction the same way);
	// negative → 0, at most 2.
	TransactionVersion int16

	// Metrics, when set, is told of every ISR change this member commits
	// as a leader, and is given to its store (flushes) and its Kafka
	// server (requests, traffic); nil → none. See metrics.Hooks.
	Metrics metrics.Hooks
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.ReplicaLagTime == 0 {
		c.ReplicaLagTime = DefaultReplicaLagTime
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = 500 * time.Millisecond
	}
	if c.ReplicationQuotaWindow == 0 {
		c.ReplicationQuotaWindow = quotaWindow
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = 1 << 20
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.ProduceTimeout == 0 {
		c.ProduceTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = controller.DefaultHeartbeatInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = controller.DefaultSessionTimeout
	}
	c.Peers = append([]Peer(nil), c.Peers...)
	return c.withListenerDefaults()
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: replica: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.ID <= 0:
		return bad("ID %d, want > 0", c.ID)
	case c.Dir == "":
		return bad("no Dir")
	case c.Addr == "":
		return bad("no Addr")
	case c.RaftAddr == "":
		return bad("no RaftAddr")
	case c.ReplicaLagTime < 0 || c.FetchMaxWait < 0 || c.ProduceTimeout < 0 || c.StartTimeout < 0 || c.ReplicationQuotaWindow < 0:
		return bad("negative duration")
	case c.LeaderReplicationThrottledRate < 0 || c.FollowerReplicationThrottledRate < 0:
		return bad("negative replication throttled rate")
	}
	if _, _, err := c.dataPlaneTLS(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil { // security.go
		return err
	}
	if err := c.validateTxn(); err != nil { // txn.go
		return err
	}
	return c.validateListeners()
}
