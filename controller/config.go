package controller

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"time"

	"github.com/strata-log/strata/clock"
)

// Peer is one voter of the controller quorum.
type Peer struct {
	ID int // the member's NodeID, > 0
	// RaftAddr is where the member listens; Raft and the forwarding of
	// requests to the active controller share it.
	RaftAddr string
}

// Config configures one member of the controller quorum. The zero value of
// every optional field means the default.
type Config struct {
	NodeID   int    // this member's ID, > 0, unique among Peers
	Dir      string // Raft log and stable store (raft.db) and snapshots live here
	RaftAddr string // "host:port" to listen on; "127.0.0.1:0" only for a single member
	// Peers are the voters, the same list on every member. Nil means a
	// single-member quorum of this member. The list bootstraps the quorum
	// on the very first start; later starts resume from Dir and ignore it.
	// A member whose NodeID is not among them is a broker only
	// (membership.go): it joins the quorum as a non-voter, through them.
	Peers []Peer

	Logger  *slog.Logger // nil → discard; Raft's own logs go here, Info lowered to Debug
	Network Network      // nil → TCP
	Clock   clock.Clock  // session timeouts and the leader-imbalance check run on it; nil → the system clock
	// Rand places replicas and draws topic IDs; nil → seeded from crypto/rand.
	// Only the active controller's event loop uses it.
	Rand Rand
	// TLS, when set, makes every connection on RaftAddr — Raft and forwarded
	// requests, both ways — mutual TLS over Network: see MutualTLS.
	TLS *tls.Config

	// HeartbeatInterval is how often brokers are to heartbeat (Kafka's
	// broker.heartbeat.interval.ms); 0 → DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// SessionTimeout is how long after its last heartbeat a broker is fenced
	// (Kafka's broker.session.timeout.ms); 0 → DefaultSessionTimeout.
	SessionTimeout time.Duration

	// LeaderImbalanceCheckInterval is how often the active controller moves
	// leadership back to preferred replicas (Kafka's
	// auto.leader.rebalance.enable with
	// leader.imbalance.check.interval.seconds); 0 → 300 s, < 0 → never.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePercentage is the share of a broker's preferred
	// partitions it may not lead before they are moved back to it (Kafka's
	// leader.imbalance.per.broker.percentage); 0 → 10, at most 100.
	LeaderImbalancePercentage int

	Raft RaftConfig
}

// The broker session defaults: a dead broker is fenced, and its partitions
// led by others, about 2 s after its last heartbeat. Kafka's are 2 s and
// 9 s; these are shorter so that a member killed outright is replaced
// within 3 s (the controller's heartbeats are cheap: no Raft entry unless
// a broker's fencing changes). A live broker stalled for over 2 s is
// fenced, and unfenced by its next heartbeat.
const (
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultSessionTimeout    = 2 * time.Second
)

// Kafka's defaults for preferred-leader rebalancing.
const (
	DefaultLeaderImbalanceCheckInterval = 300 * time.Second
	DefaultLeaderImbalancePercentage    = 10
)

// RaftConfig holds the Raft timings. Zero fields take hashicorp/raft's
// defaults, which suit a LAN; LoopbackRaft suits tests on one machine.
type RaftConfig struct {
	HeartbeatTimeout   time.Duration // follower without a leader this long starts an election; 0 → 1 s
	ElectionTimeout    time.Duration // candidate without a result this long retries; 0 → 1 s
	LeaderLeaseTimeout time.Duration // leader without a quorum this long steps down; 0 → 500 ms
	CommitTimeout      time.Duration // idle leader heartbeat; 0 → 50 ms
	MaxAppendEntries   int           // entries per append and per FSM batch; 0 → 64
	SnapshotInterval   time.Duration // how often to check for a snapshot; 0 → 120 s
	SnapshotThreshold  uint64        // entries since the last snapshot that trigger one; 0 → 8192
	TrailingLogs       uint64        // entries kept after a snapshot; 0 → 10240
}

// LoopbackRaft returns Raft timings for a quorum on one machine (tests,
// the unit-test fixture): a dead leader is replaced in about 150–250 ms.
// The lease equals the heartbeat timeout so that a busy machine (a CPU
// stall of tens of milliseconds) does not make the leader step down.
func LoopbackRaft() RaftConfig {
	return RaftConfig{
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Network == nil {
		c.Network = TCPNetwork{}
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Rand == nil {
		var seed [16]byte
		_, _ = rand.Read(seed[:])
		c.Rand = mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.LeaderImbalanceCheckInterval == 0 {
		c.LeaderImbalanceCheckInterval = DefaultLeaderImbalanceCheckInterval
	}
	if c.LeaderImbalancePercentage == 0 {
		c.LeaderImbalancePercentage = DefaultLeaderImbalancePercentage
	}
	if c.Peers == nil {
		c.Peers = []Peer{{ID: c.NodeID, RaftAddr: c.RaftAddr}}
	} else {
		c.Peers = append([]Peer(nil), c.Peers...)
	}
	r := &c.Raft
	setDefault(&r.HeartbeatTimeout, time.Second)
	setDefault(&r.ElectionTimeout, time.Second)
	setDefault(&r.LeaderLeaseTimeout, 500*time.Millisecond)
	setDefault(&r.CommitTimeout, 50*time.Millisecond)
	setDefault(&r.MaxAppendEntries, 64)
	setDefault(&r.SnapshotInterval, 120*time.Second)
	setDefault(&r.SnapshotThreshold, 8192)
	setDefault(&r.TrailingLogs, 10240)
	return c
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.NodeID <= 0:
		return bad("NodeID %d, want > 0", c.NodeID)
	case c.Dir == "":
		return bad("no Dir")
	case c.RaftAddr == "":
		return bad("no RaftAddr")
	case c.HeartbeatInterval < 0 || c.SessionTimeout <= c.HeartbeatInterval:
		return bad("SessionTimeout %v must exceed HeartbeatInterval %v", c.SessionTimeout, c.HeartbeatInterval)
	case c.LeaderImbalancePercentage < 0 || c.LeaderImbalancePercentage > 100:
		return bad("LeaderImbalancePercentage %d, want 0..100", c.LeaderImbalancePercentage)
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		return bad("RaftAddr %q: %v", c.RaftAddr, err)
	}
	if len(c.Peers) == 0 {
		return bad("Peers names no voter")
	}
	ids, addrs := map[int]bool{}, map[string]bool{}
	self := false // a voter; false: a broker only
	for _, p := range c.Peers {
		if p.ID <= 0 || p.RaftAddr == "" || ids[p.ID] || addrs[p.RaftAddr] {
			return bad("peer %+v: IDs must be > 0 and IDs and addresses unique", p)
		}
		ids[p.ID], addrs[p.RaftAddr] = true, true
		if p.ID == c.NodeID {
			if p.RaftAddr != c.RaftAddr {
				return bad("peer %d has address %q, but RaftAddr is %q", p.ID, p.RaftAddr, c.RaftAddr)
			}
			self = true
		}
	}
	if !self && addrs[c.RaftAddr] {
		return bad("RaftAddr %q is a voter's, but NodeID %d is not a voter", c.RaftAddr, c.NodeID)
	}
	if self && len(c.Peers) > 1 {
		if _, port, _ := net.SplitHostPort(c.RaftAddr); port == "0" {
			return bad("RaftAddr %q: a port is needed when there are peers", c.RaftAddr)
		}
	}
	return nil
}
