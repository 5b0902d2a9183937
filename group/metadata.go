package group

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxMetadataLen is the longest commit metadata a commit may carry: what
// the int16-length string of a __consumer_offsets record holds. (A Kafka
// server bounds it lower, by offset.metadata.max.bytes.)
const MaxMetadataLen = 1<<15 - 1

// CommittedOffset is one partition's commit with what Kafka keeps beside
// the offset: the leader epoch of the last record consumed (KIP-320; -1:
// unknown) and the client's metadata string.
type CommittedOffset struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// offsetMeta is what a CommittedOffset has beyond its offset.
type offsetMeta struct {
	LeaderEpoch int32
	Metadata    string
}

func (c CommittedOffset) meta() offsetMeta {
	return offsetMeta{LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata}
}

// CommittedOffsetStore is an OffsetStore that keeps leader epochs and
// metadata too (the broker writes them in the __consumer_offsets value,
// EncodeCommittedOffsetRecord). The Coordinator gives commits made with
// CommitWithMetadata to StoreCommitted, under the same rules as Store;
// with an OffsetStore that is not one, their epochs and metadata live in
// memory only.
type CommittedOffsetStore interface {
	OffsetStore
	StoreCommitted(group string, offsets map[TopicPartition]CommittedOffset) error
}

// store makes commits durable through the Config's store, if any.
func (c *Coordinator) store(group string, offsets map[TopicPartition]CommittedOffset, withMeta bool) error {
	if c.cfg.Store == nil {
		return nil
	}
	if cs, ok := c.cfg.Store.(CommittedOffsetStore); ok && withMeta {
		return cs.StoreCommitted(group, offsets)
	}
	plain := make(map[TopicPartition]int64, len(offsets))
	for tp, co := range offsets {
		plain[tp] = co.Offset
	}
	return c.cfg.Store.Store(group, plain)
}

// CommitWithMetadata is Commit for commits with a leader epoch and
// metadata (Kafka's OffsetCommit), which Committed leaves out and
// CommittedWithMetadata returns. Beyond Commit's checks, a leader epoch
// below -1 or metadata longer than MaxMetadataLen is ErrInvalidRequest.
func (c *Coordinator) CommitWithMetadata(ctx context.Context, group, memberID string, generation int32, offsets map[TopicPartition]CommittedOffset) error {
	return c.commit(ctx, group, memberID, generation, offsets, true)
}

// CommittedWithMetadata is Committed with each commit's leader epoch (-1
// if unknown) and metadata ("" if none).
func (c *Coordinator) CommittedWithMetadata(group string, tps []TopicPartition) map[TopicPartition]CommittedOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.groups[group]
	if e == nil {
		return map[TopicPartition]CommittedOffset{}
	}
	if tps == nil {
		tps = make([]TopicPartition, 0, len(e.st.offsets))
		for tp := range maps.Keys(e.st.offsets) {
			tps = append(tps, tp)
		}
	}
	out := make(map[TopicPartition]CommittedOffset, len(tps))
	for _, tp := range tps {
		if co, ok := e.st.committed(tp); ok {
			out[tp] = co
		}
	}
	return out
}

// EncodeCommittedOffsetRecord is EncodeOffsetRecord with the commit's
// leader epoch and metadata in the value (OffsetCommitValue version 3 has
// both). The metadata must be at most MaxMetadataLen bytes, as
// CommitWithMetadata ensures.
func EncodeCommittedOffsetRecord(group string, tp TopicPartition, c CommittedOffset, commitTime time.Time) (key, value []byte) {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: int32(tp.Partition)}
	v := kmsg.OffsetCommitValue{Version: offsetValueVersion, Offset: c.Offset, LeaderEpoch: c.LeaderEpoch, Metadata: c.Metadata, CommitTimestamp: commitTime.UnixMilli()}
	key = k.AppendTo(make([]byte, 0, 2+2+len(group)+2+len(tp.Topic)+4))
	value = v.AppendTo(make([]byte, 0, 2+8+4+2+len(c.Metadata)+8))
	return key, value
}

// DecodeCommittedOffsetRecord is DecodeOffsetRecord returning the commit's
// leader epoch (-1 for value versions before 3, which have none) and
// metadata too; a tombstone decodes to offset -1, epoch -1.
func DecodeCommittedOffsetRecord(key, value []byte) (group string, tp TopicPartition, c CommittedOffset, err error) {
	group, tp, off, err := decodeOffsetRecord(key, value, func(v *kmsg.OffsetCommitValue) {
		c.LeaderEpoch, c.Metadata = v.LeaderEpoch, v.Metadata
		if v.Version < 3 {
			c.LeaderEpoch = -1
		}
	})
	if err != nil {
		return "", TopicPartition{}, CommittedOffset{}, err
	}
	if off < 0 {
		c = CommittedOffset{LeaderEpoch: -1}
	}
	c.Offset = off
	if c.LeaderEpoch < -1 {
		return "", TopicPartition{}, CommittedOffset{}, fmt.Errorf("%w: leader epoch %d", ErrCorruptOffsetRecord, c.LeaderEpoch)
	}
	return group, tp, c, nil
}
