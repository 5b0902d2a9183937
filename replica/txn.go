package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/clock"
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
	ledCoordinators[int, *txn.Coordinator]

	// expiry is the next check of idle transactional ids
	// (transactional.id.expiration.ms) in the led coordinators, armed at
	// the first sync; expiryWG holds its callback, joined by
	// stopTxnCoordinators.
	expiryMu sync.Mutex
	expiry   clock.Stopper
	stopped  bool
	clock    clock.Clock // the coordinators' clock; nil: the member's (SetTxnClock, in tests)
	expiryWG sync.WaitGroup

	idsMu sync.Mutex
	// ids are the transactional ids of the producer ids this member's
	// InitTxnProducerID handed out: a transactional batch it forwards
	// over the Kafka protocol names its id, as a Kafka client's does.
	ids map[int64]string
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
	b.txns.sync(b.ctx, want, b.txnLoader())
	if len(want) > 0 {
		b.armTxnExpiry(false) // once it first leads one
	}
}

// Kafka's transaction coordinator defaults (as log's): transaction.max.timeout.ms,
// transactional.id.expiration.ms, the period idle ids are expired at
// (transaction.remove.expired.transaction.cleanup.interval.ms: an hour, or
// the expiration if less) and the period timed-out transactions are
// aborted at.
const (
	txnIDExpiration       = 7 * 24 * time.Hour
	txnExpirationCheck    = time.Hour
	txnAbortTimedOutCheck = 10 * time.Second
)

// TxnConfig returns the transaction coordinators' settings, defaults
// applied: DescribeConfigs of a member shows them (kafka.TxnConfiger).
func (b kafkaBackend) TxnConfig() log.TxnConfig { return b.txnConfig() }

func (b *Broker) txnConfig() log.TxnConfig {
	c := log.TxnConfig{MaxTimeout: txn.DefaultMaxTimeout, IDExpiration: txnIDExpiration, AbortTimedOutInterval: txnAbortTimedOutCheck,
		MaxTimeoutSet: b.cfg.TransactionMaxTimeout > 0, IDExpirationSet: b.cfg.TransactionalIDExpiration > 0,
		AbortTimedOutSet: b.cfg.TransactionAbortTimedOutInterval > 0}
	if c.MaxTimeoutSet {
		c.MaxTimeout = b.cfg.TransactionMaxTimeout
	}
	if c.IDExpirationSet {
		c.IDExpiration = b.cfg.TransactionalIDExpiration
	}
	if c.AbortTimedOutSet {
		c.AbortTimedOutInterval = b.cfg.TransactionAbortTimedOutInterval
	}
	c.RemoveExpiredInterval = min(txnExpirationCheck, c.IDExpiration)
	return c
}

// transactionVersion is Config.TransactionVersion, defaults applied: the
// version of the aborts the coordinators start themselves (timeouts,
// fences), as Kafka's coordinator takes its finalized transaction.version
// for them.
func (c Config) transactionVersion() int16 {
	switch {
	case c.TransactionVersion == 0:
		return txn.TV2
	case c.TransactionVersion < 0:
		return 0
	}
	return c.TransactionVersion
}

// validateTxn checks the transaction settings: none negative, each an
// int32 of ms (Kafka's type), a transaction version of at most 2.
func (c Config) validateTxn() error {
	if c.TransactionVersion > txn.TV2 {
		return fmt.Errorf("%w: replica: transaction version %d (at most %d)", ErrInvalidConfig, c.TransactionVersion, txn.TV2)
	}
	for _, d := range []time.Duration{c.TransactionMaxTimeout, c.TransactionalIDExpiration, c.TransactionAbortTimedOutInterval} {
		if d < 0 || d.Milliseconds() > 1<<31-1 {
			return fmt.Errorf("%w: replica: transaction timeout, expiration or abort interval %v: want 0 to 2147483647 ms", ErrInvalidConfig, d)
		}
	}
	return nil
}

// txnClock is the clock of the transaction coordinators and of their
// expiry checks.
func (b *Broker) txnClock() clock.Clock {
	b.txns.expiryMu.Lock()
	defer b.txns.expiryMu.Unlock()
	if b.txns.clock != nil {
		return b.txns.clock
	}
	return b.cfg.Clock
}

// armTxnExpiry arms the next check of idle transactional ids, if none is
// armed or rearm (called by the check that just ran): every
// RemoveExpiredInterval, each coordinator this member runs then tombstones
// the ids idle for IDExpiration (Kafka's transactional.id.expiration.ms),
// until stopTxnCoordinators. A timer, not a goroutine, between checks.
func (b *Broker) armTxnExpiry(rearm bool) {
	x := &b.txns
	x.expiryMu.Lock()
	defer x.expiryMu.Unlock()
	if x.stopped || x.expiry != nil && !rearm {
		return
	}
	clk := x.clock
	if clk == nil {
		clk = b.cfg.Clock
	}
	tc := b.txnConfig()
	x.expiryWG.Add(1)
	x.expiry = clk.AfterFunc(tc.RemoveExpiredInterval, func() {
		defer x.expiryWG.Done()
		for _, c := range b.txnCoordinators() {
			if n := c.ExpireIDs(b.ctx, tc.IDExpiration); n > 0 {
				b.log.Info("replica: expired transactional ids", "count", n)
			}
		}
		b.armTxnExpiry(true)
	})
}

// txnLoader loads the coordinator of a partition of __transaction_state
// over this member's replica of it, which it replays to its end: the
// leader's log is the one that will be committed.
func (b *Broker) txnLoader() *ledLoader[int, *txn.Coordinator] {
	return &ledLoader[int, *txn.Coordinator]{
		what: "transaction coordinator",
		open: func(ctx context.Context, p int, epoch int32) (*txn.Coordinator, error) {
			tp := log.TopicPartition{Topic: log.TransactionStateTopic, Partition: p}
			ps := b.part(tp)
			if ps == nil {
				return nil, fmt.Errorf("%w: no replica of %s-%d", log.ErrUnknownPartition, tp.Topic, p)
			}
			return txn.New(txn.Config{
				Store:            txnStateStore{b, tp},
				Markers:          txnMarkerWriter{b},
				ProducerIDs:      b.nextTxnProducerID,
				Clock:            b.txnClock(),
				CoordinatorEpoch: epoch,
				MaxTimeout:       b.txnConfig().MaxTimeout,
				AbortCheck:       b.txnConfig().AbortTimedOutInterval,
				// The finalized transaction.version: the version of the
				// aborts it starts itself.
				TransactionVersion: b.cfg.transactionVersion(),
				Logger:             b.log.With("transaction state partition", p),
			}, func(yield func(key, value []byte) error) error {
				return log.PartitionOffsetsLog(ps.p, nil).Replay(ctx, yield)
			})
		},
		// Closed before the next is loaded: its writes in flight finish
		// (or fail) first, and its marker writers stop.
		close:   func(_ int, c *txn.Coordinator) { c.Close() },
		compare: cmp.Compare[int],
		backoff: 50 * time.Millisecond, maxBackoff: 5 * time.Second,
		log: b.log,
	}
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
	x.expiryMu.Lock()
	x.stopped = true
	if x.expiry != nil && x.expiry.Stop() {
		x.expiryWG.Done() // its callback will not run
	}
	x.expiryMu.Unlock()
	x.expiryWG.Wait()
	x.stop(b.txnLoader())
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
		if c, found, loaded := b.txns.get(tp.Partition, st.LeaderEpoch); found {
			if loaded {
				return c, nil
			}
			return nil, fmt.Errorf("%w: %s-%d on broker %d", log.ErrTxnCoordinatorLoading, tp.Topic, tp.Partition, b.cfg.ID)
		}
	}
	return nil, fmt.Errorf("%w: broker %d does not coordinate transactional id %q (yet)", kafka.ErrNotCoordinator, b.cfg.ID, id)
}

// txnCoordinators returns this member's loaded coordinators, by
// partition.
func (b *Broker) txnCoordinators() []*txn.Coordinator {
	return b.txns.loaded(cmp.Compare[int])
}

// ensureTxnStateTopic creates __transaction_state if the metadata lacks
// it: Kafka's transaction.state.log.* defaults (compacted, never deleted
// by time, 100 MiB segments, RF 3 and min.insync.replicas 2, or fewer
// with fewer live brokers).
func (b *Broker) ensureTxnStateTopic(ctx context.Context) error {
	return b.ensureInternalTopic(ctx, log.TransactionStateTopic, log.TopicConfig{
		Partitions: b.txnStatePartitions(), RetentionTime: -1, Cleanup: log.CleanupCompact, SegmentBytes: 100 << 20,
	})
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

func (s txnStateStore) Write(ctx context.Context, key, value []byte, _ []log.TopicPartition) error {
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
// background (the close waits for the coordinator's goroutines, one of
// which may be the caller), and loads it again if this member still leads
// p.
func (b *Broker) reloadTxnCoordinator(p int) {
	b.txns.reload(p, b.txnLoader(), func() {
		b.log.Info("replica: transaction coordinator reloads after a failed write", "partition", p)
		b.syncTxnCoordinators()
	})
}
