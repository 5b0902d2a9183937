package log

import (
	"context"
	"errors"
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
		TopicNames:            b.groupTopicNames, // for consumer groups subscribing by regex
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

var (
	_ group.TxnOffsetsLog = offsetsLog{}
	_ group.TxnReplayer   = offsetsLog{}
	_ group.TxnReplayer   = partitionOffsetsLog{}
)

// Replay reads OffsetsTopic from its start to its end, if it exists,
// markers left out.
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

// ReplayTxn is Replay with the batches' transactional fields and the
// markers (group.TxnReplayer): the coordinator restores the offsets of
// open transactions as pending, applies committed ones, drops aborted ones.
func (l offsetsLog) ReplayTxn(ctx context.Context, fn func(r group.LogRecord) error) error {
	t, ok := l.b.topics[OffsetsTopic]
	if !ok {
		return nil
	}
	for _, p := range t.parts {
		if err := replayPartitionTxn(ctx, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// replayPartition calls fn with the key and value of each record of p,
// from its start offset to its end; markers are left out.
func replayPartition(ctx context.Context, p *Partition, fn func(key, value []byte) error) error {
	return replayPartitionTxn(ctx, p, func(r group.LogRecord) error {
		if r.Control {
			return nil
		}
		return fn(r.Key, r.Value)
	})
}

// replayPartitionTxn calls fn with each record of p, from its start offset
// to its end, with its batch's producer and transactional fields; a
// transaction marker as a record with Control set (other control records
// are skipped).
func replayPartitionTxn(ctx context.Context, p *Partition, fn func(r group.LogRecord) error) error {
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
			if h.Control() {
				m, _, err := batch.ParseMarker(bt)
				if errors.Is(err, batch.ErrNotMarker) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("offset %d: %w", h.BaseOffset, err)
				}
				return fn(group.LogRecord{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Control: true, Commit: m.Commit})
			}
			return batch.Records(bt, h, func(r *batch.Record) error {
				rec := group.LogRecord{Key: r.Key, Value: r.Value, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, Transactional: h.Transactional()}
				if err := fn(rec); err != nil {
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

// ReplayTxn is Replay with the batches' transactional fields and the
// markers (group.TxnReplayer).
func (l partitionOffsetsLog) ReplayTxn(ctx context.Context, fn func(r group.LogRecord) error) error {
	return replayPartitionTxn(ctx, l.p, fn)
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

// Transactional offset commits (KIP-98): a producer's TxnOffsetCommit is
// one transactional batch of the producer in OffsetsTopic, its
// transaction ended there by the marker completeGroupTxn writes, as
// Kafka's group coordinator writes them. As Kafka's coordinator appends
// skip the producer's sequence checks, the batch takes the sequence that
// follows the producer's last batch in the partition (0 at a new epoch),
// so that the partition's idempotence rules pass: the group coordinator
// never makes two calls of one producer at once.

// AppendTxn appends records as one transactional batch of the producer
// (group.TxnOffsetsLog), creating OffsetsTopic on first use. An epoch older
// than the producer's is ErrProducerFenced.
func (l offsetsLog) AppendTxn(producerID int64, producerEpoch int16, records []group.Record) error {
	p, err := l.b.offsetsPartition()
	if err != nil {
		return err
	}
	return appendTxnOffsets(p, l.b.cfg.Clock.Now().UnixMilli(), producerID, producerEpoch, records)
}

// AppendMarker appends the producer's COMMIT or ABORT marker
// (group.TxnOffsetsLog).
func (l offsetsLog) AppendMarker(producerID int64, producerEpoch int16, commit bool) error {
	p, err := l.b.offsetsPartition()
	if err != nil {
		return err
	}
	return appendGroupMarker(p, l.b.cfg.Clock.Now().UnixMilli(), producerID, producerEpoch, commit)
}

// appendTxnOffsets appends records to p as one transactional batch of the
// producer, at now.
func appendTxnOffsets(p *Partition, now int64, producerID int64, producerEpoch int16, records []group.Record) error {
	bd := pooledBuilder(p.config().Compression.appendCodec())
	defer builders.Put(bd)
	bd.Reset(now)
	growFor(bd, now, records)
	for _, r := range records {
		bd.Append(now, r.Key, r.Value, nil)
	}
	bd.SetProducer(producerID, producerEpoch, p.coordinatorSequence(producerID, producerEpoch))
	b := bd.Bytes()
	b[22] |= 0x10 // attributes (bytes 21-22), bit 4: transactional
	batch.SetCRC(b)
	_, _, err := p.AppendBatch(b)
	return err
}

// coordinatorSequence is the base sequence of the producer's next batch
// written by a coordinator of this process: the one after its last batch
// in p at that epoch, 0 at another epoch or for a producer p does not know.
func (p *Partition) coordinatorSequence(producerID int64, producerEpoch int16) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	info, ok := p.ps.Producer(producerID)
	if !ok || info.Epoch != producerEpoch {
		return 0
	}
	return incrementSequence(info.LastSequence, 1)
}

// appendGroupMarker appends the producer's marker to p at now. Its
// coordinator epoch is the one of the producer's last marker in p (0 if
// none): the transaction coordinator of a standalone broker never moves,
// and completeGroupTxn's caller names no epoch.
func appendGroupMarker(p *Partition, now int64, producerID int64, producerEpoch int16, commit bool) error {
	p.mu.Lock()
	ce := int32(0)
	if info, ok := p.ps.Producer(producerID); ok && info.CoordinatorEpoch > 0 {
		ce = info.CoordinatorEpoch
	}
	p.mu.Unlock()
	_, err := p.AppendMarker(batch.Marker{Commit: commit, CoordinatorEpoch: ce, ProducerID: producerID, ProducerEpoch: producerEpoch, Timestamp: now})
	return err
}

// completeGroupTxn ends the producer's transaction in OffsetsTopic, for
// the transaction coordinator's marker to the group coordinator's
// partition: the COMMIT (commit) or ABORT marker is written there, then
// the offsets the producer committed in its transaction (TxnOffsetCommit)
// become the groups' committed offsets, or are dropped. It returns once
// the marker is durable; an error (log.ErrProducerFenced for an epoch
// older than the producer's, a write error) changes nothing and may be
// retried.
func (b *Broker) completeGroupTxn(ctx context.Context, producerID int64, producerEpoch int16, commit bool) error {
	if err := b.groups.CompleteTxn(ctx, producerID, producerEpoch, commit); err != nil {
		return fmt.Errorf("log: complete transaction of producer %d in %s: %w", producerID, OffsetsTopic, fencedAsLog(err))
	}
	return nil
}

// fencedAsLog makes the group coordinator's group.ErrProducerFenced (an
// epoch older than the one offsets are pending with) match
// ErrProducerFenced too, as the partition's own refusal does.
func fencedAsLog(err error) error {
	if errors.Is(err, group.ErrProducerFenced) && !errors.Is(err, ErrProducerFenced) {
		return fmt.Errorf("%w: %w", ErrProducerFenced, err)
	}
	return err
}

// TxnCommitOffsets commits a group's offsets as part of a producer's
// transaction (Kafka's TxnOffsetCommit; see group.Coordinator.TxnCommit):
// durable at once, committed only once the transaction commits.
func (b *Broker) TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error {
	return fencedAsLog(b.groups.TxnCommit(ctx, req))
}
