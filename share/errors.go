package share

import (
	"errors"

	groups "github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/errs"
)

// Errors of share groups. Test for them with errors.Is.
var (
	// ErrInvalidRecordState (Kafka's INVALID_RECORD_STATE): an
	// acknowledgement of a record that is not acquired by the member that
	// sends it (not acquired at all, acquired by another member, its lock
	// expired, or outside the partition's in-flight records). Nothing of
	// the partition's acknowledgement is applied.
	ErrInvalidRecordState = errors.New("share: invalid record state")
	// ErrInvalidRequest: a malformed request (an acknowledgement batch
	// with its last offset before its first, acknowledgement types not one
	// per offset nor one for all, an unknown type).
	ErrInvalidRequest = errs.Mark("share: invalid request", errs.ErrInvalidRequest)
	// ErrInvalidConfig: a Config or PartitionConfig out of range.
	ErrInvalidConfig = errs.Mark("share: invalid config", errs.ErrInvalidConfig)
	// ErrClosed: the coordinator was closed.
	ErrClosed = errs.Mark("share: closed", errs.ErrClosed)
)

// Errors a share group shares with the other group types: each matches
// package group's sentinel, so one error-code table serves both.
var (
	// ErrUnknownMember: a heartbeat, fetch or acknowledgement of a member
	// the group does not have (it left, or its session timed out): it
	// rejoins with epoch 0.
	ErrUnknownMember = errs.Mark("share: unknown member id", groups.ErrUnknownMember)
	// ErrFencedMemberEpoch: a heartbeat with an epoch other than the
	// member's (or its previous one).
	ErrFencedMemberEpoch = errs.Mark("share: fenced member epoch", groups.ErrFencedMemberEpoch)
	// ErrGroupMaxSizeReached: a join to a group with MaxSize members.
	ErrGroupMaxSizeReached = errs.Mark("share: group max size reached", groups.ErrGroupMaxSizeReached)
	// ErrGroupNotFound: a group id that is no share group (a consumer
	// group's), or none.
	ErrGroupNotFound = errs.Mark("share: group not found", groups.ErrGroupNotFound)
	// ErrNonEmptyGroup: an offset change or deletion of a group with
	// members.
	ErrNonEmptyGroup = errs.Mark("share: group is not empty", groups.ErrNonEmptyGroup)
	// ErrInvalidGroup: an empty group id.
	ErrInvalidGroup = errs.Mark("share: invalid group id", groups.ErrInvalidGroup)
)
