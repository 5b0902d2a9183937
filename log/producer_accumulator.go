package log

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// The accumulator: records join their partition's open batch; batches close
// when full, when lingered or when flushed, under the Producer's mu.

// enqueue adds r to its partition's batch and sets its Partition and
// Timestamp, and Offset to -1. At most one of done and w is set.
func (p *Producer) enqueue(ctx context.Context, r *Record, done func(Record, error), w *sendWaiter) error {
	r.Offset = -1
	size := recordMemory(r)

	if p.behind.Load() > 0 {
		// Let a goroutine of the Producer waiting for mu have it first
		// (lockBehind).
		runtime.Gosched()
	}
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
	t, err := p.topicLocked(ctx, r.Topic)
	if err == nil {
		err = p.admitLocked(ctx, size)
	}
	if err == nil && p.closed {
		err = errProducerClosed
	}
	if err == nil && p.fatal != nil {
		err = p.fatal
	}
	if err == nil && p.txn != nil {
		err = p.txn.sendableLocked()
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
		p.closeOpenLocked(ps, true)
		p.finishFullLocked(b)
		if p.cfg.Partitioner == PartitionerDefault && r.Key == nil && t.sticky != part {
			// The sticky partition moved on with the batch: follow it
			// (Kafka's abortOnNewBatch).
			part = t.sticky
			ps = t.parts[part]
			if b := ps.open; b != nil && !p.fits(b, ms, r) {
				p.closeOpenLocked(ps, false)
				p.finishFullLocked(b)
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
	if w == nil {
		b.async++
	}
	switch {
	case b.bd.Size() >= p.cfg.BatchBytes:
		p.closeOpenLocked(ps, true)
		p.finishFullLocked(b)
	case (p.linger == 0 || b.async == 0 || p.txnEagerLocked(b)) && ps.unresolved == 0:
		// Nothing to wait for (no linger, or only blocked Sends, which
		// cannot add records, or a transaction's batch large enough):
		// a sender takes the batch now.
		p.kickLocked(ps)
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
// the Client (without holding mu) when it is not known or stale, waiting
// for the topic's metadata (partitionsWait).
func (p *Producer) topicLocked(ctx context.Context, name string) (*topicState, error) {
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
	n, err := p.partitionsWait(ctx, name)
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

// partitionsWait returns the partition count of topic. While the Client
// does not know the topic (created a moment ago through another member, or
// not yet) or cannot reach the cluster, it asks again, backing off from
// RetryBackoff to 1 s, for up to Timeout (Kafka's producer waits up to
// max.block.ms for a topic's metadata) or until ctx ends or the Producer
// closes. Past Timeout the error matches ErrTimeout,
// context.DeadlineExceeded and the Client's last error (ErrUnknownTopic).
func (p *Producer) partitionsWait(ctx context.Context, name string) (int, error) {
	n, err := p.c.Partitions(ctx, name)
	if err == nil || !metadataPending(err) {
		return n, err
	}
	start := time.Now()
	deadline := start.Add(p.cfg.Timeout)
	backoff := p.cfg.RetryBackoff
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fmt.Errorf("%w: topic %s not in the metadata after %v (%w): %w", ErrTimeout, name, p.cfg.Timeout, context.DeadlineExceeded, err)
		}
		t.Reset(min(backoff, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, fmt.Errorf("%w while waiting for the metadata of topic %s; last error: %w", ctx.Err(), name, err)
		case <-p.stop:
			return 0, errProducerClosed
		}
		backoff = min(2*backoff, maxRetryBackoff)
		if n, err = p.c.Partitions(ctx, name); err == nil || !metadataPending(err) {
			return n, err
		}
	}
}

// metadataPending reports whether a Client's answer to Partitions may
// change without anyone's doing but time: the topic is not known yet, or
// the cluster cannot be reached.
func metadataPending(err error) bool {
	return errors.Is(err, ErrUnknownTopic) || transient(err)
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

// spanMinRecord is the smallest mean record size, in its partition's last
// batch, for which a Producer of an in-process broker records the spans of
// a batch's records (batch.Span), so that a Consumer reading the
// partition's tail takes the records from them instead of parsing them. A
// parse of records of a KiB is a cache miss for each; smaller records are
// read as a stream, where a span of 16 bytes per record, written and kept
// in the tail, would cost more than it saves: SendAsync of 10-byte records
// was 6-8% slower with spans (BenchmarkProducerSendAsync).
const spanMinRecord = 256

// openLocked starts a batch for ps.
func (p *Producer) openLocked(ps *partState, ms int64) *pbatch {
	b := p.newBatchLocked()
	now := p.anchorLocked(time.Now())
	// The spans of the records, for the tail's readers (tail.go), if the
	// partition's records are large enough to be worth them.
	b.bd.SetSpans(p.broker != nil && ps.lastSize >= spanMinRecord*ps.lastCount)
	b.bd.Reset(ms)
	// Size a new buffer, and the slots, for what the partition's last batch
	// held, so that Append does not regrow them record by record. A
	// partition that fills its batches gets room for a full one, BatchBytes,
	// not the last one's size: batches close a record short of BatchBytes,
	// at sizes that vary by up to a record, and a reused buffer sized for a
	// smaller one was regrown, a new 1 MB allocation (zeroed) for nearly
	// every batch. A partition that trickles keeps small buffers.
	want := min(ps.lastSize, p.cfg.BatchBytes)
	if want >= p.cfg.BatchBytes/2 {
		want = p.cfg.BatchBytes
	}
	b.bd.Grow(want)
	b.slots = slices.Grow(b.slots, ps.lastCount)
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
// senders, with its sequence number if the producer is idempotent and can
// give it one now. When ps holds the topic's sticky partition and
// switchSticky is set, nil-key records move to another partition.
func (p *Producer) closeOpenLocked(ps *partState, switchSticky bool) {
	b := ps.open
	if b == nil {
		return
	}
	ps.open = nil
	ps.lastSize, ps.lastCount = b.bd.Size(), len(b.slots)
	ps.closedSeq++
	b.seq = ps.closedSeq
	if p.cfg.Idempotent {
		if ps.unassigned == 0 && p.canAssignLocked(ps) {
			p.assignLocked(ps, b, ps.unresolved)
		} else {
			ps.unassigned++
		}
	}
	waits := ps.unresolved > 0 // a sender will not take b at once
	ps.unresolved++
	if ps.tail == nil {
		ps.head = b
	} else {
		ps.tail.next = b
	}
	ps.tail = b
	if t := ps.topic; switchSticky && t.sticky == ps.tp.Partition {
		t.sticky = nextSticky(t.sticky, t.n)
	}
	if waits && p.encodeAhead(b) {
		p.queueEncodeLocked(ps, b)
		return
	}
	p.kickLocked(ps)
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
