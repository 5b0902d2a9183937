package log

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/segment/batch"
)

// Errors. Test for them with errors.Is: the errors returned are wrapped with
// context. They are Strata's one error vocabulary: the packages over log
// (kafka, replica, controller, group) and under it (segment, index,
// timingwheel) return errors that match them for the same condition, under
// their own names where they have one (errors.Is(err, log.ErrClosed) holds
// for a closed segment, index, group coordinator or controller).
var (
	ErrUnknownTopic      = errors.New("log: unknown topic")
	ErrUnknownPartition  = errors.New("log: unknown partition")
	ErrTopicExists       = errors.New("log: topic already exists")
	ErrInvalidTopic      = errors.New("log: invalid topic name")
	ErrInvalidConfig     = errs.ErrInvalidConfig // also timingwheel's, group's, kafka's and controller's
	ErrOffsetOutOfRange  = errors.New("log: offset out of range")
	ErrRecordTooLarge    = errors.New("log: record batch too large") // MaxMessageBytes, or MaxDecompressedBytes decompressed
	ErrClosed            = errs.ErrClosed                            // also segment's, index's, group's and controller's
	ErrNotEnoughReplicas = errors.New("log: not enough in-sync replicas")
	ErrNotLeader         = errors.New("log: not the leader for this partition")
	// ErrDirInUse is returned by Open when another Broker holds the data dir.
	ErrDirInUse = errors.New("log: data directory in use by another broker")
	// ErrCorrupt marks data that failed its checks (CRC, framing, offsets):
	// it is returned instead of records, never alongside them.
	ErrCorrupt = batch.ErrCorrupt // errs.ErrCorrupt; index's, group's and controller's corruption match it
	// ErrInvalidReplicationFactor: a topic asks for more replicas than
	// there are brokers (Kafka's INVALID_REPLICATION_FACTOR). It is an
	// ErrInvalidConfig too.
	ErrInvalidReplicationFactor = fmt.Errorf("%w: replication factor larger than the number of brokers", ErrInvalidConfig)
	// ErrInvalidPartitions: CreatePartitions asked for a partition count
	// not larger than the topic's (Kafka's INVALID_PARTITIONS). It is an
	// ErrInvalidConfig too.
	ErrInvalidPartitions = fmt.Errorf("%w: invalid partition count", ErrInvalidConfig)
)

// OffsetOutOfRangeError says which offsets were valid. It matches
// ErrOffsetOutOfRange with errors.Is.
type OffsetOutOfRangeError struct {
	Topic     string
	Partition int
	Requested int64
	Start     int64 // log start offset: the first readable offset
	End       int64 // the end offset (exclusive)
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("log: offset %d out of range [%d, %d] for %s-%d", e.Requested, e.Start, e.End, e.Topic, e.Partition)
}

// Is reports whether target is ErrOffsetOutOfRange.
func (e *OffsetOutOfRangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }

// RecordTooLargeError says how large the batch was. It matches
// ErrRecordTooLarge with errors.Is.
type RecordTooLargeError struct {
	Size, Max int
}

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("log: record batch of %d bytes is larger than MaxMessageBytes %d", e.Size, e.Max)
}

// Is reports whether target is ErrRecordTooLarge.
func (e *RecordTooLargeError) Is(target error) bool { return target == ErrRecordTooLarge }
