package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/txn"
)

// Transactions in a cluster (KIP-98), as Kafka runs them, following the
// consumer groups' layout (groups.go). __transaction_state has
// Config.TransactionStatePartitions partitions (Kafka's 50), compacted, RF
// 3 (or fewer, with fewer brokers) and min.insync.replicas 2, created
// through the controller by the first transactional call any member gets.
// A transactional id belongs to partition txn.PartitionFor(id, N), and its
// coordinator is that partition's leader. Each member runs one
// txn.Coordinator per partition it leads, loaded when it becomes the
// leader — the partition's records read back from its replica, in the
// background, the ids answered COORDINATOR_LOAD_IN_PROGRESS meanwhile —
// and closed when leadership moves (or the leader epoch changes). Its
// writes are acks=all produces to the partition, so a new leader has every
// acknowledged one, and finds a PrepareCommit or PrepareAbort whose markers
// were not all written: it writes them again. Its markers go to each
// partition's leader, over the Transport (this member's own partitions
// directly), with the partition's leader epoch as the coordinator epoch:
// a partition refuses the markers of a coordinator older than the last one
// it took a marker from.
//
// Kafka clients find the coordinator with FindCoordinator (key type 1),
// which any member answers (the member's kafka.Backend is a
// kafka.TxnRouter), and are told NOT_COORDINATOR by the others. A
// partition leader checks a transactional produce against the coordinator
// wherever it runs (KIP-890 part 1). As a log.TxnClient, a member runs a
// transactional call at its own coordinator or sends it to the
// coordinator's member over the Transport (txn_route.go).

// DefaultTransactionStatePartitions is Kafka's
// transaction.state.log.num.partitions.
const DefaultTransactionStatePartitions = 50

// memberTxns is the transaction coordination of one member: a coordinator
// per __transaction_state partition it leads.
type memberTxns struct {
	mu     sync.Mutex
	led    map[int]*ledTxn // by partition: loading or loaded
	closed bool
	loads  sync.WaitGroup // the loading goroutines, joined by stopTxnCoordinators
	// ids are the transactional ids of the producer ids this member's
	// InitTxnProducerID handed out: a transactional batch it forwards
	// over the Kafka protocol names its id, as a Kafka client's does.
	ids map[int64]string
}

// ledTxn is the transaction coordinator of one partition, in the leader
// epoch it was loaded in: nil while its goroutine reads the partition,
// which cancel ends.
type ledTxn struct {
	c      *txn.Coordinator
	epoch  int32
	cancel context.CancelFunc
}

func (b *Broker) txnStatePartitions() int {
	if n := b.cfg.TransactionStatePartitions; n > 0 {
		return n
	}
	return DefaultTransactionStatePartitions
}

