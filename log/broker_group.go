package log

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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

// startGroups reads the committed offsets and the groups' metadata back
// from OffsetsTopic and starts the group coordinator: a group stable at the
// last close comes back stable, its members' sessions restarted.
func (b *Broker) startGroups() error {
	committed, groups, err := b.loadOffsets()
	if err != nil {
		return err
	}
	c, err := group.NewWithCommitted(group.Config{
		Store:                 offsetStore{b},
		InitialGroups:         groups,
		Partitions:            b.Partitions,
		Logger:                b.logger,
		Clock:                 b.cfg.Clock,
		MinSessionTimeout:     b.cfg.GroupMinSessionTimeout,
		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
	}, committed)
	if err != nil {
		return fmt.Errorf("log: start group coordinator: %w", err)
	}
	b.groups = c
	return nil
}

// loadOffsets replays OffsetsTopic: the last commit of each (group, topic,
// partition) wins, with its leader epoch and metadata; a tombstone removes
// it. groups is the value of each group's last metadata record (a
// tombstone removes it), which group.New decodes.
func (b *Broker) loadOffsets() (out map[string]map[TopicPartition]group.CommittedOffset, groups map[string][]byte, err error) {
	out, groups = map[string]map[TopicPartition]group.CommittedOffset{}, map[string][]byte{}
	t, ok := b.topics[OffsetsTopic]
	if !ok {
		return out, groups, nil
	}
	for _, p := range t.parts {
		for off := p.StartOffset(); off < p.EndOffset(); {
			raw, err := p.ReadBatches(off, 1<<20, p.EndOffset())
			if err != nil {
				return nil, nil, fmt.Errorf("log: read %s: %w", p, err)
			}
			err = batch.Batches(raw, func(bt []byte, h batch.Header) error {
				off = h.NextOffset()
				return batch.Records(bt, h, func(r *batch.Record) error {
					g, tp, o, err := group.DecodeCommittedOffsetRecord(r.Key, r.Value)
					switch {
					case errors.Is(err, group.ErrNotOffsetRecord):
						if g, err := group.DecodeGroupMetadataKey(r.Key); err == nil {
							if len(r.Value) == 0 {
								delete(groups, g)
							} else {
								groups[g] = slices.Clone(r.Value)
							}
						}
						return nil
					case err != nil:
						return fmt.Errorf("offset %d: %w", r.Offset, err)
					case out[g] == nil:
						out[g] = map[TopicPartition]group.CommittedOffset{}
					}
					if o.Offset < 0 {
						delete(out[g], tp)
					} else {
						out[g][tp] = o
					}
					return nil
				})
			})
			if err != nil {
				return nil, nil, fmt.Errorf("log: read %s: %w", p, err)
			}
		}
	}
	return out, groups, nil
}

// offsetStore appends commits to OffsetsTopic.
type offsetStore struct{ b *Broker }

func (s offsetStore) Store(groupID string, offsets map[TopicPartition]int64) error {
	committed := make(map[TopicPartition]group.CommittedOffset, len(offsets))
	for tp, off := range offsets {
		committed[tp] = group.CommittedOffset{Offset: off, LeaderEpoch: -1}
	}
	return s.StoreCommitted(groupID, committed)
}

// StoreCommitted appends commits with their leader epochs and metadata.
func (s offsetStore) StoreCommitted(groupID string, offsets map[TopicPartition]group.CommittedOffset) error {
	return s.append(func(bd *batch.Builder, now time.Time) {
		for tp, c := range offsets {
			k, v := group.EncodeCommittedOffsetRecord(groupID, tp, c, now)
			if c.Offset < 0 {
				v = nil // a tombstone: the group was deleted
			}
			bd.Append(now.UnixMilli(), k, v, nil)
		}
	})
}

var _ group.GroupMetadataStore = offsetStore{}

// StoreGroup appends a group's metadata record, or a tombstone for a nil
// value (group.GroupMetadataStore).
func (s offsetStore) StoreGroup(groupID string, value []byte) error {
	return s.append(func(bd *batch.Builder, now time.Time) {
		bd.Append(now.UnixMilli(), group.EncodeGroupMetadataKey(groupID), value, nil)
	})
}

// append appends one batch of the records fill adds, at the broker's now,
// to OffsetsTopic.
func (s offsetStore) append(fill func(bd *batch.Builder, now time.Time)) error {
	p, err := s.b.offsetsPartition()
	if err != nil {
		return err
	}
	// The offsets topic's codec: Kafka's offsets.topic.compression.codec,
	// none by default.
	bd := pooledBuilder(p.config().Compression.appendCodec())
	defer builders.Put(bd)
	now := s.b.cfg.Clock.Now()
	bd.Reset(now.UnixMilli())
	fill(bd, now)
	_, _, err = p.AppendBatch(bd.Bytes())
	return err
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
