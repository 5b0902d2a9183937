package log

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/segment/batch"
)

// OffsetsTopic is the internal topic that holds committed offsets, as in
// Kafka: one record per commit of a (group, topic, partition), keyed and
// encoded as Kafka encodes them. It is created on the first commit, is not
// listed by Topics and cannot be created or deleted by users.
const OffsetsTopic = "__consumer_offsets"

// offsetsTopicConfig: commits are fsynced before they are acknowledged; the
// topic is compacted (its segments are Config.OffsetsSegmentBytes), so it
// holds about one record per (group, topic, partition), not one per commit.
var offsetsTopicConfig = TopicConfig{Partitions: 1, FlushMessages: 1, RetentionTime: -1, Cleanup: CleanupCompact}

// startGroups starts the group coordinator over OffsetsTopic, which it
// replays: the committed offsets come back with their leader epochs and
// metadata, and a group stable at the last close comes back stable, its
// members' sessions restarted.
func (b *Broker) startGroups() error {
	c, err := group.Open(context.Background(), group.Config{
		Partitions:            func(t string) (int, error) { return b.Partitions(context.Background(), t) },
		TopicNames:            b.Topics, // for consumer groups subscribing by regex
		Logger:                b.logger,
		Clock:                 b.cfg.Clock,
		MinSessionTimeout:     b.cfg.GroupMinSessionTimeout,
		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
	}, offsetsLog{b})
	if err != nil {
		return fmt.Errorf("log: start group coordinator: %w", err)
	}
	b.groups = c
	return nil
}

// offsetsLog is OffsetsTopic as the group coordinator writes and replays
// it (group.OffsetsLog).
type offsetsLog struct{ b *Broker }

var _ group.OffsetsLog = offsetsLog{}

// Replay reads OffsetsTopic from its start to its end, if it exists.
func (l offsetsLog) Replay(ctx context.Context, fn func(key, value []byte) error) error {
	t, ok := l.b.topics[OffsetsTopic]
	if !ok {
		return nil
	}
	for _, p := range t.parts {
		if err := replayPartition(ctx, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// replayPartition calls fn with the key and value of each record of p,
// from its start offset to its end.
func replayPartition(ctx context.Context, p *Partition, fn func(key, value []byte) error) error {
	for off, end := p.StartOffset(), p.EndOffset(); off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		raw, err := p.ReadBatches(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("log: read %s: %w", p, err)
		}
		if len(raw) == 0 {
			return nil
		}
		err = batch.Batches(raw, func(bt []byte, h batch.Header) error {
			off = h.NextOffset()
			return batch.Records(bt, h, func(r *batch.Record) error {
				if err := fn(r.Key, r.Value); err != nil {
					return fmt.Errorf("offset %d: %w", r.Offset, err)
				}
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("log: read %s: %w", p, err)
		}
	}
	return nil
}

// PartitionOffsetsLog returns p, a partition of OffsetsTopic, as a
// group.OffsetsLog for group.Open: Replay reads p from its start offset to
// its end offset; Append is append (a cluster member's: an acks=all
// produce to p).
func PartitionOffsetsLog(p *Partition, append func(records []group.Record) error) group.OffsetsLog {
	return partitionOffsetsLog{p, append}
}

type partitionOffsetsLog struct {
	p      *Partition
	append func(records []group.Record) error
}

func (l partitionOffsetsLog) Append(records []group.Record) error { return l.append(records) }

func (l partitionOffsetsLog) Replay(ctx context.Context, fn func(key, value []byte) error) error {
	return replayPartition(ctx, l.p, fn)
}

// Append appends records as one batch, at the broker's now, to
// OffsetsTopic, creating it on first use; the topic fsyncs every batch.
func (l offsetsLog) Append(records []group.Record) error {
	p, err := l.b.offsetsPartition()
	if err != nil {
		return err
	}
	// The offsets topic's codec: Kafka's offsets.topic.compression.codec,
	// none by default.
	bd := pooledBuilder(p.config().Compression.appendCodec())
	defer builders.Put(bd)
	now := l.b.cfg.Clock.Now().UnixMilli()
	bd.Reset(now)
	growFor(bd, now, records)
	for _, r := range records {
		bd.Append(now, r.Key, r.Value, nil)
	}
	_, _, err = p.AppendBatch(bd.Bytes())
	return err
}

// growFor sizes bd's buffer for records, once: a group's metadata record
// holds every member's subscription, which a record-by-record regrowth
// would copy again and again.
func growFor(bd *batch.Builder, now int64, records []group.Record) {
	n := 0
	for _, r := range records {
		// RecordSize counts the first record's offset delta: 5 bytes more
		// cover any later one's.
		n += bd.RecordSize(now, r.Key, r.Value, nil) + 5
	}
	bd.Grow(n)
}

// offsetsPartition returns the partition of OffsetsTopic, creating the
// topic on first use.
func (b *Broker) offsetsPartition() (*Partition, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("log: commit: %w", ErrClosed)
	}
	t, ok := b.topics[OffsetsTopic]
	if !ok {
		var err error
		cfg := offsetsTopicConfig
		cfg.SegmentBytes = b.cfg.OffsetsSegmentBytes
		if t, err = b.createTopicLocked(OffsetsTopic, cfg.WithDefaults()); err != nil {
			return nil, err
		}
	}
	return t.parts[0], nil
}

// GroupCoordinator returns the broker's group coordinator, for what a
// Kafka server answers beyond GroupClient: ListGroups (List),
// DescribeGroups (Describe) and DeleteGroups (Delete).
func (b *Broker) GroupCoordinator() *group.Coordinator { return b.groups }

// JoinGroup joins a consumer group (see GroupClient and
// group.Coordinator.Join).
func (b *Broker) JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error) {
	return b.groups.Join(ctx, req)
}

// SyncGroup returns a member's assignment; the leader's brings everyone's
// (see GroupClient and group.Coordinator.Sync).
func (b *Broker) SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResponse, error) {
	return b.groups.Sync(ctx, req)
}

// Heartbeat keeps a group member alive.
func (b *Broker) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	return b.groups.Heartbeat(ctx, groupID, memberID, generation)
}

// LeaveGroup removes a member from its group.
func (b *Broker) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	return b.groups.Leave(ctx, groupID, memberID)
}

// CommitOffsets commits a member's positions, durably, for its current
// generation.
func (b *Broker) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[TopicPartition]int64) error {
	return b.groups.Commit(ctx, groupID, memberID, generation, offsets)
}

// FetchOffsets returns a group's committed offsets for the partitions that
// have one.
func (b *Broker) FetchOffsets(ctx context.Context, groupID string, tps []TopicPartition) (map[TopicPartition]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.groups.Committed(groupID, tps), nil
}
