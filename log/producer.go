package log

import (
	"context"
	"errors"
	"fmt"
	stdlog "log/slog"
	"sync"
	"time"

	"github.com/strata-log/strata/segment/batch"
)

// Errors of the Producer. Test for them with errors.Is.
var (
	// ErrIdempotenceUnsupported is returned by NewProducer for
	// ProducerConfig.Idempotent: idempotent producers (producer ids and
	// sequence numbers) are not built yet.
	ErrIdempotenceUnsupported = errors.New("log: idempotent producer not built yet (set ProducerConfig.Idempotent to false)")
	// ErrTimeout is the error of a record that was not acknowledged within
	// ProducerConfig.Timeout. Such errors also match
	// context.DeadlineExceeded. The record may still have been written.
	ErrTimeout = errors.New("log: produce timed out")
)

// errProducerClosed is the error of a record sent after Close.
var errProducerClosed = fmt.Errorf("log: producer: %w", ErrClosed)

// ProducerConfig configures a Producer. The zero value means Kafka's
// defaults.
type ProducerConfig struct {
	// Acks says when a record counts as sent: AcksAll (the zero value) and
	// AcksLeader once the broker has appended it (on a standalone broker
	// both mean appended, and fsynced when the topic's FlushMessages asks
	// for it); AcksNone as soon as it is queued in the producer.
	Acks Acks
	// Linger is how long a batch waits for more records before it is sent
	// (Kafka's linger.ms); 0 → 5 ms (Kafka 4.0's default); negative → no
	// wait: a batch goes as soon as no other batch of its partition is in
	// flight. A full batch never waits.
	Linger time.Duration
	// BatchBytes is the size at which a partition's batch is closed and
	// sent (Kafka's batch.size); 0 → 16 KiB. A record larger than this
	// goes alone in a batch of its own.
	BatchBytes int
	// Timeout bounds how long a record may wait: for room in the buffer,
	// in its batch, and for the broker's answer (counted from when its
	// batch was opened). Past it the record fails with an error matching
	// ErrTimeout and context.DeadlineExceeded. 0 → 30 s (Kafka's
	// request.timeout.ms; Strata does not retry, so it also plays the part
	// of delivery.timeout.ms). It must be longer than Linger.
	Timeout time.Duration
	// Idempotent asks for an idempotent producer: not built yet, NewProducer
	// refuses it with ErrIdempotenceUnsupported.
	Idempotent bool
	// Partitioner picks each record's partition; the zero value is
	// PartitionerDefault (Kafka's murmur2 for keys, sticky for nil keys).
	Partitioner Partitioner
	// BufferBytes bounds the memory of records waiting to be acknowledged:
	// their encoded size plus about 100 bytes of bookkeeping each (Kafka's
	// buffer.memory); 0 → 32 MiB. Send and SendAsync block while it is
	// full, up to Timeout.
	BufferBytes int
	// Logger receives a line for each failed batch holding fire-and-forget
	// records (nil done), whose errors would otherwise go unseen;
	// nil → discard.
	Logger *stdlog.Logger
}

// Kafka's producer defaults.
const (
	defaultLinger      = 5 * time.Millisecond
	defaultBatchBytes  = 16 << 10
	defaultTimeout     = 30 * time.Second
	defaultBufferBytes = 32 << 20
)

func (c ProducerConfig) withDefaults() ProducerConfig {
	if c.Linger == 0 {
		c.Linger = defaultLinger
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = defaultBatchBytes
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = defaultBufferBytes
	}
	if c.Logger == nil {
		c.Logger = stdlog.New(stdlog.DiscardHandler)
	}
	return c
}

