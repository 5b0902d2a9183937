package group

import (
	"errors"
	"fmt"
)

// Errors of the consumer group protocol (KIP-848), beside those it shares
// with the classic protocol (ErrUnknownMember, ErrFencedInstanceID,
// ErrInvalidRequest, ErrGroupMaxSizeReached, ErrGroupNotFound). Test for
// them with errors.Is.
var (
	// ErrFencedMemberEpoch (Kafka's FENCED_MEMBER_EPOCH): a heartbeat
	// with a member epoch other than the member's, or its previous one
	// with partitions it does not hold; the member must give up all its
	// partitions and rejoin with epoch 0.
	ErrFencedMemberEpoch = errors.New("group: fenced member epoch")
	// ErrUnreleasedInstanceID (Kafka's UNRELEASED_INSTANCE_ID): a static
	// member joins with an instance id another member holds and has not
	// released (it did not leave with epoch -2).
	ErrUnreleasedInstanceID = errors.New("group: unreleased instance id")
	// ErrUnsupportedAssignor (Kafka's UNSUPPORTED_ASSIGNOR): a heartbeat
	// names a server assignor the coordinator does not have.
	ErrUnsupportedAssignor = errors.New("group: unsupported assignor")
	// ErrInvalidRegularExpression (Kafka's INVALID_REGULAR_EXPRESSION): a
	// subscription by a regular expression that does not compile.
	ErrInvalidRegularExpression = errors.New("group: invalid regular expression")
	// ErrStaleMemberEpoch (Kafka's STALE_MEMBER_EPOCH): an offset commit
	// or fetch of a consumer group's member at another epoch than its own.
	ErrStaleMemberEpoch = errors.New("group: stale member epoch")
)

// errUnknownMemberState: a member restored in a state this coordinator
// does not know (a newer one's) reports partitions: it is fenced, as Kafka
// does, to rejoin from scratch.
var errUnknownMemberState = fmt.Errorf("%w: the member is in an unknown state: it must give up its partitions and rejoin", ErrFencedMemberEpoch)
