package machine

import (
	"errors"
	"time"

	"github.com/strata-log/strata/log"
)

// NoEpoch is a leader epoch that is not known or not given (Kafka's
// UNDEFINED_EPOCH).
const NoEpoch int32 = -1

// NoOffset is an offset that is not known or not given (Kafka's
// UNDEFINED_EPOCH_OFFSET, and the LEO of a follower that has not fetched
// since this broker became leader).
const NoOffset int64 = -1

// DefaultReplicaLagTime is how long a follower may go without catching up
// before it leaves the ISR (Kafka's replica.lag.time.max.ms).
const DefaultReplicaLagTime = 30 * time.Second

// EpochCache is the part of a log's leader-epoch cache the machines read.
//
// EndOffsetFor returns, as Kafka's LeaderEpochFileCache.endOffsetFor does,
// the largest epoch e ≤ epoch that the log holds and the end offset of e: the
// start offset of the next larger epoch, or the log end offset when e is the
// latest. When epoch is below every epoch in the cache it returns (epoch,
// start offset of the first epoch); when epoch is NoEpoch, above the latest
// epoch, or the cache is empty it returns (NoEpoch, NoOffset).
type EpochCache interface {
	EndOffsetFor(epoch int32) (int32, int64)
}

// EpochEnd is a leader epoch with its end offset, as in Kafka's Fetch
// DivergingEpoch and OffsetForLeaderEpoch answers.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// Errors the machines answer with. Each is a sentinel to test with
// errors.Is; those with a meaning in package log are log's.
var (
	// ErrNotLeader: this broker does not lead the partition (Kafka's
	// NOT_LEADER_OR_FOLLOWER). A waiting acks=all produce ends with it when
	// leadership moves away.
	ErrNotLeader = log.ErrNotLeader
	// ErrFencedLeaderEpoch: the request's leader epoch is older than the
	// leader's (Kafka's FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("replica: fenced leader epoch")
	// ErrUnknownLeaderEpoch: the request's leader epoch is newer than the
	// leader's: this broker has not seen the metadata yet (Kafka's
	// UNKNOWN_LEADER_EPOCH).
	ErrUnknownLeaderEpoch = errors.New("replica: unknown leader epoch")
	// ErrNotReplica: a follower fetch came from a broker that is not one of
	// the partition's replicas.
	ErrNotReplica = errors.New("replica: broker is not a replica of the partition")
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
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: not enough in-sync replicas after append")
)

// Action is something a machine asks its driver to do. The driver carries
// out a Step's actions in order, before it steps the machine again.
type Action interface{ isAction() }
