package controller

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/log"
)

// Sentinel errors. Every error a Controller method returns for a rejected
// request wraps one of these, so callers test with errors.Is. Those with a
// meaning in package log match log's sentinel too (ErrUnknownTopic is a
// log.ErrUnknownTopic, ErrNotPartitionLeader a log.ErrNotLeader, ErrClosed
// a log.ErrClosed, ...): log's are the public vocabulary.
var (
	// ErrNotController: the member asked is not the active controller and the
	// request could not be forwarded. The concrete error is a
	// *NotControllerError naming the leader, if one is known.
	ErrNotController = errors.New("controller: not the active controller")
	// ErrLeadershipLost: the active controller lost leadership after it
	// proposed the change and before the change was known to be committed.
	// The change may or may not have been committed; read the metadata to
	// find out. Never retried automatically.
	ErrLeadershipLost = errors.New("controller: leadership lost, outcome of the change unknown")
	// ErrClosed: the Controller is closed.
	ErrClosed = errs.Mark("controller: closed", log.ErrClosed)

	ErrInvalidConfig            = errs.Mark("controller: invalid config", log.ErrInvalidConfig)
	ErrInvalidRequest           = errs.Mark("controller: invalid request", log.ErrInvalidRequest)
	ErrUnknownBroker            = errors.New("controller: unknown broker")
	ErrStaleBrokerEpoch         = errors.New("controller: stale broker epoch")
	ErrInvalidTopic             = errs.Mark("controller: invalid topic name", log.ErrInvalidTopic)
	ErrTopicExists              = errs.Mark("controller: topic already exists", log.ErrTopicExists)
	ErrUnknownTopic             = errs.Mark("controller: unknown topic", log.ErrUnknownTopic)
	ErrUnknownPartition         = errs.Mark("controller: unknown partition", log.ErrUnknownPartition)
	ErrInvalidPartitions        = errs.Mark("controller: invalid partition count", log.ErrInvalidPartitions)
	ErrInvalidReplicationFactor = errs.Mark("controller: invalid replication factor", log.ErrInvalidReplicationFactor)
	// ErrNotPartitionLeader: an AlterPartition came from a broker that does not
	// lead the partition (Kafka's NOT_LEADER_OR_FOLLOWER).
	ErrNotPartitionLeader = errs.Mark("controller: broker is not the partition leader", log.ErrNotLeader)
	// ErrFencedLeaderEpoch: an AlterPartition carried a leader epoch other
	// than the current one (Kafka's FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("controller: fenced leader epoch")
	// ErrStalePartitionEpoch: an AlterPartition carried a partition epoch
	// other than the current one (Kafka's INVALID_UPDATE_VERSION).
	ErrStalePartitionEpoch = errors.New("controller: stale partition epoch")
	// ErrInvalidISR: the proposed ISR is empty, has duplicates, names a
	// non-replica, or leaves out the leader.
	ErrInvalidISR = errors.New("controller: invalid ISR")
	// ErrIneligibleReplica: the proposed ISR names a fenced or unknown broker
	// (Kafka's INELIGIBLE_REPLICA).
	ErrIneligibleReplica = errors.New("controller: ineligible replica in ISR")
	// ErrProducerIDsExhausted: the int64 producer id space is used up.
	ErrProducerIDsExhausted = errs.Mark("controller: producer ids exhausted", log.ErrProducerIDsExhausted)
	// ErrCorrupt: a metadata entry or snapshot failed to decode.
	ErrCorrupt = errs.Mark("controller: corrupt metadata", log.ErrCorrupt)
)

// errInapplicable marks a record that decodes but does not fit the image it
// is applied to. The decisions never produce one; seeing it means a bug, and
// it is applied (skipped) identically on every member.
var errInapplicable = errors.New("controller: record does not apply to the metadata image")

// NotControllerError is returned when a request could not be brought to
// the active controller: none is known (LeaderID 0), or the one this member
// knows could not be reached (Err says why), or it answered that it is not
// the controller any more. It names the leader as this member sees it.
type NotControllerError struct {
	LeaderID   int
	LeaderAddr string
	Err        error // the cause, if any
}

func (e *NotControllerError) Error() string {
	msg := "controller: not the active controller (no leader known)"
	if e.LeaderID != 0 {
		msg = fmt.Sprintf("controller: not the active controller (leader is %d at %s)", e.LeaderID, e.LeaderAddr)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNotController) true.
func (e *NotControllerError) Is(target error) bool { return target == ErrNotController }

// Unwrap returns the cause.
func (e *NotControllerError) Unwrap() error { return e.Err }

// errorCode names a sentinel on the wire of the forwarding RPC.
func errorCode(err error) string {
	for _, c := range wireErrors() {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "unknown"
}

func errorForCode(code string) error {
	for _, c := range wireErrors() {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

type wireErrorCode struct {
	code string
	err  error
}

func wireErrors() []wireErrorCode {
	return []wireErrorCode{
		{"not_controller", ErrNotController},
		{"leadership_lost", ErrLeadershipLost},
		{"closed", ErrClosed},
		{"invalid_request", ErrInvalidRequest},
		{"unknown_broker", ErrUnknownBroker},
		{"stale_broker_epoch", ErrStaleBrokerEpoch},
		{"invalid_topic", ErrInvalidTopic},
		{"topic_exists", ErrTopicExists},
		{"unknown_topic", ErrUnknownTopic},
		{"unknown_partition", ErrUnknownPartition},
		{"invalid_partitions", ErrInvalidPartitions},
		{"invalid_replication_factor", ErrInvalidReplicationFactor},
		{"not_partition_leader", ErrNotPartitionLeader},
		{"fenced_leader_epoch", ErrFencedLeaderEpoch},
		{"stale_partition_epoch", ErrStalePartitionEpoch},
		{"invalid_isr", ErrInvalidISR},
		{"ineligible_replica", ErrIneligibleReplica},
		{"corrupt", ErrCorrupt},
		{"producer_ids_exhausted", ErrProducerIDsExhausted},
		{"invalid_config", ErrInvalidConfig},
	}
}

// remoteError is an error returned by another member over the forwarding
// RPC: its text as the remote formatted it, matching the same sentinel.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }
