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
// (transaction.state.log.segment.bytes). One partition, as OffsetsTopic
// (broker_group.go): a standalone broker coordinates every transactional
// id itself, so Kafka's 50 partitions would only be 50 logs to create,
// fsync and load for one coordinator; txn.PartitionFor(id, 1) is 0, and a
// data dir whose topic has more partitions is loaded whole all the same.
// Its flush policy is the broker's (txnStateConfig).
var txnStateTopicConfig = TopicConfig{Partitions: 1, RetentionTime: -1,
	Cleanup: CleanupCompact, SegmentBytes: 100 << 20}

// txnStateConfig is the configuration TransactionStateTopic is created
// with: its flush policy is the broker's (Config.DefaultTopic's
// FlushMessages and FlushInterval), as that of the records whose
// transactions it decides. Kafka fsyncs neither and relies on replication;
// a standalone broker makes the coordinator's records as durable as the
// records of their transactions, never less (txnStore.Write):
//
//   - A process crash loses nothing written to the page cache, in order:
//     a transaction's partitions are recorded (Ongoing) before its records
//     are appended, and its decision (PrepareCommit, PrepareAbort) before
//     any of its markers, so a reopened coordinator knows every
//     transaction any partition holds and writes the missing markers.
//   - A record that names a partition which fsyncs by itself
//     (FlushMessages or FlushInterval set on its topic, or OffsetsTopic,
//     whose commits are fsynced) is fsynced before it is answered
//     (concurrent writes share fsyncs: group commit), and so before the
//     records or markers that depend on it: a power loss keeps each such
//     transaction whole.
//   - With the broker's default FlushMessages 1 every record is fsynced
//     before it is answered.
//
// With the default page-cache policy (FlushMessages 0), a power loss may
// lose the latest records of any partition and the coordinator's latest
// decisions, and with them part of a recent transaction, as Kafka's one
// unreplicated broker may.
func (b *Broker) txnStateConfig() TopicConfig {
	cfg := txnStateTopicConfig
	cfg.FlushMessages = b.cfg.DefaultTopic.FlushMessages
	cfg.FlushInterval = b.cfg.DefaultTopic.FlushInterval
	return cfg.WithDefaults()
}

// Kafka's transaction coordinator defaults: transaction.max.timeout.ms,
// transactional.id.expiration.ms, the period idle ids are expired at
// (transaction.remove.expired.transaction.cleanup.interval.ms) and the
// period timed-out transactions are aborted at
// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
const (
	txnMaxTimeout       = txn.DefaultMaxTimeout
	txnIDExpiration     = 7 * 24 * time.Hour
	txnExpirationCheck  = time.Hour
	txnAbortTimedOutInt = 10 * time.Second
)

// validateTxn checks the transaction coordinator's settings: none
// negative, TransactionMaxTimeout an int32 of ms (Kafka's type).
func (c Config) validateTxn() error {
	switch {
	case c.TransactionMaxTimeout < 0 || c.TransactionalIDExpiration < 0 || c.TransactionAbortTimedOutInterval < 0:
		return fmt.Errorf("%w: negative transaction timeout, expiration or abort interval", ErrInvalidConfig)
	case c.TransactionVersion > txn.TV2:
		return fmt.Errorf("%w: transaction version %d (at most %d)", ErrInvalidConfig, c.TransactionVersion, txn.TV2)
	case c.TransactionMaxTimeout.Milliseconds() > 1<<31-1:
		return fmt.Errorf("%w: transaction.max.timeout.ms %d is more than 2147483647", ErrInvalidConfig, c.TransactionMaxTimeout.Milliseconds())
	case c.TransactionalIDExpiration.Milliseconds() > 1<<31-1 || c.TransactionAbortTimedOutInterval.Milliseconds() > 1<<31-1:
		return fmt.Errorf("%w: transactional.id.expiration.ms or transaction.abort.timed.out.transaction.cleanup.interval.ms is more than 2147483647", ErrInvalidConfig)
	}
	return nil
}

// TxnConfig is the transaction coordinator's settings of a Broker,
// defaults applied (Config's fields of the same names).
type TxnConfig struct {
	MaxTimeout            time.Duration // transaction.max.timeout.ms
	IDExpiration          time.Duration // transactional.id.expiration.ms
	AbortTimedOutInterval time.Duration // transaction.abort.timed.out.transaction.cleanup.interval.ms
	RemoveExpiredInterval time.Duration // transaction.remove.expired.transaction.cleanup.interval.ms
	Version               int16         // transaction.version of the coordinator's own aborts
	MaxTimeoutSet         bool          // set in Config, not the default
	IDExpirationSet       bool
	AbortTimedOutSet      bool
}

