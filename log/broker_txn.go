package log

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// TransactionStateTopic is the internal topic of the transaction
// coordinator, as in Kafka: one record per transactional id
// (txn.EncodeKey, txn.EncodeValue), compacted. It is created on the first
// write, is not listed by Topics and cannot be created or deleted by
// users.
const TransactionStateTopic = "__transaction_state"

// txnStateTopicConfig is Kafka's transaction.state.log.* defaults on one
// node: compacted, never deleted by time, segments of 100 MiB
// (transaction.state.log.segment.bytes), and every record fsynced before
// it is acknowledged (FlushMessages 1): Kafka's durability is acks=all over
// three replicas with min.insync.replicas 2, a standalone broker's is its
// disk. One partition, as OffsetsTopic (broker_group.go): a standalone
// broker coordinates every transactional id itself, so Kafka's 50
// partitions would only be 50 logs to create, fsync and load for one
// coordinator; txn.PartitionFor(id, 1) is 0, and a data dir whose topic
// has more partitions is loaded whole all the same.
var txnStateTopicConfig = TopicConfig{Partitions: 1, FlushMessages: 1, RetentionTime: -1,
	Cleanup: CleanupCompact, SegmentBytes: 100 << 20}

// Kafka's transactional.id.expiration.ms and the period it is checked at
// (transaction.remove.expired.transaction.cleanup.interval.ms).
const (
	txnIDExpiration    = 7 * 24 * time.Hour
	txnExpirationCheck = time.Hour
)

// ErrTxnCoordinatorLoading: the transaction coordinator is still reading
// TransactionStateTopic (Kafka's COORDINATOR_LOAD_IN_PROGRESS); ask again.
var ErrTxnCoordinatorLoading = errors.New("log: transaction coordinator loading")

// txnHost runs the broker's transaction coordinator: loaded from
// TransactionStateTopic when the broker opens (in the background when the
// topic exists: a broker without one starts no goroutine), closed by Close
// before the group coordinator and the partitions it writes to.
type txnHost struct {
	loaded chan struct{} // closed once coord or err is set
	coord  *txn.Coordinator
	err    error

	ctx    context.Context // cancelled by closeTxn
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loader and the expiration check

	mu      sync.Mutex // guards expiry and stopped
	expiry  clock.Stopper
	stopped bool
}

