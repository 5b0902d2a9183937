package group

import (
	"errors"
	"time"

	"github.com/strata-log/strata/tp"
)

// TopicPartition names one partition of a topic (package tp).
type TopicPartition = tp.TopicPartition

// Errors of the group protocol. Test for them with errors.Is.
var (
	// ErrRebalanceInProgress: the group is rebalancing; rejoin (commit first).
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrUnknownMember: the member is not in the group (it left or was
	// removed after its session timed out); rejoin with no member id.
	ErrUnknownMember = errors.New("group: unknown member")
	// ErrIllegalGeneration: the request carries a stale generation; a commit
	// from it is refused.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrInvalidSessionTimeout: outside [MinSessionTimeout, MaxSessionTimeout].
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrClosed: the coordinator is closed.
	ErrClosed = errors.New("group: coordinator closed")
	// ErrInvalidGroup: the group id is empty or too long.
	ErrInvalidGroup = errors.New("group: invalid group id")
	// ErrInvalidRequest: a request field is out of range (a negative
	// rebalance timeout, a commit of a negative offset or partition, an empty
	// or over-long topic name). The request changes nothing.
	ErrInvalidRequest = errors.New("group: invalid request")
	// ErrInvalidConfig: New was given a Config it cannot work with.
	ErrInvalidConfig = errors.New("group: invalid config")
	// ErrCorruptOffsetRecord: DecodeOffsetRecord was given bytes that are
	// not a well-formed offset commit key and value.
	ErrCorruptOffsetRecord = errors.New("group: corrupt offset record")
	// ErrNotOffsetRecord: the key is a well-formed __consumer_offsets key of
	// another kind (group metadata, key version 2 and up); skip the record.
	ErrNotOffsetRecord = errors.New("group: not an offset commit record")
)

// Limits of names, as Kafka's.
const (
	// MaxNameLen is the longest group id and topic name accepted.
	MaxNameLen = 249
)

// JoinRequest asks to join (or rejoin) a group.
type JoinRequest struct {
	Group            string
	MemberID         string        // "" on the first join: the coordinator assigns one
	ClientID         string        // prefix of an assigned member id; may be ""
	Topics           []string      // the member's subscription
	SessionTimeout   time.Duration // 0 → 45 s (Kafka's session.timeout.ms)
	RebalanceTimeout time.Duration // 0 → 5 min (Kafka's max.poll.interval.ms)
}

// Kafka's client defaults for a JoinRequest's zero fields.
const (
	DefaultSessionTimeout   = 45 * time.Second
	DefaultRebalanceTimeout = 5 * time.Minute
)

// JoinResponse is the outcome of a rebalance for one member.
type JoinResponse struct {
	MemberID   string
	Generation int32
	Assignment []TopicPartition // this member's partitions, sorted
	Members    int              // group size in this generation
}

// OffsetStore makes commits durable. The broker appends the offsets, one
// record per partition encoded by EncodeOffsetRecord, to __consumer_offsets
// as one batch and returns once it is durable.
//
// Store is called for one group at a time (commits of a group are
// serialized, so the order of Store calls is the order in which commits take
// effect), with no lock of the Coordinator held; it must not call back into
// the Coordinator. It must not modify offsets and may not retain it after it
// returns. If it returns an error, the commit fails and changes nothing.
type OffsetStore interface {
	Store(group string, offsets map[TopicPartition]int64) error
}

// State is the state of a group, as Kafka names it.
type State string

const (
	StateEmpty              State = "Empty"              // no members (it may hold committed offsets)
	StatePreparingRebalance State = "PreparingRebalance" // waiting for members to (re)join
	StateStable             State = "Stable"             // a generation is in effect
)

// Description is a snapshot of a group (Kafka's DescribeGroups).
type Description struct {
	Group      string
	State      State
	Generation int32
	Members    []MemberDescription // sorted by ID
}

// MemberDescription is one member of a Description.
type MemberDescription struct {
	ID         string
	ClientID   string
	Topics     []string
	Assignment []TopicPartition // in the current generation; nil for a member not yet in one
	Joining    bool             // its Join is pending (a rebalance is in progress)
}
