package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/segment/batch"
)

// The senders: one goroutine per partition with batches to send, and the
// linger timer that starts them.

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
	res, err := p.c.ProduceBatch(ctx, tp, raw, p.cfg.Acks)
	cancel()
	switch {
	case err == nil:
		return res.BaseOffset, nil
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
	bd.SetCompression(int(p.cfg.Compression))
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