// startTxn starts the transaction coordinator; it is served once loaded
// (TxnCoordinator).
func (b *Broker) startTxn() {
	h := &txnHost{loaded: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	b.txn = h
	b.mu.RLock()
	t, ok := b.topics[TransactionStateTopic]
	b.mu.RUnlock()
	if !ok {
		h.loadedWith(b.loadTxn(h.ctx, nil)) // nothing to read
		h.armExpiry(b)
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.loadedWith(b.loadTxn(h.ctx, t.parts))
		if h.err != nil {
			if h.ctx.Err() == nil {
				b.logger.Error("log: transaction coordinator failed to load", "err", h.err)
			}
			return
		}
		h.armExpiry(b)
	}()
}

func (h *txnHost) loadedWith(c *txn.Coordinator, err error) {
	h.coord, h.err = c, err
	close(h.loaded)
}

// loadTxn reads parts, the partitions of TransactionStateTopic, into a new
// coordinator.
func (b *Broker) loadTxn(ctx context.Context, parts []*Partition) (*txn.Coordinator, error) {
	epoch := int32(0)
	if len(parts) > 0 {
		epoch = parts[0].LeaderEpoch()
	}
	return txn.New(txn.Config{
		Store:            txnStore{b},
		Markers:          txnMarkers{b},
		ProducerIDs:      b.nextProducerID,
		Clock:            b.cfg.Clock,
		CoordinatorEpoch: epoch,
		Logger:           b.logger,
	}, func(yield func(key, value []byte) error) error {
		for _, p := range parts {
			if err := replayPartition(ctx, p, yield); err != nil {
				return err
			}
		}
		return nil
	})
}

// armExpiry expires idle transactional ids in txnExpirationCheck, then
// again, until closeTxn (a timer, not a goroutine, between checks).
func (h *txnHost) armExpiry(b *Broker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.wg.Add(1)
	h.expiry = b.cfg.Clock.AfterFunc(txnExpirationCheck, func() {
		defer h.wg.Done()
		if n := h.coord.ExpireIDs(h.ctx, txnIDExpiration); n > 0 {
			b.logger.Info("log: expired transactional ids", "count", n)
		}
		h.armExpiry(b)
	})
}

// closeTxn stops the coordinator and waits for its goroutines: the loader,
// the expiration check, and the coordinator's marker writers and timers.
func (b *Broker) closeTxn() {
	h := b.txn
	h.mu.Lock()
	h.stopped = true
	if h.expiry != nil && h.expiry.Stop() {
		h.wg.Done() // its callback will not run
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	if h.coord != nil {
		h.coord.Close()
	}
}

// TxnCoordinator returns the transaction coordinator of transactionalID
// (this broker's, for every id), waiting until ctx ends while it loads:
// ErrTxnCoordinatorLoading then. A coordinator that failed to load (a
// corrupt TransactionStateTopic) returns its error; a closed broker
// ErrClosed.
func (b *Broker) TxnCoordinator(ctx context.Context, transactionalID string) (*txn.Coordinator, error) {
	h := b.txn
	select {
	case <-h.loaded:
	default:
		select {
		case <-h.loaded:
		case <-ctx.Done():
			return nil, ErrTxnCoordinatorLoading
		}
	}
	if b.isClosed() {
		return nil, fmt.Errorf("log: transaction coordinator: %w", ErrClosed)
	}
	if h.err != nil {
		return nil, fmt.Errorf("log: transaction coordinator: %w", h.err)
	}
	return h.coord, nil
}

// nextProducerID allocates a producer id for the coordinator, from the
// same durable blocks as InitProducerID.
func (b *Broker) nextProducerID() (int64, error) {
	pid, err := b.InitProducerID(context.Background())
	return pid.ID, err
}

// txnStore is TransactionStateTopic as the coordinator writes it.
type txnStore struct{ b *Broker }

// Write appends one record and returns once it is fsynced (the topic's
// FlushMessages is 1). A failed append leaves the partition read-only
// (sticky) with nothing acknowledged, as txn.Store requires.
func (s txnStore) Write(ctx context.Context, key, value []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.b.txnStatePartition()
	if err != nil {
		return err
	}
	_, err = p.Append(Record{Key: key, Value: value})
	return err
}

// txnStatePartition returns the partition of TransactionStateTopic,
// creating the topic on first use.
func (b *Broker) txnStatePartition() (*Partition, error) {
	b.mu.RLock()
	t, ok := b.topics[TransactionStateTopic]
	closed := b.closed
	b.mu.RUnlock()
	if ok && !closed {
		return t.parts[0], nil // every write but the first
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("log: transaction state: %w", ErrClosed)
	}
	if t, ok = b.topics[TransactionStateTopic]; !ok {
		var err error
		if t, err = b.createTopicLocked(TransactionStateTopic, txnStateTopicConfig.WithDefaults()); err != nil {
			return nil, err
		}
	}
	return t.parts[0], nil
}

// txnMarkers writes the coordinator's markers to this broker's partitions.
type txnMarkers struct{ b *Broker }

func (w txnMarkers) WriteMarker(ctx context.Context, p tp.TopicPartition, m batch.Marker) error {
	err := w.b.WriteTxnMarker(ctx, p, m)
	switch {
	case errors.Is(err, ErrUnknownTopic), errors.Is(err, ErrUnknownPartition):
		return nil // deleted: no marker needed
	case errors.Is(err, ErrProducerFenced), errors.Is(err, ErrTransactionCoordinatorFenced):
		// A newer epoch (or coordinator) owns the producer here: Kafka's
		// coordinator drops the marker too, retrying would never succeed.
		w.b.logger.Warn("log: transaction marker refused, dropped", "partition", p, "producer", m.ProducerID, "err", err)
		return nil
	}
	return err
}

// WriteTxnMarker appends the transaction marker m (COMMIT or ABORT) to
// partition p, as a partition leader does for Kafka's WriteTxnMarkers:
// see Partition.AppendMarker for what it checks. A marker for a partition
// of OffsetsTopic completes the producer's transactional offset commits
// in the group coordinator instead.
func (b *Broker) WriteTxnMarker(ctx context.Context, p TopicPartition, m batch.Marker) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.ProducerID < 0 || m.ProducerEpoch < 0 {
		return fmt.Errorf("%w: marker of producer %d epoch %d", ErrInvalidRequest, m.ProducerID, m.ProducerEpoch)
	}
	if p.Topic == OffsetsTopic {
		return b.completeGroupTxnMarker(ctx, p, m)
	}
	part, err := b.Partition(p.Topic, p.Partition)
	if err != nil {
		return err
	}
	_, err = part.AppendMarker(m)
	return err
}

// completeGroupTxnMarker completes a producer's transactional offset
// commits in the group coordinator: the marker of partition p of
// OffsetsTopic.
func (b *Broker) completeGroupTxnMarker(ctx context.Context, p TopicPartition, m batch.Marker) error {
	return b.completeGroupTxn(ctx, m.ProducerID, m.ProducerEpoch, m.Commit)
}

// Producers returns the state of every producer partition tp knows, by
// producer id (Kafka's DescribeProducers): epoch, last sequence and
// timestamp, the coordinator epoch of its last marker and the first offset
// of its open transaction (-1 if none), which is how a hanging transaction
// is found and aborted.
func (b *Broker) Producers(ctx context.Context, tp TopicPartition) ([]ProducerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ps.Producers(), nil
}
