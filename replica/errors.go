package replica

import (
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
)

// Errors of the replication path: a produce, a fetch or a follower's fetch
// may end with them. Each is a sentinel to test with errors.Is. Those with a
// meaning in package log are log's own (ErrNotLeader is log.ErrNotLeader),
// so errors.Is holds with either name.
var (
	// ErrNotLeader: this broker does not lead the partition (Kafka's
	// NOT_LEADER_OR_FOLLOWER). A waiting acks=all produce ends with it when
	// leadership moves away.
	ErrNotLeader = log.ErrNotLeader
	// ErrFencedLeaderEpoch: the request's leader epoch is older than the
	// leader's (Kafka's FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = machine.ErrFencedLeaderEpoch
	// ErrUnknownLeaderEpoch: the request's leader epoch is newer than the
	// leader's: this broker has not seen the metadata yet (Kafka's
	// UNKNOWN_LEADER_EPOCH).
	ErrUnknownLeaderEpoch = machine.ErrUnknownLeaderEpoch
	// ErrNotReplica: a follower fetch came from a broker that is not one of
	// the partition's replicas.
	ErrNotReplica = machine.ErrNotReplica
	// ErrOffsetOutOfRange: a follower fetched below the leader's log start
	// or above its log end.
	ErrOffsetOutOfRange = log.ErrOffsetOutOfRange
	// ErrNotEnoughReplicas: an acks=all produce was refused before its
	// append because the ISR is smaller than MinInSyncReplicas.
	ErrNotEnoughReplicas = log.ErrNotEnoughReplicas
	// ErrNotEnoughReplicasAfterAppend: an acks=all produce was appended and
	// replicated up to the HW, but by then the ISR had fewer than
	// MinInSyncReplicas members (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	// The records are in the log; the producer may retry (and its
	// idempotence keeps them once).
	ErrNotEnoughReplicasAfterAppend = machine.ErrNotEnoughReplicasAfterAppend
)

// DefaultReplicaLagTime is how long a follower may go without catching up
// before it leaves the ISR (Kafka's replica.lag.time.max.ms).
const DefaultReplicaLagTime = 30 * time.Second

// ErrUnreachable: a member could not be reached (its link is cut, it is
// stopped, or it does not exist). It is log.ErrUnreachable, the transient
// error a Producer or Consumer retries.
var ErrUnreachable = log.ErrUnreachable

// ErrInvalidConfig is returned by Start for a Config that cannot work. It
// is log.ErrInvalidConfig.
var ErrInvalidConfig = log.ErrInvalidConfig
