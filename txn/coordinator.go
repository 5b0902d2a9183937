package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
)

// Store is where a Coordinator keeps its records: the __transaction_state
// partition of its transactional ids (compacted, acks=all).
type Store interface {
	// Write appends the record (a nil value is a tombstone) and returns
	// once it is durable, or the error. partitions are those the record's
	// value names (its transaction's; none for a tombstone), for a store
	// whose durability depends on them, so that it need not decode the
	// value again. An error must mean the record is
	// not in the log (nor will be): the coordinator then forgets the
	// change. Write bounds its own time (a produce timeout): the
	// Coordinator does not cancel a write because the request that caused
	// it gave up, since a write cancelled halfway could be in the log
	// unbeknownst to the coordinator. It stops at ctx's end only when the
	// Coordinator closes.
	Write(ctx context.Context, key, value []byte, partitions []tp.TopicPartition) error
}

// MarkerWriter writes transaction markers to partitions (Kafka's
// WriteTxnMarkers to each partition's leader).
type MarkerWriter interface {
	// WriteMarker appends m to partition p and returns nil once it is
	// written, or once p no longer exists (a deleted topic needs no
	// marker). Any other error is retried after a backoff until it
	// succeeds or the Coordinator closes. It must respect ctx.
	WriteMarker(ctx context.Context, p tp.TopicPartition, m batch.Marker) error
}

// Config configures a Coordinator. Store, Markers and ProducerIDs are
// required; the zero value of every other field means its default.
type Config struct {
	Store   Store
	Markers MarkerWriter
	// ProducerIDs allocates a producer id (from the cluster's blocks).
	ProducerIDs func() (int64, error)
	Clock       clock.Clock // clock.System() if nil
	// MaxTimeout is transaction.max.timeout.ms: the longest transaction
	// timeout a producer may ask for. Default 15 minutes.
	MaxTimeout time.Duration
	// TransactionVersion is the cluster's transaction.version (0 to 2): the
	// version of the records written and of the aborts the coordinator
	// starts itself. Default 0.
	TransactionVersion int16
	// CoordinatorEpoch is written in every marker: the leader epoch of the
	// __transaction_state partition, so that partitions refuse the markers
	// of a coordinator that lost it.
	CoordinatorEpoch int32
	// AbortCheck is transaction.abort.timed.out.transaction.cleanup.interval.ms:
	// a transaction past its timeout is aborted at the first multiple of
	// it (in ms since the Unix epoch) at or after its deadline, as Kafka's
	// periodic check finds it, so that the timeouts of many transactions
	// fire together. 0: at its deadline.
	AbortCheck time.Duration
	// RetryBackoff is the wait before a failed marker or completion write
	// is retried. Default 100 ms (Kafka's retry.backoff.ms).
	RetryBackoff time.Duration
	// CompleteInline makes EndTxn write the transaction's markers and its
	// completion itself before it answers, once each, rather than hand them
	// to a background worker after the decision is written (Kafka's
	// answer): for markers that are local appends (a standalone broker),
	// so that the producer's next transaction finds the id idle and no
	// goroutine is woken per transaction. A marker or completion that
	// fails is retried in the background as usual, and EndTxn answers.
	CompleteInline bool
	Logger         *slog.Logger // slog.Default() if nil
}

// DefaultMaxTimeout is Kafka's transaction.max.timeout.ms.
const DefaultMaxTimeout = 15 * time.Minute

// ErrClosed is returned by a Coordinator after Close (the wire layer
// answers NOT_COORDINATOR).
var ErrClosed = errors.New("txn: coordinator closed")

// ErrConfig is returned by New for a Config without a Store, MarkerWriter
// or ProducerIDs, or with a negative duration or transaction version.
var ErrConfig = errors.New("txn: invalid coordinator config")

