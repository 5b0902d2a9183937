package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Versions of the __consumer_offsets records Strata writes (Kafka's
// OffsetCommitKey v1 and OffsetCommitValue v3, as Kafka 2.1 and later
// write them).
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
)

// EncodeOffsetRecord returns the key and value of the __consumer_offsets
// record of one commit, byte for byte as Kafka writes them: the key is
// OffsetCommitKey version 1 (int16 version, string group, string topic,
// int32 partition), the value OffsetCommitValue version 3 (int16 version,
// int64 offset, int32 leader epoch -1, string metadata "", int64 commit
// timestamp in ms). Strings are an int16 length and the bytes; integers are
// big-endian. The group id and topic must be valid (at most MaxNameLen
// bytes) and the partition must fit an int32, as Commit ensures.
func EncodeOffsetRecord(group string, tp TopicPartition, offset int64, commitTime time.Time) (key, value []byte) {
	return EncodeCommittedOffsetRecord(group, tp, CommittedOffset{Offset: offset, LeaderEpoch: -1}, commitTime)
}

// DecodeOffsetRecord decodes a record of __consumer_offsets. A key of
// another kind (group metadata: key version 2 and up) is ErrNotOffsetRecord;
// skip it. An empty value (a null one: a tombstone, written when a group's
// offsets are deleted) decodes to offset -1. Anything malformed — a short or
// over-long key or value, an unknown value version, an empty group id or
// topic, a negative partition or offset — is ErrCorruptOffsetRecord.
// Value versions 0 to 4 are read; only the offset is returned.
func DecodeOffsetRecord(key, value []byte) (group string, tp TopicPartition, offset int64, err error) {
	return decodeOffsetRecord(key, value, nil)
}

// decodeOffsetRecord is DecodeOffsetRecord; value, if set, is given the
// decoded value of a record that is not a tombstone.
func decodeOffsetRecord(key, value []byte, valueOf func(*kmsg.OffsetCommitValue)) (group string, tp TopicPartition, offset int64, err error) {
	if len(key) < 2 {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: key of %d bytes", ErrCorruptOffsetRecord, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 || v > offsetKeyVersion {
		if v < 0 {
			return "", TopicPartition{}, 0, fmt.Errorf("%w: key version %d", ErrCorruptOffsetRecord, v)
		}
		return "", TopicPartition{}, 0, fmt.Errorf("%w: key version %d", ErrNotOffsetRecord, v)
	}
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: key: %v", ErrCorruptOffsetRecord, err)
	}
	switch {
	case len(key) != 2+2+len(k.Group)+2+len(k.Topic)+4:
		return "", TopicPartition{}, 0, fmt.Errorf("%w: key of %d bytes has trailing or null fields", ErrCorruptOffsetRecord, len(key))
	case k.Group == "" || k.Topic == "" || len(k.Group) > MaxNameLen || len(k.Topic) > MaxNameLen:
		return "", TopicPartition{}, 0, fmt.Errorf("%w: group %q, topic %q", ErrCorruptOffsetRecord, k.Group, k.Topic)
	case k.Partition < 0:
		return "", TopicPartition{}, 0, fmt.Errorf("%w: partition %d", ErrCorruptOffsetRecord, k.Partition)
	}
	tp = TopicPartition{Topic: k.Topic, Partition: int(k.Partition)}
	if len(value) == 0 {
		return k.Group, tp, -1, nil
	}
	if len(value) < 2 {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: value of %d bytes", ErrCorruptOffsetRecord, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > 4 {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: value version %d", ErrCorruptOffsetRecord, v)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: value: %v", ErrCorruptOffsetRecord, err)
	}
	if !v.IsFlexible() && len(v.AppendTo(nil)) != len(value) {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: value of %d bytes has trailing or null fields", ErrCorruptOffsetRecord, len(value))
	}
	if v.Offset < 0 {
		return "", TopicPartition{}, 0, fmt.Errorf("%w: offset %d", ErrCorruptOffsetRecord, v.Offset)
	}
	if valueOf != nil {
		valueOf(&v)
	}
	return k.Group, tp, v.Offset, nil
}