// TxnConfig returns the transaction coordinator's settings (shown by
// DescribeConfigs of the broker).
func (b *Broker) TxnConfig() TxnConfig {
	c := TxnConfig{MaxTimeout: txnMaxTimeout, IDExpiration: txnIDExpiration, AbortTimedOutInterval: txnAbortTimedOutInt,
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
	switch v := b.cfg.TransactionVersion; {
	case v == 0:
		c.Version = txn.TV2
	case v > 0:
		c.Version = v
	}
	return c
}

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
		Store:              txnStore{b},
		Markers:            txnMarkers{b},
		ProducerIDs:        b.nextProducerID,
		Clock:              b.cfg.Clock,
		CoordinatorEpoch:   epoch,
		Logger:             b.logger,
		MaxTimeout:         b.TxnConfig().MaxTimeout,
		AbortCheck:         b.TxnConfig().AbortTimedOutInterval,
		TransactionVersion: b.TxnConfig().Version,
		// The markers are appends to this broker's partitions: EndTxn
		// writes them and the completion before it answers.
		CompleteInline: true,
	}, func(yield func(key, value []byte) error) error {
		for _, p := range parts {
			if err := replayPartition(ctx, p, yield); err != nil {
				return err
			}
		}
		return nil
	})
}

// armExpiry expires idle transactional ids every
// TxnConfig().RemoveExpiredInterval, until closeTxn (a timer, not a
// goroutine, between checks).
func (h *txnHost) armExpiry(b *Broker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.wg.Add(1)
	tc := b.TxnConfig()
	h.expiry = b.cfg.Clock.AfterFunc(tc.RemoveExpiredInterval, func() {
		defer h.wg.Done()
		if n := h.coord.ExpireIDs(h.ctx, tc.IDExpiration); n > 0 {
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

// Write appends one record and returns once it is as durable as the
// records of the partitions it names (txnStateConfig): fsynced if one of
// them fsyncs by itself, else in the page cache (and fsynced by the
// topic's own flush policy). A failed append or fsync leaves the partition
// read-only (sticky) with nothing acknowledged, as txn.Store requires.
func (s txnStore) Write(ctx context.Context, key, value []byte, partitions []tp.TopicPartition) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.b.txnStatePartition()
	if err != nil {
		return err
	}
	base, err := p.Append(Record{Key: key, Value: value})
	if err != nil || p.config().FlushMessages == 1 || !s.b.txnNeedsSync(partitions) {
		return err // FlushMessages 1: Append fsynced it
	}
	return p.syncTo(base+1, false)
}

// txnNeedsSync reports whether a record of TransactionStateTopic naming
// partitions needs an fsync: one of them is OffsetsTopic's, or of a topic
// with FlushMessages or FlushInterval set.
func (b *Broker) txnNeedsSync(partitions []tp.TopicPartition) bool {
	for _, q := range partitions {
		if q.Topic == OffsetsTopic {
			return true
		}
		p, err := b.Partition(q.Topic, q.Partition)
		if err != nil {
			continue // deleted: no records to keep whole
		}
		if c := p.config(); c.FlushMessages > 0 || c.FlushInterval > 0 {
			return true
		}
	}
	return false
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
		if t, err = b.createTopicLocked(TransactionStateTopic, b.txnStateConfig()); err != nil {
			return nil, err
		}
	}
	return t.parts[0], nil
}

// txnMarkers writes the coordinator's markers to this broker's partitions.
type txnMarkers struct{ b *Broker }

// WriteMarker writes m and, in a partition that fsyncs by itself
// (FlushMessages or FlushInterval set), fsyncs it before it answers: the
// completion the coordinator writes next must never be durable without
// the marker (txnStateConfig), or a power loss would leave the
// transaction open in the partition while the coordinator knows it
// complete.
func (w txnMarkers) WriteMarker(ctx context.Context, p tp.TopicPartition, m batch.Marker) error {
	err := w.b.WriteTxnMarker(ctx, p, m)
	if err == nil && p.Topic != OffsetsTopic {
		if part, perr := w.b.Partition(p.Topic, p.Partition); perr == nil {
			if c := part.config(); c.FlushMessages > 1 || c.FlushMessages == 0 && c.FlushInterval > 0 {
				err = part.syncTo(part.EndOffset(), false) // FlushMessages 1: AppendMarker did
			}
		}
	}
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
