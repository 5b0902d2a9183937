package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
)

// Transaction markers in a cluster: a coordinator writes each marker at
// the partition's leader (Kafka's WriteTxnMarkers), this member's own
// partitions directly and the others' over the Transport, and the leader
// appends it as an acks=all produce. A marker for a partition of
// __consumer_offsets completes the producer's transactional offset
// commits in the group coordinator of that partition (its leader), which
// writes the marker there itself.

// txnMarkerWriter is a coordinator's txn.MarkerWriter on this member.
type txnMarkerWriter struct{ b *Broker }

func (w txnMarkerWriter) WriteMarker(ctx context.Context, p tp.TopicPartition, m batch.Marker) error {
	err := w.b.routeTxnMarker(ctx, p, m)
	switch {
	case errors.Is(err, log.ErrUnknownTopic), errors.Is(err, log.ErrUnknownPartition):
		return nil // deleted: no marker needed
	case errors.Is(err, log.ErrProducerFenced), errors.Is(err, log.ErrTransactionCoordinatorFenced),
		errors.Is(err, group.ErrProducerFenced):
		// A newer producer epoch, or a newer coordinator, owns the
		// producer there: Kafka's coordinator drops the marker too.
		w.b.log.Warn("replica: transaction marker refused, dropped", "partition", p, "producer", m.ProducerID, "err", err)
		return nil
	}
	return err
}

// routeTxnMarker writes m at p's leader, once (the coordinator retries).
func (b *Broker) routeTxnMarker(ctx context.Context, p log.TopicPartition, m batch.Marker) error {
	leader, err := b.leaderOf(p)
	if err != nil {
		if _, ok := b.img.Load().PartitionCount(p.Topic); !ok {
			return fmt.Errorf("%w: %s", log.ErrUnknownTopic, p.Topic)
		}
		return err
	}
	if leader == b.cfg.ID {
		return b.writeTxnMarker(ctx, p, m)
	}
	return b.tr.Group(ctx, leader, func(g log.GroupClient) error {
		tc, ok := g.(txnPeer)
		if !ok {
			return fmt.Errorf("%w: the transport to broker %d does not carry transaction markers", log.ErrInvalidConfig, leader)
		}
		return tc.WriteTxnMarker(ctx, p, m)
	})
}

// writeTxnMarker appends m to p, which this member leads: in the group
// coordinator of p for a partition of __consumer_offsets.
func (b *Broker) writeTxnMarker(ctx context.Context, p log.TopicPartition, m batch.Marker) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return fmt.Errorf("%w: marker of producer %d epoch %d", log.ErrInvalidRequest, m.ProducerID, m.ProducerEpoch)
	}
	if p.Topic == log.OffsetsTopic {
		gc, err := b.offsetsCoordinator(p)
		if err != nil {
			return err
		}
		end, err := b.groups.markers.begin(ctx, groupMarkerKey{p.Partition, m.ProducerID}, m.CoordinatorEpoch)
		if err != nil {
			return err
		}
		defer end()
		if err := gc.CompleteTxn(ctx, m.ProducerID, m.ProducerEpoch, m.Commit); err != nil {
			return fmt.Errorf("replica: complete transaction of producer %d in %s-%d: %w", m.ProducerID, p.Topic, p.Partition, err)
		}
		return nil
	}
	_, err := b.appendMarkerLocal(ctx, p, m)
	return err
}