func (c ProducerConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: producer: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Idempotent:
		return ErrIdempotenceUnsupported
	case c.Acks < AcksAll || c.Acks > AcksNone:
		return bad("unknown acks %d", int(c.Acks))
	case c.Partitioner < PartitionerDefault || c.Partitioner > PartitionerRoundRobin:
		return bad("unknown partitioner %d", int(c.Partitioner))
	case c.BatchBytes < 0:
		return bad("negative batch bytes %d", c.BatchBytes)
	case c.Timeout < 0:
		return bad("negative timeout %v", c.Timeout)
	case c.Linger >= c.Timeout:
		return bad("linger %v must be shorter than timeout %v", c.Linger, c.Timeout)
	case c.BufferBytes < 0:
		return bad("negative buffer bytes %d", c.BufferBytes)
	}
	return nil
}

// A Producer sends records to the partitions of a Client's topics, in
// batches, as Kafka's producer does.
//
// Each record's partition is chosen by the Partitioner. Records are
// gathered per partition into one record batch until it holds BatchBytes or
// has waited Linger, then the batch goes to the broker with one
// Client.Produce. A partition has one batch in flight at a time, so its
// records are written in the order they were sent (Kafka with
// max.in.flight.requests.per.connection 1). Errors are not retried.
//
// Partition counts are read once per topic with Client.Partitions and
// cached; a produce that fails with ErrUnknownTopic or ErrUnknownPartition
// makes the next send read them again. Topics are never created by the
// Producer: sending to a missing one fails with ErrUnknownTopic.
//
// The Producer owns a linger-timer goroutine, and a sender goroutine for
// each partition that has batches to send; Close stops and waits for them.
// It is safe for concurrent use.
type Producer struct {
	c      Client
	cfg    ProducerConfig
	linger time.Duration // cfg.Linger, 0 when negative: no wait

	mu       sync.Mutex
	topics   map[string]*topicState
	last     *topicState   // the topic of the previous send: skips the map
	free     []*pbatch     // batches to reuse
	buffered int           // estimated bytes of unacknowledged records
	lingers  []lingerEntry // open batches by linger deadline (all equal: FIFO)
	lingHead int           // lingers[lingHead:] are live
	armed    bool          // the timer goroutine knows of lingers[lingHead]
	changed  chan struct{} // closed when a batch completes, if not nil
	nextID   uint64
	closed   bool
	clock    time.Time // the anchor of nowMsLocked, with its monotonic reading
	clockNs  int64     // clock.UnixNano()
	lastMs   int64     // the timestamp of the previous record...
	lastTime time.Time // ...as a Time: most records share their ms

	// waiters are Send's, reused. Per Producer, not per package: a channel
	// made inside a testing/synctest bubble must stay in it.
	waiters sync.Pool

	kick      chan struct{} // wakes the timer goroutine
	stop      chan struct{} // closed by Close: the timer goroutine returns
	closeDone chan struct{} // closed when Close has finished
	wg        sync.WaitGroup
}

// topicState is what the Producer knows of a topic.
type topicState struct {
	name   string
	n      int          // partitions to choose from
	parts  []*partState // every partition seen; len(parts) >= n
	stale  bool         // read the partition count again before the next send
	sticky int          // the sticky partition of nil-key records; -1: none
	rr     uint         // PartitionerRoundRobin's counter
}

// partState is one partition's accumulator: the batch that takes records,
// the closed batches waiting to be sent, and the sender's progress.
type partState struct {
	topic      *topicState
	tp         TopicPartition
	open       *pbatch // takes records; nil when none
	head, tail *pbatch // closed batches, oldest first
	running    bool    // a sender goroutine is working for this partition
	closedSeq  uint64  // batches closed so far: batch.seq of the last
	doneSeq    uint64  // batches completed so far (they complete in order)
}

// pbatch is a batch being built or sent, with the records' callbacks.
type pbatch struct {
	bd       batch.Builder
	slots    []slot
	id       uint64 // unique among the Producer's batches (recycling reuses the struct)
	seq      uint64 // position among its partition's closed batches, from 1
	created  time.Time
	deadline time.Time // created + Timeout
	bytes    int       // estimated memory, counted in Producer.buffered
	raw      []byte    // the finished batch (bd.Bytes), once finish is called
	next     *pbatch
}

// finish completes the encoding of a batch that takes no more records.
func (b *pbatch) finish() { b.raw = b.bd.Bytes() }

