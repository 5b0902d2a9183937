package share

import (
	"errors"

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
