package controller

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a Controller method returns for a rejected
// request wraps one of these, so callers test with errors.Is.
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
	ErrClosed = errors.New("controller: closed")

	ErrInvalidConfig            = errors.New("controller: invalid config")
	ErrInvalidRequest           = errors.New("controller: invalid request")
	ErrUnknownBroker            = errors.New("controller: unknown broker")
	ErrStaleBrokerEpoch         = errors.New("controller: stale broker epoch")
	ErrInvalidTopic             = errors.New("controller: invalid topic name")
	ErrTopicExists              = errors.New("controller: topic already exists")
	ErrUnknownTopic             = errors.New("controller: unknown topic")
	ErrUnknownPartition         = errors.New("controller: unknown partition")
	ErrInvalidPartitions        = errors.New("controller: invalid partition count")
	ErrInvalidReplicationFactor = errors.New("controller: invalid replication factor")
	// ErrNotPartitionLeader: an AlterPartition came from a broker that does not
	// lead the partition (Kafka's NOT_LEADER_OR_FOLLOWER).
	ErrNotPartitionLeader = errors.New("controller: broker is not the partition leader")
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
	ErrProducerIDsExhausted = errors.New("controller: producer ids exhausted")
	// ErrCorrupt: a metadata entry or snapshot failed to decode.
	ErrCorrupt = errors.New("controller: corrupt metadata")
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