// slot is one record of a batch: what its callback gets back.
type slot struct {
	key, value []byte
	headers    []Header
	ts         int64 // ms
	done       func(Record, error)
	w          *sendWaiter
}

// slotBytes is the bookkeeping of a record, counted against BufferBytes.
const slotBytes = 96

// lingerEntry asks the timer goroutine to look at batch id of ps at at.
type lingerEntry struct {
	ps *partState
	id uint64
	at time.Time
}

// sendWaiter is how Send waits for its record.
type sendWaiter struct {
	ch  chan struct{} // buffered: one token per completion
	rec Record
	err error
}

// NewProducer returns a Producer that sends through c. It fails with an
// error wrapping ErrInvalidConfig for a configuration that cannot work,
// and with ErrIdempotenceUnsupported when cfg.Idempotent is set.
func NewProducer(c Client, cfg ProducerConfig) (*Producer, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: producer: nil client", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Producer{
		c:         c,
		cfg:       cfg,
		linger:    max(cfg.Linger, 0),
		topics:    map[string]*topicState{},
		kick:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		closeDone: make(chan struct{}),
	}
	p.anchorLocked(time.Now())
	p.waiters.New = func() any { return &sendWaiter{ch: make(chan struct{}, 1)} }
	p.wg.Add(1)
	go p.lingerLoop()
	return p, nil
}

// Send sends r and waits until it is acknowledged (as ProducerConfig.Acks
// says), then returns r with Partition, Offset and Timestamp set (a zero
// Timestamp becomes the time of the send, to the millisecond). With
// AcksNone it returns once r is queued, with Offset -1; a later failure
// goes to the Logger.
//
// Send waits up to Linger for its batch to fill, then for the broker.
// Cancelling ctx ends the wait, not the send: the record may still be
// written. Errors are those of SendAsync.
func (p *Producer) Send(ctx context.Context, r Record) (Record, error) {
	if p.cfg.Acks == AcksNone {
		err := p.enqueue(ctx, &r, nil, nil)
		return r, err
	}
	w := p.waiters.Get().(*sendWaiter)
	if err := p.enqueue(ctx, &r, nil, w); err != nil {
		p.waiters.Put(w)
		return r, err
	}
	select {
	case <-w.ch:
		out, err := w.rec, w.err
		w.rec, w.err = Record{}, nil
		p.waiters.Put(w)
		return out, err
	case <-ctx.Done():
		// The sender still holds w: leave it to the garbage collector.
		return r, ctx.Err()
	}
}

// SendAsync sends r and calls done(r, err) once r is acknowledged or has
// failed, with Partition, Offset and Timestamp set as Send returns them
// (Offset -1 on failure and with AcksNone). Key, Value and Headers are
// copied into the batch before SendAsync returns; the Record given to done
// holds the caller's slices.
//
// done is called exactly once per record: for the records of one partition
// in offset order, on a goroutine of the Producer, so it must be quick and
// must not call Flush or Close. A record refused before it is queued
// (ErrClosed, ErrUnknownTopic, ErrUnknownPartition, a record larger than
// BufferBytes, no room in the buffer within Timeout) gets its done call
// before SendAsync returns, on the caller's goroutine. A nil done is
// allowed: fire and forget, errors go to the Logger.
//
// SendAsync blocks while the producer's buffer is full (BufferBytes), up to
// Timeout. Records of one partition sent by one goroutine are written in
// the order of the calls.
func (p *Producer) SendAsync(r Record, done func(Record, error)) {
	if err := p.enqueue(context.Background(), &r, done, nil); err != nil && done != nil {
		done(r, err)
	}
}

// Flush sends every batch now, without waiting for Linger, and waits until
// every record sent before the call has been acknowledged or has failed.
// It returns ctx's error if ctx ends first, and ErrClosed after Close; the
// records' own errors go to their Send or done.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errProducerClosed
	}
	return p.waitLocked(ctx, p.closeAllLocked())
}

