package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// Consumer groups in a cluster, the simplest correct way for now: one
// coordinator for every group, on the leader of __consumer_offsets
// partition 0 (Kafka spreads groups over its 50 partitions by hash). The
// topic is created, RF 3 (or fewer, with fewer brokers), by the first
// group call any member gets. The leader starts a group.Coordinator when
// it becomes leader of that partition — its committed offsets read back
// from its replica — and closes it when leadership moves; commits are
// acks=all produces to the partition, so a new leader has every
// acknowledged commit. Group calls on other members go to the coordinator
// over the Transport (the in-process one only, so far: the Kafka-protocol
// transport answers ErrGroupsUnsupported until the server speaks the group
// APIs).

var offsetsTP = log.TopicPartition{Topic: log.OffsetsTopic, Partition: 0}

// ErrGroupsUnsupported: the Transport cannot carry consumer-group calls to
// the coordinator on another member.
var ErrGroupsUnsupported = errors.New("replica: consumer-group calls cannot be forwarded over this transport yet")

// syncCoordinator starts or stops this member's group coordinator to
// match its leadership of __consumer_offsets-0. Called after each image.
func (b *Broker) syncCoordinator() {
	st, ok := b.img.Load().Partition(log.OffsetsTopic, 0)
	ps := b.part(offsetsTP)
	leading := ok && ps != nil && st.Leader == b.cfg.ID && ps.leading.Load()
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	if b.coord != nil && (!leading || b.coordEpoch != st.LeaderEpoch) {
		b.coord.Close()
		b.coord = nil
	}
	if !leading || b.coord != nil || b.ctx.Err() != nil {
		return
	}
	initial, err := loadOffsets(ps.p)
	if err != nil {
		b.log.Error("replica: read committed offsets", "err", err)
		return
	}
	c, err := group.New(group.Config{
		Store: offsetStore{b}, Partitions: b.Partitions, Initial: initial, Logger: b.log,
	})
	if err != nil {
		b.log.Error("replica: start group coordinator", "err", err)
		return
	}
	b.coord, b.coordEpoch = c, st.LeaderEpoch
	b.log.Info("replica: group coordinator started", "leader epoch", st.LeaderEpoch)
}

func (b *Broker) stopCoordinator() {
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	if b.coord != nil {
		b.coord.Close()
		b.coord = nil
	}
}

func (b *Broker) coordinator() *group.Coordinator {
	b.groupMu.Lock()
	defer b.groupMu.Unlock()
	return b.coord
}

// loadOffsets replays the partition's log: the last commit of each
// (group, topic, partition) wins; a tombstone removes it. It reads to the
// log end: the leader's log is the one that will be committed.
func loadOffsets(p *log.Partition) (map[string]map[log.TopicPartition]int64, error) {
	out := map[string]map[log.TopicPartition]int64{}
	for off, end := p.StartOffset(), p.EndOffset(); off < end; {
		bs, err := p.Slice(off, 1<<20, end)
		if err != nil {
			return nil, err
		}
		raw, err := bs.Bytes()
		bs.Release()
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 {
			break
		}
		recs, err := log.DecodeRecords(raw)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			off = r.Offset + 1
			g, tp, o, err := group.DecodeOffsetRecord(r.Key, r.Value)
			switch {
			case errors.Is(err, group.ErrNotOffsetRecord):
				continue
			case err != nil:
				return nil, fmt.Errorf("offset %d: %w", r.Offset, err)
			case out[g] == nil:
				out[g] = map[log.TopicPartition]int64{}
			}
			if o < 0 {
				delete(out[g], tp)
			} else {
				out[g][tp] = o
			}
		}
	}
	return out, nil
}

// offsetStore makes commits durable: an acks=all produce to
// __consumer_offsets-0 on this member, its leader.
type offsetStore struct{ b *Broker }

func (s offsetStore) Store(groupID string, offsets map[log.TopicPartition]int64) error {
	var bd batch.Builder
	now := time.Now()
	bd.Reset(now.UnixMilli())
	for tp, off := range offsets {
		k, v := group.EncodeOffsetRecord(groupID, tp, max(off, 0), now)
		if off < 0 {
			v = nil
		}
		bd.Append(now.UnixMilli(), k, v, nil)
	}
	ctx, cancel := context.WithTimeout(s.b.ctx, s.b.cfg.ProduceTimeout)
	defer cancel()
	_, err := s.b.produceLocal(ctx, offsetsTP, bd.Bytes(), log.AcksAll)
	return err
}

