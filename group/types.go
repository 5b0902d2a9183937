package group

import (
	"context"
	"errors"
	"time"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int
}

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

// JoinResponse is the outcome of a rebalance for one member.
type JoinResponse struct {
	MemberID   string
	Generation int32
	Assignment []TopicPartition // this member's partitions, sorted
	Members    int              // group size in this generation
}

// OffsetStore makes commits durable.
type OffsetStore interface {
	Store(group string, offsets map[TopicPartition]int64) error
}

var _ = context.Background