func (c Config) validate() error {
	switch {
	case c.Store == nil || c.Markers == nil || c.ProducerIDs == nil:
		return fmt.Errorf("%w: Store, Markers and ProducerIDs are required", ErrConfig)
	case c.MaxTimeout < 0 || c.RetryBackoff < 0 || c.TransactionVersion < 0 || c.AbortCheck < 0:
		return fmt.Errorf("%w: negative MaxTimeout, RetryBackoff, AbortCheck or TransactionVersion", ErrConfig)
	case c.MaxTimeout > 0 && c.MaxTimeout.Milliseconds() > 1<<31-1:
		return fmt.Errorf("%w: MaxTimeout %v does not fit an int32 of ms", ErrConfig, c.MaxTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Coordinator is the transaction coordinator of a set of transactional ids
// (those of one __transaction_state partition): the driver of the state
// machine. Its methods may be called from many goroutines at once; each
// request writes what it decides to the Store in the caller's goroutine and
// answers once written. The markers of a completing transaction, their
// retries, and the aborts of timed-out transactions run in goroutines the
// Coordinator owns; Close stops and waits for them.
type Coordinator struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	m       *machine
	closed  bool
	timers  map[string]armed
	waiters uint64 // the last request token
	// idle holds, per transactional id, the channel Idle handed out while
	// the id was busy; closed (and removed) once it is not.
	idle map[string]chan struct{}

	ctx    context.Context // background work; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // background workers, timer callbacks
	jobs   chan []effect  // to an idle background worker (unbuffered)
}

type armed struct {
	atMs int64
	stop clock.Stopper
}

// New returns a running Coordinator whose state is the records load
// yields, in log order (nil: none): the records of its __transaction_state
// partition, read back when it becomes the partition's leader. Records of
// other kinds (ErrNotTxnRecord) are skipped; a corrupt one fails New. The
// transactions found completing have their markers written again; the
// open ones are timed out as usual.
func New(cfg Config, load func(yield func(key, value []byte) error) error) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	mc := machineConfig{maxTimeoutMs: int32(cfg.MaxTimeout.Milliseconds()), transactionVersion: cfg.TransactionVersion}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, m: newMachine(mc, cfg.ProducerIDs), timers: map[string]armed{}, idle: map[string]chan struct{}{}, jobs: make(chan []effect)}
	if load != nil {
		err := load(func(key, value []byte) error {
			id, meta, err := DecodeRecord(key, value)
			if errors.Is(err, ErrNotTxnRecord) {
				return nil
			}
			if err != nil {
				return err
			}
			c.m.load(id, meta)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("txn: load: %w", err)
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.Lock()
	effs := c.m.loaded(c.nowMs())
	c.mu.Unlock()
	// The timeouts of the open transactions are armed when New returns
	// (a test's clock may be advanced at once); the markers are written
	// in the background.
	var rest []effect
	for _, e := range effs {
		if a, ok := e.(effArm); ok {
			c.arm(a)
		} else {
			rest = append(rest, e)
		}
	}
	c.background(rest)
	return c, nil
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Clock.Now().UnixMilli() }

// Close stops the Coordinator: later calls return ErrClosed, timers are
// stopped, marker writes and retries are cancelled, and Close waits for
// them. Requests in flight finish their write (within their ctx).
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, a := range c.timers {
		c.disarm(a)
	}
	clear(c.timers)
	for _, ch := range c.idle {
		close(ch)
	}
	clear(c.idle)
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// step steps the machine with ev and wakes the waiters of Idle whose id
// is no longer busy. mu is held.
func (c *Coordinator) step(ev event) []effect {
	effs := c.m.step(c.nowMs(), ev)
	for id, ch := range c.idle {
		if !c.m.busy(id) {
			close(ch)
			delete(c.idle, id)
		}
	}
	return effs
}

// closedChan is the answer of Idle for an id that is not busy.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Idle returns a channel closed once the transactional id is not busy: no
// write of its state pending and no transaction of it completing
// (PrepareCommit or PrepareAbort, markers being written) — the cases its
// requests answer ErrConcurrentTransactions. A caller in this process
// waits on it, rather than polling, before asking again; the answer may
// still be ErrConcurrentTransactions if another request made the id busy
// meanwhile. The channel is closed at once for an id not busy, and by
// Close.
func (c *Coordinator) Idle(id string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.m.busy(id) {
		return closedChan
	}
	ch := c.idle[id]
	if ch == nil {
		ch = make(chan struct{})
		c.idle[id] = ch
	}
	return ch
}

// request steps ev for a request and carries out the effects in the
// calling goroutine until its answer is known. A ctx already ended stops
// it before anything is decided; once decided, the write goes on (see
// Store).
//
// inline carries out the markers of a completing transaction here too,
// once (Config.CompleteInline).
func (c *Coordinator) request(ctx context.Context, inline bool, ev func(waiter uint64) event) Result {
	if err := ctx.Err(); err != nil {
		return errResult(err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errResult(ErrClosed)
	}
	c.waiters++
	w := c.waiters
	effs := c.step(ev(w))
	c.mu.Unlock()
	res, ok := c.run(c.ctx, effs, w, inline)
	if !ok {
		// Unreachable: every request is answered by the effects of its
		// own steps.
		return errResult(fmt.Errorf("%w: request not answered", errIllegalState))
	}
	return res
}

// run carries out effs: writes (then steps their outcome), markers and
// retries (in the background; with inline, markers here first), timers.
// It returns the answer to waiter, if one was among them.
func (c *Coordinator) run(ctx context.Context, effs []effect, waiter uint64, inline bool) (Result, bool) {
	var res Result
	answered := false
	for len(effs) > 0 {
		e := effs[0]
		effs = effs[1:]
		switch e := e.(type) {
		case effReply:
			if e.waiter == waiter {
				res, answered = e.res, true
			}
		case effAppend:
			if e.retry {
				c.background([]effect{e})
				continue
			}
			effs = append(effs, c.write(ctx, e)...)
		case effMarkers:
			if inline {
				effs = append(effs, c.writeMarkers(ctx, e, true)...)
				continue
			}
			c.background([]effect{e})
		case effArm:
			c.arm(e)
		case effRemoved:
			c.log.Info("txn: transactional id expired", "id", e.id)
		}
	}
	return res, answered
}

// write writes e's record and steps its outcome.
func (c *Coordinator) write(ctx context.Context, e effAppend) []effect {
	// A TV2 client's transaction is written with the fields TV2 needs
	// after a failover (the client's version, the previous and next
	// producer ids), whatever TransactionVersion says: the version the
	// server finalizes may be above the coordinator's.
	version := ValueVersion(max(c.cfg.TransactionVersion, e.meta.ClientTransactionVersion))
	value := EncodeValue(&e.meta, version)
	var ps []tp.TopicPartition
	if value != nil && e.meta.State != Empty {
		ps = e.meta.Partitions // as EncodeValue writes them
	}
	err := c.cfg.Store.Write(ctx, EncodeKey(e.id), value, ps)
	if err != nil {
		c.log.Warn("txn: write failed", "id", e.id, "state", e.meta.State, "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.step(appendedEvent{id: e.id, err: err})
}

// background carries out effs in a goroutine the Coordinator owns: marker
// writes and retried writes, with the Coordinator's context. An idle
// worker takes them if one waits (its stack already grown to the depth of
// a write: a goroutine per transaction spent a sixth of a transaction's
// CPU growing its stack), else a new worker starts.
func (c *Coordinator) background(effs []effect) {
	if len(effs) == 0 {
		return
	}
	select {
	case c.jobs <- effs:
		return
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go c.worker(effs)
}

// workerIdle is how long a background worker waits for more work before
// it exits.
const workerIdle = 5 * time.Second

// worker carries out effs, then the work background hands it, until it
// has been idle for workerIdle or the Coordinator closes.
func (c *Coordinator) worker(effs []effect) {
	defer c.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		c.runBackground(effs)
		idle.Reset(workerIdle)
		select {
		case effs = <-c.jobs:
		case <-idle.C:
			return
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *Coordinator) runBackground(effs []effect) {
	ctx := c.ctx
	for len(effs) > 0 && ctx.Err() == nil {
		e := effs[0]
		effs = effs[1:]
		switch e := e.(type) {
		case effMarkers:
			effs = append(effs, c.writeMarkers(ctx, e, false)...)
		case effAppend:
			if e.retry && !c.sleep(ctx) {
				return
			}
			effs = append(effs, c.write(ctx, e)...)
		default:
			c.run(ctx, []effect{e}, 0, false)
		}
	}
}

// writeMarkers writes e's marker to each partition, retrying each until it
// is written, and steps each; it returns the effects of the last (the
// completion's write). once (EndTxn with Config.CompleteInline): at the
// first failure it hands the partitions left, that one first, to the
// background, which retries them, and returns none.
func (c *Coordinator) writeMarkers(ctx context.Context, e effMarkers, once bool) []effect {
	var out []effect
	for i, p := range e.partitions {
		for {
			m := batch.Marker{Commit: e.commit, CoordinatorEpoch: c.cfg.CoordinatorEpoch,
				ProducerID: e.producerID, ProducerEpoch: e.epoch, Timestamp: c.nowMs()}
			err := c.cfg.Markers.WriteMarker(ctx, p, m)
			if err == nil {
				break
			}
			c.log.Warn("txn: marker write failed, retrying", "id", e.id, "partition", p, "err", err)
			if once {
				rest := e
				rest.partitions = e.partitions[i:]
				c.background([]effect{rest})
				return nil
			}
			if !c.sleep(ctx) {
				return nil
			}
		}
		c.mu.Lock()
		out = append(out, c.step(markerEvent{id: e.id, p: p})...)
		c.mu.Unlock()
	}
	return out
}

// sleep waits RetryBackoff; false if ctx ended first.
func (c *Coordinator) sleep(ctx context.Context) bool {
	t := c.cfg.Clock.NewTimer(c.cfg.RetryBackoff)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// arm arms id's timeout timer at e.atMs, unless one fires by then.
func (c *Coordinator) arm(e effArm) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if iv := c.cfg.AbortCheck.Milliseconds(); iv > 0 {
		e.atMs = (e.atMs + iv - 1) / iv * iv // the next tick of the check
	}
	if a, ok := c.timers[e.id]; ok {
		if a.atMs <= e.atMs {
			return // fires first; re-armed then if need be
		}
		c.disarm(a)
	}
	id := e.id
	d := time.Duration(e.atMs-c.nowMs()) * time.Millisecond
	c.wg.Add(1)
	var stop clock.Stopper
	stop = c.cfg.Clock.AfterFunc(d, func() {
		defer c.wg.Done()
		c.mu.Lock()
		if c.closed || c.timers[id].stop != stop {
			c.mu.Unlock()
			return
		}
		delete(c.timers, id)
		effs := c.step(timeoutEvent{id: id})
		c.mu.Unlock()
		c.run(c.ctx, effs, 0, false)
	})
	c.timers[id] = armed{atMs: e.atMs, stop: stop}
}

// disarm stops a timer; one stopped before its callback ran leaves the
// wait group to Close. mu is held.
func (c *Coordinator) disarm(a armed) {
	if a.stop.Stop() {
		c.wg.Done()
	}
}

// InitProducerID is InitProducerId with a transactional id: the producer
// id and epoch to use. expected is the producer's current id and epoch when
// it recovers (KIP-360), nil for a new producer.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, expected *ProducerIDEpoch) (ProducerIDEpoch, error) {
	ms := timeout.Milliseconds()
	if ms > 1<<31-1 {
		ms = 1<<31 - 1
	}
	res := c.request(ctx, false, func(w uint64) event {
		return initEvent{id: id, waiter: w, timeoutMs: int32(ms), expected: expected}
	})
	return ProducerIDEpoch{res.ProducerID, res.ProducerEpoch}, res.Err
}

// AddPartitions is AddPartitionsToTxn: the partitions join the producer's
// transaction (opening it). clientTV is the client's transaction version;
// a partition leader adding a partition on a producer's behalf (KIP-890)
// passes the producer's.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, ps []tp.TopicPartition, clientTV int16) error {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, tp.Compare)
	ps = slices.Compact(ps)
	return c.request(ctx, false, func(w uint64) event {
		return addEvent{id: id, waiter: w, producerID: producerID, epoch: epoch, partitions: ps, clientTV: clientTV}
	}).Err
}

// OffsetsTopic is the topic of consumer group offsets, whose partitions
// AddOffsets adds to a transaction.
const OffsetsTopic = "__consumer_offsets"

// AddOffsets is AddOffsetsToTxn: the partition of __consumer_offsets that
// holds the group's offsets (groupPartition) joins the transaction, so
// that the group's transactional commits are completed by its markers.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, producerID int64, epoch int16, groupPartition int, clientTV int16) error {
	return c.AddPartitions(ctx, id, producerID, epoch, []tp.TopicPartition{{Topic: OffsetsTopic, Partition: groupPartition}}, clientTV)
}

// VerifyPartitions answers a partition leader checking that a
// transactional produce's partitions are in the transaction (KIP-890 part
// 1): nil for those that are, ErrTransactionAbortable for the others, or
// the request's error for all.
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, ps []tp.TopicPartition) map[tp.TopicPartition]error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		out := make(map[tp.TopicPartition]error, len(ps))
		for _, p := range ps {
			out[p] = ErrClosed
		}
		return out
	}
	return c.m.verify(id, producerID, epoch, ps)
}

// EndTxn commits or aborts the producer's transaction. It answers once the
// decision is written; the markers follow in the background (with
// Config.CompleteInline, they and the completion are written first, and
// only a failed one follows in the background). The answer is
// the producer id and epoch to use next (bumped from transaction version 2).
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool, clientTV int16) (ProducerIDEpoch, error) {
	res := c.request(ctx, c.cfg.CompleteInline, func(w uint64) event {
		return endEvent{id: id, waiter: w, producerID: producerID, epoch: epoch, commit: commit, clientTV: clientTV}
	})
	return ProducerIDEpoch{res.ProducerID, res.ProducerEpoch}, res.Err
}

// Describe returns a copy of id's metadata (DescribeTransactions); false if
// the id is unknown or expiring.
func (c *Coordinator) Describe(id string) (Metadata, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.describe(id)
}

// Listing is one transactional id in List.
type Listing struct {
	ID         string
	ProducerID int64
	State      State
}

// ListFilter selects the transactional ids List returns (Kafka's
// ListTransactions filters); its zero value selects every one.
type ListFilter struct {
	States      []State // in one of these states; none: any
	ProducerIDs []int64 // with one of these producer ids; none: any
	// MinDuration keeps the transactions running longer than it (KIP-994),
	// counted from their start; an id with no transaction open has no
	// start and always passes, as in Kafka. 0: no filter.
	MinDuration time.Duration
}

// List returns the transactional ids f selects, sorted (ListTransactions).
func (c *Coordinator) List(f ListFilter) []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	out := make([]Listing, 0, len(c.m.txns))
	for _, id := range slices.Sorted(maps.Keys(c.m.txns)) {
		meta, ok := c.m.describe(id)
		switch {
		case !ok,
			len(f.States) > 0 && !slices.Contains(f.States, meta.State),
			len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, meta.ProducerID),
			f.MinDuration > 0 && now-meta.StartMs <= f.MinDuration.Milliseconds():
			continue
		}
		out = append(out, Listing{ID: id, ProducerID: meta.ProducerID, State: meta.State})
	}
	return out
}

// ExpireIDs expires the transactional ids without a transaction that
// nothing changed for expiration (transactional.id.expiration.ms; Kafka
// checks every hour): their records become tombstones. It returns how many
// it expired; it stops early when ctx ends (a tombstone being written is
// finished).
func (c *Coordinator) ExpireIDs(ctx context.Context, expiration time.Duration) int {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0
	}
	ids := slices.Sorted(maps.Keys(c.m.txns))
	c.mu.Unlock()
	n := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		c.mu.Lock()
		effs := c.step(expireEvent{id: id, expirationMs: expiration.Milliseconds()})
		c.mu.Unlock()
		for len(effs) > 0 {
			e := effs[0]
			effs = effs[1:]
			switch e := e.(type) {
			case effAppend:
				effs = append(effs, c.write(c.ctx, e)...)
			case effRemoved:
				n++
			}
		}
	}
	return n
}