// ensureOffsetsTopic creates __consumer_offsets if the metadata lacks it.
func (b *Broker) ensureOffsetsTopic(ctx context.Context) error {
	if _, ok := b.img.Load().Topic(log.OffsetsTopic); ok {
		return nil
	}
	live := 0
	for _, bi := range b.img.Load().Brokers() {
		if !bi.Fenced {
			live++
		}
	}
	rf := max(1, min(3, live))
	err := b.CreateTopic(ctx, log.OffsetsTopic, log.TopicConfig{
		Partitions: 1, ReplicationFactor: rf, MinInSyncReplicas: min(2, rf), RetentionTime: -1,
	})
	if !errors.Is(err, log.ErrTopicExists) {
		return err
	}
	// Created by another member: wait until this one has applied it.
	for {
		ch := b.metaWatch()
		if _, ok := b.img.Load().Topic(log.OffsetsTopic); ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("replica: %s: %w", log.OffsetsTopic, ctx.Err())
		case <-b.ctx.Done():
			return log.ErrClosed
		}
	}
}

// groupCall runs fn at the group coordinator: here, or on the member that
// leads __consumer_offsets-0, retrying across leadership changes.
func (b *Broker) groupCall(ctx context.Context, fn func(log.GroupClient) error) error {
	if err := b.ensureOffsetsTopic(ctx); err != nil {
		return err
	}
	return b.route(ctx, offsetsTP, func(leader int) error {
		if leader == b.cfg.ID {
			return b.groupLocal(fn)
		}
		return b.tr.Group(ctx, leader, fn)
	})
}

// groupLocal runs fn against this member's coordinator, or fails with
// ErrNotLeader while it has none.
func (b *Broker) groupLocal(fn func(log.GroupClient) error) error {
	c := b.coordinator()
	if c == nil {
		return fmt.Errorf("%w: broker %d is not the group coordinator (yet)", ErrNotLeader, b.cfg.ID)
	}
	return fn(coordClient{c})
}

// coordClient is a group.Coordinator as a log.GroupClient.
type coordClient struct{ c *group.Coordinator }

func (g coordClient) JoinGroup(ctx context.Context, req group.JoinRequest) (group.JoinResponse, error) {
	return g.c.Join(ctx, req)
}

func (g coordClient) SyncGroup(ctx context.Context, req group.SyncRequest) (group.SyncResponse, error) {
	return g.c.Sync(ctx, req)
}

func (g coordClient) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	return g.c.Heartbeat(ctx, groupID, memberID, generation)
}

func (g coordClient) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	return g.c.Leave(ctx, groupID, memberID)
}

func (g coordClient) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[log.TopicPartition]int64) error {
	return g.c.Commit(ctx, groupID, memberID, generation, offsets)
}

func (g coordClient) FetchOffsets(ctx context.Context, groupID string, tps []log.TopicPartition) (map[log.TopicPartition]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return g.c.Committed(groupID, tps), nil
}

// JoinGroup joins a consumer group at its coordinator.
func (b *Broker) JoinGroup(ctx context.Context, req group.JoinRequest) (resp group.JoinResponse, err error) {
	err = b.groupCall(ctx, func(g log.GroupClient) (err error) { resp, err = g.JoinGroup(ctx, req); return err })
	return resp, err
}

// SyncGroup returns a member's assignment from the coordinator.
func (b *Broker) SyncGroup(ctx context.Context, req group.SyncRequest) (resp group.SyncResponse, err error) {
	err = b.groupCall(ctx, func(g log.GroupClient) (err error) { resp, err = g.SyncGroup(ctx, req); return err })
	return resp, err
}

// Heartbeat keeps a group member alive.
func (b *Broker) Heartbeat(ctx context.Context, groupID, memberID string, generation int32) error {
	return b.groupCall(ctx, func(g log.GroupClient) error { return g.Heartbeat(ctx, groupID, memberID, generation) })
}

// LeaveGroup removes a member from its group.
func (b *Broker) LeaveGroup(ctx context.Context, groupID, memberID string) error {
	return b.groupCall(ctx, func(g log.GroupClient) error { return g.LeaveGroup(ctx, groupID, memberID) })
}

// CommitOffsets commits a member's positions (an acks=all produce to
// __consumer_offsets at the coordinator).
func (b *Broker) CommitOffsets(ctx context.Context, groupID, memberID string, generation int32, offsets map[log.TopicPartition]int64) error {
	return b.groupCall(ctx, func(g log.GroupClient) error {
		return g.CommitOffsets(ctx, groupID, memberID, generation, offsets)
	})
}

// FetchOffsets returns a group's committed offsets.
func (b *Broker) FetchOffsets(ctx context.Context, groupID string, tps []log.TopicPartition) (out map[log.TopicPartition]int64, err error) {
	err = b.groupCall(ctx, func(g log.GroupClient) (err error) { out, err = g.FetchOffsets(ctx, groupID, tps); return err })
	return out, err
}