// Close flushes (sends every batch and waits for every record sent so far),
// stops the Producer's goroutines and waits for them. Sends after Close fail
// with ErrClosed. Close is idempotent; it returns nil.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.closeDone
		return nil
	}
	p.closed = true
	targets := p.closeAllLocked()
	p.notifyLocked() // senders blocked on a full buffer: they see closed
	p.waitLocked(context.Background(), targets)
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	close(p.closeDone)
	return nil
}

// enqueue adds r to its partition's batch and sets its Partition and
// Timestamp, and Offset to -1. At most one of done and w is set.
func (p *Producer) enqueue(ctx context.Context, r *Record, done func(Record, error), w *sendWaiter) error {
	r.Offset = -1
	size := recordMemory(r)

	p.mu.Lock()
	var ms int64
	if r.Timestamp.IsZero() {
		ms = p.nowMsLocked()
	} else {
		ms = r.Timestamp.UnixMilli()
	}
	if ms != p.lastMs || p.lastTime.IsZero() {
		p.lastMs, p.lastTime = ms, time.UnixMilli(ms)
	}
	r.Timestamp = p.lastTime
	t, err := p.topicLocked(r.Topic)
	if err == nil {
		err = p.admitLocked(ctx, size)
	}
	if err == nil && p.closed {
		err = errProducerClosed
	}
	var part int
	if err == nil {
		part, err = p.partitionLocked(t, r)
	}
	if err != nil {
		p.mu.Unlock()
		return err
	}
	ps := t.parts[part]
	if b := ps.open; b != nil && !p.fits(b, ms, r) {
		b.finish()
		p.closeOpenLocked(ps, true)
		if p.cfg.Partitioner == PartitionerDefault && r.Key == nil && t.sticky != part {
			// The sticky partition moved on with the batch: follow it
			// (Kafka's abortOnNewBatch).
			part = t.sticky
			ps = t.parts[part]
			if b := ps.open; b != nil && !p.fits(b, ms, r) {
				b.finish()
				p.closeOpenLocked(ps, false)
			}
		}
	}
	r.Partition = part
	b := ps.open
	if b == nil {
		b = p.openLocked(ps, ms)
	}
	b.bd.Append(ms, r.Key, r.Value, r.Headers)
	b.slots = append(b.slots, slot{key: r.Key, value: r.Value, headers: r.Headers, ts: ms, done: done, w: w})
	b.bytes += size
	p.buffered += size
	switch {
	case b.bd.Size() >= p.cfg.BatchBytes:
		// Full: encode the header and CRC here, on the sending goroutine,
		// which has time to spare, rather than on the partition's sender.
		b.finish()
		p.closeOpenLocked(ps, true)
	case p.linger == 0 && !ps.running:
		p.startSenderLocked(ps)
	}
	p.mu.Unlock()
	return nil
}

// nowMsLocked is the wall clock in ms. It reads only the monotonic clock
// (one clock read instead of time.Now's two) and adds it to the wall time
// of an anchor taken with time.Now at most clockRefresh ago, so a step of
// the wall clock shows within clockRefresh.
func (p *Producer) nowMsLocked() int64 {
	if d := time.Since(p.clock); d < clockRefresh {
		return (p.clockNs + int64(d)) / int64(time.Millisecond)
	}
	return p.anchorLocked(time.Now()).UnixMilli()
}

// clockRefresh bounds the age of the anchor of nowMsLocked.
const clockRefresh = 100 * time.Millisecond

// anchorLocked makes now the anchor of nowMsLocked and returns it.
func (p *Producer) anchorLocked(now time.Time) time.Time {
	p.clock, p.clockNs = now, now.UnixNano()
	return now
}

// fits reports whether the record fits in b within BatchBytes.
func (p *Producer) fits(b *pbatch, ms int64, r *Record) bool {
	return b.bd.Size()+b.bd.RecordSize(ms, r.Key, r.Value, r.Headers) <= p.cfg.BatchBytes
}