// syncTxnCoordinators starts and stops this member's transaction
// coordinators to match the partitions of __transaction_state it leads,
// as syncCoordinator does for the groups: called after each image by the
// metadata goroutine, it closes those of partitions no longer led (or led
// in another epoch) first, then loads each new one in the background.
func (b *Broker) syncTxnCoordinators() {
	want := map[int]int32{}
	if t, ok := b.img.Load().Topic(log.TransactionStateTopic); ok {
		for _, st := range t.Partitions {
			ps := b.part(log.TopicPartition{Topic: log.TransactionStateTopic, Partition: st.Partition})
			if st.Leader == b.cfg.ID && ps != nil && ps.leading.Load() {
				want[st.Partition] = st.LeaderEpoch
			}
		}
	}
	x := &b.txns
	x.mu.Lock()
	led := make(map[int]int32, len(x.led))
	for p, lt := range x.led {
		led[p] = lt.epoch
	}
	stopPs, start := coordinatorChanges(led, want)
	stop := make([]*txn.Coordinator, 0, len(stopPs))
	for _, p := range stopPs {
		lt := x.led[p]
		lt.cancel()
		if lt.c != nil {
			stop = append(stop, lt.c)
		}
		delete(x.led, p)
	}
	x.mu.Unlock()
	// Closed before the next is loaded: its writes in flight finish (or
	// fail) first, and its marker writers stop.
	for _, c := range stop {
		c.Close()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || b.ctx.Err() != nil {
		return
	}
	for _, p := range start {
		ctx, cancel := context.WithCancel(b.ctx)
		lt := &ledTxn{epoch: want[p], cancel: cancel}
		if x.led == nil {
			x.led = map[int]*ledTxn{}
		}
		x.led[p] = lt
		x.loads.Add(1)
		go b.loadTxnLoop(ctx, p, lt)
	}
}

// loadTxnLoop loads the coordinator of partition p for lt, trying again
// after a failed read, until it is loaded or lt is cancelled.
func (b *Broker) loadTxnLoop(ctx context.Context, p int, lt *ledTxn) {
	x := &b.txns
	defer x.loads.Done()
	defer lt.cancel()
	backoff := 50 * time.Millisecond
	for {
		c, err := b.loadTxnCoordinator(ctx, p, lt.epoch)
		if err == nil {
			x.mu.Lock()
			if x.closed || x.led[p] != lt || ctx.Err() != nil {
				x.mu.Unlock()
				c.Close() // superseded while it loaded
				return
			}
			lt.c = c
			x.mu.Unlock()
			b.log.Debug("replica: transaction coordinator started", "partition", p, "leader epoch", lt.epoch)
			return
		}
		if ctx.Err() != nil {
			return
		}
		b.log.Error("replica: start transaction coordinator", "partition", p, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
			backoff = min(2*backoff, 5*time.Second)
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// loadTxnCoordinator starts the coordinator of partition p over this
// member's replica of it, which it replays to its end: the leader's log
// is the one that will be committed.
func (b *Broker) loadTxnCoordinator(ctx context.Context, p int, epoch int32) (*txn.Coordinator, error) {
	tp := log.TopicPartition{Topic: log.TransactionStateTopic, Partition: p}
	ps := b.part(tp)
	if ps == nil {
		return nil, fmt.Errorf("%w: no replica of %s-%d", log.ErrUnknownPartition, tp.Topic, p)
	}
	return txn.New(txn.Config{
		Store:            txnStateStore{b, tp},
		Markers:          txnMarkerWriter{b},
		ProducerIDs:      b.nextTxnProducerID,
		Clock:            b.cfg.Clock,
		CoordinatorEpoch: epoch,
		Logger:           b.log.With("transaction state partition", p),
	}, func(yield func(key, value []byte) error) error {
		return log.PartitionOffsetsLog(ps.p, nil).Replay(ctx, yield)
	})
}

// nextTxnProducerID allocates a producer id for a coordinator, from the
// cluster's blocks (idempotence.go).
func (b *Broker) nextTxnProducerID() (int64, error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.ProduceTimeout)
	defer cancel()
	pid, err := b.InitProducerID(ctx)
	return pid.ID, err
}

// stopTxnCoordinators ends every load and closes every transaction
// coordinator, for good (Close, once the metadata goroutine has stopped).
func (b *Broker) stopTxnCoordinators() {
	x := &b.txns
	x.mu.Lock()
	x.closed = true
	led := x.led
	x.led = nil
	for _, lt := range led {
		lt.cancel()
	}
	x.mu.Unlock()
	x.loads.Wait()
	for _, lt := range led {
		if lt.c != nil {
			lt.c.Close()
		}
	}
}

// txnTP returns the partition of __transaction_state of a transactional
// id; false while the topic does not exist.
func (b *Broker) txnTP(id string) (log.TopicPartition, bool) {
	n, ok := b.img.Load().PartitionCount(log.TransactionStateTopic)
	if !ok || n == 0 {
		return log.TopicPartition{}, false
	}
	return log.TopicPartition{Topic: log.TransactionStateTopic, Partition: txn.PartitionFor(id, n)}, true
}

// localTxnCoordinator returns this member's coordinator of a
// transactional id: log.ErrTxnCoordinatorLoading while it loads it,
// kafka.ErrNotCoordinator unless it leads the id's partition in the
// current image's epoch.
func (b *Broker) localTxnCoordinator(id string) (*txn.Coordinator, error) {
	tp, ok := b.txnTP(id)
	if !ok {
		return nil, fmt.Errorf("%w: no %s", kafka.ErrNotCoordinator, log.TransactionStateTopic)
	}
	st, ok := b.img.Load().Partition(tp.Topic, tp.Partition)
	// The replica too: applying an image that moves the leadership makes
	// it a follower before the image is stored and the coordinators are
	// synced, and meanwhile the old coordinator must not answer (as
	// localCoordinator, groups.go).
	if ps := b.part(tp); ok && st.Leader == b.cfg.ID && ps != nil && ps.leading.Load() {
		b.txns.mu.Lock()
		defer b.txns.mu.Unlock()
		if lt, ok := b.txns.led[tp.Partition]; ok && lt.epoch == st.LeaderEpoch {
			if lt.c == nil {
				return nil, fmt.Errorf("%w: %s-%d on broker %d", log.ErrTxnCoordinatorLoading, tp.Topic, tp.Partition, b.cfg.ID)
			}
			return lt.c, nil
		}
	}
	return nil, fmt.Errorf("%w: broker %d does not coordinate transactional id %q (yet)", kafka.ErrNotCoordinator, b.cfg.ID, id)
}

// txnCoordinators returns this member's loaded coordinators, by
// partition.
func (b *Broker) txnCoordinators() []*txn.Coordinator {
	b.txns.mu.Lock()
	defer b.txns.mu.Unlock()
	ps := make([]int, 0, len(b.txns.led))
	for p, lt := range b.txns.led {
		if lt.c != nil {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	out := make([]*txn.Coordinator, len(ps))
	for i, p := range ps {
		out[i] = b.txns.led[p].c
	}
	return out
}

// ensureTxnStateTopic creates __transaction_state if the metadata lacks
// it: Kafka's transaction.state.log.* defaults (compacted, never deleted
// by time, 100 MiB segments, RF 3 and min.insync.replicas 2, or fewer
// with fewer live brokers).
func (b *Broker) ensureTxnStateTopic(ctx context.Context) error {
	if _, ok := b.img.Load().PartitionCount(log.TransactionStateTopic); ok {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	live := 0
	for _, bi := range b.img.Load().Brokers() {
		if !bi.Fenced {
			live++
		}
	}
	rf := max(1, min(3, live))
	err := b.CreateTopic(ctx, log.TransactionStateTopic, log.TopicConfig{
		Partitions: b.txnStatePartitions(), ReplicationFactor: rf, MinInSyncReplicas: min(2, rf),
		RetentionTime: -1, Cleanup: log.CleanupCompact, SegmentBytes: 100 << 20,
	})
	if !errors.Is(err, log.ErrTopicExists) {
		return err
	}
	for { // created by another member: wait until this one has applied it
		ch := b.metaWatch()
		if _, ok := b.img.Load().PartitionCount(log.TransactionStateTopic); ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("replica: %s: %w", log.TransactionStateTopic, ctx.Err())
		case <-b.ctx.Done():
			return log.ErrClosed
		}
	}
}

// txnStateStore is a coordinator's partition of __transaction_state on
// this member, its leader (txn.Store): each record an acks=all produce. A
// write that fails here — the member lost the leadership, or the ISR is
// too small — is not acknowledged, and the coordinator forgets the
// change; it is closed once the metadata shows the new leader, or
// reloaded. The requests are answered NOT_COORDINATOR: clients find the
// coordinator again and retry.
type txnStateStore struct {
	b  *Broker
	tp log.TopicPartition
}

func (s txnStateStore) Write(ctx context.Context, key, value []byte) error {
	var bd batch.Builder
	now := s.b.cfg.Clock.Now().UnixMilli()
	bd.Reset(now)
	bd.Append(now, key, value, nil)
	ctx, cancel := context.WithTimeout(ctx, s.b.cfg.ProduceTimeout)
	defer cancel()
	_, err := s.b.produceLocal(ctx, s.tp, bd.Bytes(), log.AcksAll)
	if err != nil {
		// The record may be in this replica's log all the same (appended,
		// not acknowledged by enough replicas in time), and so in what
		// the next coordinator loads: this one reloads the partition
		// rather than go on from a state that forgot it.
		s.b.reloadTxnCoordinator(s.tp.Partition)
		if errors.Is(err, log.ErrRecordTooLarge) {
			return fmt.Errorf("replica: broker %d: write %s-%d: %w", s.b.cfg.ID, s.tp.Topic, s.tp.Partition, err)
		}
		// As Kafka's coordinator answers a failed append: find the
		// coordinator again (NOT_COORDINATOR), and retry.
		return fmt.Errorf("%w: broker %d: write %s-%d: %v", kafka.ErrNotCoordinator, s.b.cfg.ID, s.tp.Topic, s.tp.Partition, err)
	}
	return nil
}

// reloadTxnCoordinator closes the coordinator of partition p, in the
// background, and loads it again if this member still leads p.
func (b *Broker) reloadTxnCoordinator(p int) {
	x := &b.txns
	x.mu.Lock()
	defer x.mu.Unlock()
	lt, ok := x.led[p]
	if x.closed || !ok || lt.c == nil {
		return
	}
	delete(x.led, p)
	lt.cancel()
	x.loads.Add(1)
	go func() {
		defer x.loads.Done()
		lt.c.Close() // waits for its goroutines, one of which may be the caller
		b.log.Info("replica: transaction coordinator reloads after a failed write", "partition", p)
		b.syncTxnCoordinators()
	}()
}