// offsetsCoordinator returns this member's group coordinator of partition
// p of __consumer_offsets: kafka.ErrNotCoordinator unless it leads p and
// has loaded it in the current epoch.
func (b *Broker) offsetsCoordinator(p log.TopicPartition) (*group.Coordinator, error) {
	st, ok := b.img.Load().Partition(p.Topic, p.Partition)
	if ok && st.Leader == b.cfg.ID {
		if c, _, loaded := b.groups.get(p.Partition, st.LeaderEpoch); loaded {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: broker %d has no group coordinator of %s-%d", log.ErrNotLeader, b.cfg.ID, p.Topic, p.Partition)
}

// appendMarkerLocal appends m to p as its leader and waits for the ISR to
// have it, as an acks=all produce (produceLocal) does, returning its
// offset. A marker the partition refuses (an older producer or
// coordinator epoch) changes nothing.
func (b *Broker) appendMarkerLocal(ctx context.Context, tp log.TopicPartition, m batch.Marker) (int64, error) {
	ps := b.part(tp)
	if ps == nil {
		return 0, b.notHereErr(tp)
	}
	ps.mu.Lock()
	if ps.removed || !ps.pm.Leading() || b.fenced.Load() {
		ps.mu.Unlock()
		return 0, fmt.Errorf("%w: %s-%d on broker %d", log.ErrNotLeader, tp.Topic, tp.Partition, b.cfg.ID)
	}
	if err := ps.pm.CheckProduce(); err != nil {
		ps.mu.Unlock()
		return 0, err
	}
	off, err := ps.p.AppendMarker(m)
	if err != nil {
		ps.mu.Unlock()
		return 0, err
	}
	now := b.cfg.Clock.Now()
	b.runLeader(ps, ps.pm.Step(now, machine.Appended{LogEnd: ps.p.EndOffset()}, nil))
	tok := b.tokens.Add(1)
	ch := make(chan error, 1)
	ps.waiters[tok] = ch
	b.runLeader(ps, ps.pm.Step(now, machine.AwaitProduce{Token: tok, Required: off + 1}, nil))
	ps.mu.Unlock()

	answer, gaveUp := b.awaitReplicated(ctx, ps, now, tok, ch, b.cfg.ProduceTimeout)
	if gaveUp != nil {
		return 0, fmt.Errorf("replica: marker to %s-%d at %d not replicated: %w", tp.Topic, tp.Partition, off, gaveUp)
	}
	return off, answer
}

// WriteTxnMarker appends a COMMIT or ABORT marker to a partition this
// member leads (kafka.TxnBackend: WriteTxnMarkers from a coordinator, or
// `strata transactions abort`).
func (b kafkaBackend) WriteTxnMarker(ctx context.Context, p log.TopicPartition, m batch.Marker) error {
	return b.writeTxnMarker(ctx, p, m)
}

// txnOffsetsLog is a group coordinator's partition of __consumer_offsets
// on this member, with the transactional writes (group.TxnOffsetsLog):
// a producer's offsets as one transactional batch of it, and its markers,
// each an acks=all produce at this member, the partition's leader.
type txnOffsetsLog struct {
	group.OffsetsLog // Append, Replay (log.PartitionOffsetsLog)
	b                *Broker
	tp               log.TopicPartition
	p                *log.Partition
}

// groupOffsetsLog is the log a group coordinator of partition tp runs
// over: the replica p, its appends offsetsAppend's.
func (b *Broker) groupOffsetsLog(p *log.Partition, tp log.TopicPartition) group.OffsetsLog {
	return txnOffsetsLog{OffsetsLog: log.PartitionOffsetsLog(p, offsetsAppend{b, tp}.append), b: b, tp: tp, p: p}
}

// ReplayTxn replays with the transactional fields (group.TxnReplayer).
func (l txnOffsetsLog) ReplayTxn(ctx context.Context, fn func(r group.LogRecord) error) error {
	return l.OffsetsLog.(group.TxnReplayer).ReplayTxn(ctx, fn)
}

// AppendTxn appends records as one transactional batch of the producer,
// its sequence following the producer's last batch in the partition (0 at
// a new epoch), as Kafka's coordinator writes them.
func (l txnOffsetsLog) AppendTxn(producerID int64, producerEpoch int16, records []group.Record) error {
	seq := int32(0)
	if info, ok := l.producer(producerID); ok && info.Epoch == producerEpoch {
		seq = int32((int64(info.LastSequence) + 1) % (1 << 31))
	}
	var bd batch.Builder
	now := l.b.cfg.Clock.Now().UnixMilli()
	bd.Reset(now)
	for _, r := range records {
		bd.Append(now, r.Key, r.Value, nil)
	}
	bd.SetProducer(producerID, producerEpoch, seq)
	raw := bd.Bytes()
	raw[22] |= 0x10 // attributes (bytes 21-22), bit 4: transactional
	batch.SetCRC(raw)
	ctx, cancel := context.WithTimeout(l.b.ctx, l.b.cfg.ProduceTimeout)
	defer cancel()
	if _, err := l.b.produceLocal(ctx, l.tp, raw, log.AcksAll); err != nil {
		return notCoordinatorUnlessFenced(l.b, l.tp, err)
	}
	return nil
}

// AppendMarker appends the producer's marker, with the coordinator epoch
// of the transaction coordinator's marker that writeTxnMarker is writing
// (the group coordinator's CompleteTxn names none): the partition refuses
// it if older than the producer's last marker's there
// (log.ErrTransactionCoordinatorFenced), as Kafka's does, so that a
// coordinator that lost its partition of __transaction_state cannot
// complete offsets a newer transaction of the producer has pending.
// Without one, the epoch of the producer's last marker in the partition.
func (l txnOffsetsLog) AppendMarker(producerID int64, producerEpoch int16, commit bool) error {
	ce, ok := l.b.groups.markers.epoch(groupMarkerKey{l.tp.Partition, producerID})
	if info, last := l.producer(producerID); !ok && last && info.CoordinatorEpoch > 0 {
		ce = info.CoordinatorEpoch
	}
	ctx, cancel := context.WithTimeout(l.b.ctx, l.b.cfg.ProduceTimeout)
	defer cancel()
	m := batch.Marker{Commit: commit, CoordinatorEpoch: ce, ProducerID: producerID, ProducerEpoch: producerEpoch, Timestamp: time.Now().UnixMilli()}
	if _, err := l.b.appendMarkerLocal(ctx, l.tp, m); err != nil {
		return notCoordinatorUnlessFenced(l.b, l.tp, err)
	}
	return nil
}

func (l txnOffsetsLog) producer(id int64) (log.ProducerInfo, bool) {
	for _, info := range l.p.Producers() {
		if info.ProducerID == id {
			return info, true
		}
	}
	return log.ProducerInfo{}, false
}

// notCoordinatorUnlessFenced is offsetsAppend's mapping of a failed
// write: kafka.ErrNotCoordinator (the client finds the coordinator again),
// but a fenced producer or transaction coordinator stays one.
func notCoordinatorUnlessFenced(b *Broker, tp log.TopicPartition, err error) error {
	if errors.Is(err, log.ErrProducerFenced) || errors.Is(err, log.ErrTransactionCoordinatorFenced) || errors.Is(err, log.ErrRecordTooLarge) {
		return err
	}
	return fmt.Errorf("%w: broker %d: append to %s-%d: %v", kafka.ErrNotCoordinator, b.cfg.ID, tp.Topic, tp.Partition, err)
}

// groupMarkers carries the coordinator epoch of a transaction marker for
// __consumer_offsets from writeTxnMarker, through the group coordinator's
// CompleteTxn, to txnOffsetsLog.AppendMarker: one marker of a producer in
// a partition at a time, so that each is written with its own epoch.
type groupMarkers struct {
	mu       sync.Mutex
	inFlight map[groupMarkerKey]*groupMarker
}

type groupMarkerKey struct {
	partition  int
	producerID int64
}

type groupMarker struct {
	epoch int32
	done  chan struct{} // closed when it is written (or failed)
}

// begin records the coordinator epoch of k's marker, once k's marker in
// flight, if any, is done (or ctx ends); end forgets it.
func (g *groupMarkers) begin(ctx context.Context, k groupMarkerKey, epoch int32) (end func(), err error) {
	for {
		g.mu.Lock()
		cur := g.inFlight[k]
		if cur == nil {
			if g.inFlight == nil {
				g.inFlight = map[groupMarkerKey]*groupMarker{}
			}
			gm := &groupMarker{epoch: epoch, done: make(chan struct{})}
			g.inFlight[k] = gm
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.inFlight, k)
				g.mu.Unlock()
				close(gm.done)
			}, nil
		}
		g.mu.Unlock()
		select {
		case <-cur.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// epoch returns the coordinator epoch of k's marker in flight.
func (g *groupMarkers) epoch(k groupMarkerKey) (int32, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gm, ok := g.inFlight[k]; ok {
		return gm.epoch, true
	}
	return 0, false
}