// recordMemory estimates the memory a queued record holds: its encoded size
// (with the largest varints) and its slot.
func recordMemory(r *Record) int {
	n := len(r.Key) + len(r.Value) + 21 + slotBytes
	for i := range r.Headers {
		n += len(r.Headers[i].Key) + len(r.Headers[i].Value) + 10
	}
	return n
}

// topicLocked returns the state of topic, reading its partition count from
// the Client (without holding mu) when it is not known or stale.
func (p *Producer) topicLocked(name string) (*topicState, error) {
	if t := p.last; t != nil && t.name == name && !t.stale {
		return t, nil
	}
	if t := p.topics[name]; t != nil && !t.stale {
		p.last = t
		return t, nil
	}
	if p.closed {
		return nil, errProducerClosed
	}
	p.mu.Unlock()
	n, err := p.c.Partitions(name)
	p.mu.Lock()
	switch {
	case p.closed:
		return nil, errProducerClosed
	case err != nil:
		return nil, fmt.Errorf("log: produce to %s: %w", name, err)
	case n < 1:
		return nil, fmt.Errorf("%w: produce to %s: the topic has %d partitions", ErrUnknownPartition, name, n)
	}
	t := p.topics[name]
	if t == nil {
		t = &topicState{name: name, sticky: -1}
		p.topics[name] = t
	}
	for i := len(t.parts); i < n; i++ {
		t.parts = append(t.parts, &partState{topic: t, tp: TopicPartition{Topic: name, Partition: i}})
	}
	t.n, t.stale = n, false
	if t.sticky >= n {
		t.sticky = -1
	}
	p.last = t
	return t, nil
}

// admitLocked waits until the buffer has room for size more bytes, up to
// Timeout.
func (p *Producer) admitLocked(ctx context.Context, size int) error {
	if size > p.cfg.BufferBytes {
		return fmt.Errorf("%w: a record of about %d bytes does not fit in the producer's BufferBytes %d", ErrRecordTooLarge, size, p.cfg.BufferBytes)
	}
	var timer *time.Timer
	for p.buffered+size > p.cfg.BufferBytes {
		if p.closed {
			return errProducerClosed
		}
		if timer == nil {
			timer = time.NewTimer(p.cfg.Timeout)
			defer timer.Stop()
		}
		ch := p.watchLocked()
		p.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-timer.C:
			err = fmt.Errorf("%w: no room in the producer's buffer (BufferBytes %d) within %v: %w", ErrTimeout, p.cfg.BufferBytes, p.cfg.Timeout, context.DeadlineExceeded)
		case <-ctx.Done():
			err = ctx.Err()
		}
		p.mu.Lock()
		if err != nil {
			return err
		}
	}
	return nil
}

// openLocked starts a batch for ps.
func (p *Producer) openLocked(ps *partState, ms int64) *pbatch {
	var b *pbatch
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	} else {
		b = new(pbatch)
	}
	now := p.anchorLocked(time.Now())
	b.bd.Reset(ms)
	p.nextID++
	b.id = p.nextID
	b.created = now
	b.deadline = now.Add(p.cfg.Timeout)
	ps.open = b
	if p.linger > 0 {
		if p.lingHead == len(p.lingers) {
			p.lingers, p.lingHead = p.lingers[:0], 0
		} else if p.lingHead > len(p.lingers)/2 {
			n := copy(p.lingers, p.lingers[p.lingHead:])
			clear(p.lingers[n:])
			p.lingers, p.lingHead = p.lingers[:n], 0
		}
		p.lingers = append(p.lingers, lingerEntry{ps: ps, id: b.id, at: now.Add(p.linger)})
		if !p.armed {
			p.armed = true
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}
	}
	return b
}

// closeOpenLocked closes ps's open batch for appends and queues it for its
// sender. When ps holds the topic's sticky partition and switchSticky is
// set, nil-key records move to another partition.
func (p *Producer) closeOpenLocked(ps *partState, switchSticky bool) {
	b := ps.open
	if b == nil {
		return
	}
	ps.open = nil
	ps.closedSeq++
	b.seq = ps.closedSeq
	if ps.tail == nil {
		ps.head = b
	} else {
		ps.tail.next = b
	}
	ps.tail = b
	if t := ps.topic; switchSticky && t.sticky == ps.tp.Partition {
		t.sticky = nextSticky(t.sticky, t.n)
	}
	if !ps.running {
		p.startSenderLocked(ps)
	}
}

// closeAllLocked closes every open batch and returns, for each partition
// with batches not yet completed, the sequence number of its last one.
func (p *Producer) closeAllLocked() []flushTarget {
	var targets []flushTarget
	for _, t := range p.topics {
		for _, ps := range t.parts {
			p.closeOpenLocked(ps, true)
			if ps.doneSeq < ps.closedSeq {
				targets = append(targets, flushTarget{ps, ps.closedSeq})
			}
		}
	}
	return targets
}

type flushTarget struct {
	ps  *partState
	seq uint64
}

// waitLocked waits until every target batch has completed, or ctx ends.
func (p *Producer) waitLocked(ctx context.Context, targets []flushTarget) error {
	for {
		pending := false
		for _, tg := range targets {
			if tg.ps.doneSeq < tg.seq {
				pending = true
				break
			}
		}
		if !pending {
			return nil
		}
		ch := p.watchLocked()
		p.mu.Unlock()
		select {
		case <-ch:
			p.mu.Lock()
		case <-ctx.Done():
			p.mu.Lock()
			return ctx.Err()
		}
	}
}

// watchLocked returns a channel that is closed when the next batch
// completes (or Close begins).
func (p *Producer) watchLocked() <-chan struct{} {
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

// notifyLocked wakes everyone waiting on watchLocked's channel.
func (p *Producer) notifyLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

func (p *Producer) startSenderLocked(ps *partState) {
	ps.running = true
	p.wg.Add(1)
	go p.sendLoop(ps)
}

// sendLoop sends ps's batches in order, one at a time, until none is ready:
// the closed ones, then the open one once it has lingered.
func (p *Producer) sendLoop(ps *partState) {
	defer p.wg.Done()
	p.mu.Lock()
	for {
		b := ps.head
		if b == nil && ps.open != nil && (p.linger == 0 || time.Since(ps.open.created) >= p.linger) {
			p.closeOpenLocked(ps, true)
			b = ps.head
		}
		if b == nil {
			ps.running = false
			p.mu.Unlock()
			return
		}
		ps.head = b.next
		if ps.head == nil {
			ps.tail = nil
		}
		b.next = nil
		p.mu.Unlock()

		p.send(ps, b)
		clear(b.slots)
		b.slots, b.raw = b.slots[:0], nil

		p.mu.Lock()
		ps.doneSeq = b.seq
		p.buffered -= b.bytes
		b.bytes = 0
		if b.bd.Size() <= 2*p.cfg.BatchBytes {
			p.free = append(p.free, b)
		}
		p.notifyLocked()
	}
}

// send produces b and completes its records.
func (p *Producer) send(ps *partState, b *pbatch) {
	raw := b.raw
	if raw == nil {
		raw = b.bd.Bytes()
	}
	base, err := p.produce(ps.tp, raw, b.deadline)
	if errors.Is(err, ErrRecordTooLarge) && len(b.slots) > 1 {
		p.sendSplit(ps, b, raw)
		return
	}
	p.complete(ps, b.slots, base, err)
}

// produce sends one encoded batch, bounded by deadline.
func (p *Producer) produce(tp TopicPartition, raw []byte, deadline time.Time) (int64, error) {
	if !time.Now().Before(deadline) {
		return -1, p.timeoutErr(tp, context.DeadlineExceeded)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	base, err := p.c.Produce(ctx, tp, raw, p.cfg.Acks)
	cancel()
	switch {
	case err == nil:
		return base, nil
	case errors.Is(err, context.DeadlineExceeded):
		return -1, p.timeoutErr(tp, err)
	}
	return -1, fmt.Errorf("log: produce to %s-%d: %w", tp.Topic, tp.Partition, err)
}

func (p *Producer) timeoutErr(tp TopicPartition, err error) error {
	return fmt.Errorf("%w: %s-%d: not acknowledged within %v: %w", ErrTimeout, tp.Topic, tp.Partition, p.cfg.Timeout, err)
}

// sendSplit produces a batch the broker found too large in halves, and
// halves of those, until a batch goes through or holds one record: only
// the records too large by themselves fail (Kafka's producer splits such
// batches too).
func (p *Producer) sendSplit(ps *partState, b *pbatch, raw []byte) {
	var recs []batch.Record
	_, err := batch.Decode(raw, func(r *batch.Record) error {
		rr := *r
		rr.Headers = append([]Header(nil), r.Headers...)
		recs = append(recs, rr)
		return nil
	})
	if err == nil && len(recs) != len(b.slots) {
		err = fmt.Errorf("%w: re-reading a batch to split it: %d records, want %d", ErrCorrupt, len(recs), len(b.slots))
	}
	if err != nil {
		p.complete(ps, b.slots, -1, fmt.Errorf("log: produce to %s: %w", ps.tp.Topic, err))
		return
	}
	var bd batch.Builder
	var split func(lo, hi int)
	split = func(lo, hi int) {
		bd.Reset(recs[lo].Timestamp)
		for _, r := range recs[lo:hi] {
			bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
		}
		base, err := p.produce(ps.tp, bd.Bytes(), b.deadline)
		if errors.Is(err, ErrRecordTooLarge) && hi-lo > 1 {
			mid := lo + (hi-lo)/2
			split(lo, mid)
			split(mid, hi)
			return
		}
		p.complete(ps, b.slots[lo:hi], base, err)
	}
	split(0, len(recs))
}

// complete calls the records' callbacks, in offset order.
func (p *Producer) complete(ps *partState, slots []slot, base int64, err error) {
	if err != nil {
		if errors.Is(err, ErrUnknownTopic) || errors.Is(err, ErrUnknownPartition) {
			p.mu.Lock()
			ps.topic.stale = true
			p.mu.Unlock()
		}
		for i := range slots {
			if slots[i].done == nil && slots[i].w == nil {
				p.cfg.Logger.Warn("producer: records lost", "topic", ps.tp.Topic, "partition", ps.tp.Partition, "records", len(slots), "err", err)
				break
			}
		}
	}
	var lastMs int64
	var lastTime time.Time
	for i := range slots {
		s := &slots[i]
		if s.ts != lastMs || lastTime.IsZero() {
			lastMs, lastTime = s.ts, time.UnixMilli(s.ts)
		}
		rec := Record{
			Topic:     ps.tp.Topic,
			Partition: ps.tp.Partition,
			Offset:    -1,
			Timestamp: lastTime,
			Key:       s.key,
			Value:     s.value,
			Headers:   s.headers,
		}
		if err == nil && p.cfg.Acks != AcksNone {
			rec.Offset = base + int64(i)
		}
		switch {
		case s.w != nil:
			s.w.rec, s.w.err = rec, err
			s.w.ch <- struct{}{}
		case s.done != nil:
			s.done(rec, err)
		}
	}
}

// lingerLoop is the timer goroutine: when an open batch has lingered, it
// starts its partition's sender (a running sender takes the batch itself
// when it is done with the one in flight).
func (p *Producer) lingerLoop() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		p.mu.Lock()
		now := time.Now()
		wait := time.Duration(-1)
		for p.lingHead < len(p.lingers) {
			e := &p.lingers[p.lingHead]
			if d := e.at.Sub(now); d > 0 {
				wait = d
				break
			}
			if ps := e.ps; ps.open != nil && ps.open.id == e.id && !ps.running {
				p.startSenderLocked(ps)
			}
			*e = lingerEntry{}
			p.lingHead++
		}
		p.armed = wait >= 0
		p.mu.Unlock()
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-p.kick:
			timer.Stop()
		case <-p.stop:
			timer.Stop()
			return
		}
	}
}
