package log

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"syscall"
	"time"

	"github.com/strata-log/strata/segment/batch"
)

// The senders: for each partition with batches to send, up to MaxInFlight
// worker goroutines. Under the Producer's mu a worker takes the partition's
// next batch in order (nextLocked), sends it without the lock, and records
// the answer (answerLocked): an outcome, or a retry. Batches complete (their
// callbacks run) in order, whatever order their answers come in.
//
// Ordering with several batches in flight, as Kafka's idempotent producer:
// batches are sent in order, but concurrent ProduceBatch calls may reach the
// broker in any order, and a retried batch goes again after later ones. The
// broker appends a batch only if its sequence follows the last one appended
// (else ErrOutOfOrderSequence) and answers a batch it already has with its
// first offsets, so the log keeps the send order and each batch once. A
// batch refused out of order while a batch before it had no answer is sent
// again once every batch before it has one; refused when it was the oldest,
// the broker has lost the producer's state for the partition (or a batch
// before it failed), and the partition moves to a new epoch (KIP-360),
// renumbering its unresolved batches from 0.

// kickLocked makes sure a worker will look at ps: it starts one unless a
// worker is between sends (it looks before it exits), MaxInFlight are
// sending, or nothing could be sent.
func (p *Producer) kickLocked(ps *partState) {
	if p.holdKicks || ps.workers > ps.sending || ps.workers >= p.cfg.MaxInFlight {
		return
	}
	if ps.unresolved <= ps.sending && ps.open == nil {
		return
	}
	ps.workers++
	p.wg.Add(1)
	go p.work(ps)
}

// yieldBatch is the size from which a sender yields its P before it
// produces a batch (work). Below it the write is short and the yield only
// delays the batch: with 16 KiB batches it cost a quarter of the
// throughput (bench: produce+consume 1 KiB, BatchBytes 16 KiB).
const yieldBatch = 256 << 10

// work is a worker of ps: it sends ps's batches until none can be sent.
func (p *Producer) work(ps *partState) {
	defer p.wg.Done()
	p.lockBehind()
	p.sendLocked(ps, 0)
	p.mu.Unlock()
}

// sendAllLocked closes every open batch for Flush and CommitTransaction,
// which then wait for them (closeAllLocked's targets). On an in-process
// Broker the caller sends the first partition's batches itself
// (sendInlineLocked), and workers start for the others: it would only
// wait meanwhile, and a worker started now may wait for a P longer than
// its appends take. Over any other Client a send may wait on the network,
// and the caller's ctx must be able to end its wait: workers send.
func (p *Producer) sendAllLocked() []flushTarget {
	if p.broker == nil {
		return p.closeAllLocked()
	}
	p.holdKicks = true
	targets := p.closeAllLocked()
	p.holdKicks = false
	for _, tg := range targets[min(1, len(targets)):] {
		p.kickLocked(tg.ps)
	}
	if len(targets) > 0 {
		p.sendInlineLocked(targets[0])
	}
	return targets
}

// sendInlineLocked makes the caller a worker of ps, sending in its own
// goroutine until nothing can be sent, unless MaxInFlight workers are at
// it already. A worker a send started may not have run yet: on the
// reference machine a goroutine readied by one that keeps its P waits
// 170 µs (median) for the other P to wake, longer than a transaction of
// 1,000 records takes to send, so the caller does not wait for it.
// It sends only the batches up to tg's (closed by the caller): records
// other goroutines send meanwhile are left to workers.
func (p *Producer) sendInlineLocked(tg flushTarget) {
	ps := tg.ps
	if ps.workers >= p.cfg.MaxInFlight || ps.unresolved <= ps.sending && ps.open == nil {
		p.kickLocked(ps)
		return
	}
	ps.workers++
	p.sendLocked(ps, tg.seq)
}

// unsentLocked reports whether a batch of ps up to seq upTo is neither
// resolved nor being sent.
func unsentLocked(ps *partState, upTo uint64) bool {
	for b := ps.head; b != nil && b.seq <= upTo; b = b.next {
		if !b.resolved && !b.inAttempt {
			return true
		}
	}
	return false
}

// sendLocked is a worker's loop (counted in ps.workers, which it
// decrements when it returns, mu held). upTo > 0: the loop of
// sendInlineLocked, in the caller's goroutine, which sends the batches up
// to seq upTo and leaves the rest, and a retry's backoff, to a worker it
// starts.
func (p *Producer) sendLocked(ps *partState, upTo uint64) {
	inline := upTo > 0
	for {
		p.completeLocked(ps)
		if ps.rewrite && ps.sending == 0 && !p.rewriteLocked(ps) {
			// The epoch is exhausted: a new producer id first.
			ps.sending++
			err := p.ensurePIDLocked(firstUnresolved(ps).deadline)
			ps.sending--
			if err == nil && p.pid == ps.pid {
				p.pidState = pidNone
				err = fmt.Errorf("log: producer: InitProducerID gave producer %d epoch %d again, whose epoch is exhausted", p.pid.ID, p.pid.Epoch)
			}
			if err != nil {
				p.failUnresolvedLocked(ps, err)
			}
			continue
		}
		if inline && !unsentLocked(ps, upTo) {
			ps.workers--
			p.kickLocked(ps) // what was sent meanwhile
			return
		}
		unresolved := ps.unresolved
		b, wake := p.nextLocked(ps)
		if b == nil && ps.unresolved < unresolved {
			continue // it failed expired batches: complete them, look again
		}
		if b == nil {
			if wake.IsZero() || ps.timerWait {
				ps.workers--
				return
			}
			if inline {
				ps.workers--
				p.kickLocked(ps) // a worker waits for the retry
				return
			}
			ps.timerWait = true
			p.mu.Unlock()
			t := time.NewTimer(time.Until(wake))
			<-t.C
			p.lockBehind()
			ps.timerWait = false
			continue
		}
		if p.cfg.Idempotent && !b.seqSet {
			err := p.ensurePIDLocked(b.deadline)
			if err == nil {
				p.assignPendingLocked(ps)
			}
			if !b.seqSet {
				b.inAttempt = false
				ps.sending--
				switch {
				case err == nil:
					// The partition must move to a new epoch first.
				case p.retriable(err) && time.Now().Add(p.cfg.RetryBackoff).Before(b.deadline):
					b.lastErr, b.retryAt = err, time.Now().Add(p.cfg.RetryBackoff)
				default:
					p.resolveLocked(ps, b, -1, err)
				}
				continue
			}
		}
		if p.txn != nil {
			// Its partition joins the transaction before its first batch.
			if err := p.addToTxnLocked(ps, b.pid, b.deadline); err != nil {
				b.inAttempt = false
				ps.sending--
				p.resolveLocked(ps, b, -1, err)
				continue
			}
		}
		retry := b.attempts > 0
		b.attempts++
		p.kickLocked(ps) // another worker for the next batch, if it may go
		p.mu.Unlock()
		if len(b.raw) >= yieldBatch || b.raw == nil && b.bd.Size() >= yieldBatch {
			// A large batch's produce keeps this P in a write(2) for
			// hundreds of µs, and the caller that yielded it for this
			// goroutine (enqueue, lockBehind) would wait behind it for
			// another P: let the caller have it back first.
			runtime.Gosched()
		}

		if b.raw == nil {
			b.finish()
		}
		if retry {
			// The same bytes again: only the fields the broker may have
			// set, outside the CRC, go back to what the producer sent.
			b.own()
			batch.SetBaseOffset(b.raw, 0)
			batch.SetPartitionLeaderEpoch(b.raw, -1)
		}
		var spans []batch.Span
		if p.broker != nil && len(b.raw) >= tailMinBatch {
			// The broker may keep the bytes for its readers (tail.go),
			// with where their records are.
			b.given, b.detach = true, true
			spans = b.bd.Spans()
		}
		res, err, expired := p.produce(ps.tp, b.raw, spans, b.deadline, b.given)
		var recs []batch.Record
		if errors.Is(err, ErrRecordTooLarge) && len(b.slots) > 1 {
			var derr error
			if recs, derr = decodeForSplit(b.raw, len(b.slots), err); derr != nil {
				err = derr
			}
		}

		p.lockBehind()
		b.inAttempt = false
		ps.sending--
		p.answerLocked(ps, b, res, err, expired, recs)
	}
}

// nextLocked returns the next batch of ps to send, marked in attempt, or
// nil and when to look again (zero: when something changes). On the way it
// fails the batches whose Timeout has passed and closes the open batch if
// it is due.
func (p *Producer) nextLocked(ps *partState) (*pbatch, time.Time) {
	if ps.rewrite {
		return nil, time.Time{} // the last answer in flight starts the rewrite
	}
	now := time.Now()
	inFlight, unresolved := 0, 0 // batches before b: sent and not completed; without an outcome
	opening := false             // the first batch of an epoch (sequence 0) is in flight
	for b := ps.head; b != nil; b, inFlight = b.next, inFlight+1 {
		switch {
		case b.resolved:
			continue
		case b.inAttempt:
			unresolved++
			opening = opening || !b.seqSet || b.baseSeq == 0 // no sequence yet: waiting for one
			continue
		case opening:
			// An epoch's first batch goes alone: a member forwarding
			// them starts its order for the producer at the first batch
			// it sees (replica's order lanes), and the others, racing
			// it there, were refused out of order and sent again.
			return nil, time.Time{}
		case b.encoding:
			// An encoder is finishing it, and kicks a sender once done;
			// it is not failed meanwhile either (its memory is in use).
			return nil, time.Time{}
		case !now.Before(b.deadline):
			p.resolveLocked(ps, b, -1, p.timeoutErr(ps.tp, b.lastErr))
			continue
		case p.fatal != nil:
			p.resolveLocked(ps, b, -1, p.fatal)
			continue
		case b.attempts == 0 && inFlight >= p.cfg.MaxInFlight:
			return nil, time.Time{}
		case b.waitPred && unresolved > 0:
			return nil, time.Time{}
		case now.Before(b.retryAt):
			if b.deadline.Before(b.retryAt) {
				return nil, b.deadline
			}
			return nil, b.retryAt
		}
		b.waitPred, b.predPending = false, unresolved > 0
		b.inAttempt = true
		ps.sending++
		return b, time.Time{}
	}
	o := ps.open
	if o == nil || inFlight >= p.cfg.MaxInFlight || opening {
		return nil, time.Time{}
	}
	eager := unresolved == 0 && (p.linger == 0 || o.async == 0 || p.txnEagerLocked(o))
	if !eager && !(p.linger > 0 && !now.Before(o.created.Add(p.linger))) {
		return nil, time.Time{}
	}
	p.closeOpenLocked(ps, true)
	if o.encoding {
		return nil, time.Time{} // its encoder kicks a sender once done
	}
	o.predPending = unresolved > 0
	o.inAttempt = true
	ps.sending++
	return o, time.Time{}
}

// produce sends one encoded batch, with the spans of its records if given
// to an in-process broker, bounded by deadline; expired says the deadline
// ended the call.
func (p *Producer) produce(tp TopicPartition, raw []byte, spans []batch.Span, deadline time.Time, given bool) (res ProduceResult, err error, expired bool) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	if p.broker != nil {
		// An in-process broker: raw is the Builder's, valid by
		// construction, and is not validated again (partition_trusted.go).
		res, err = p.broker.ProduceBuilt(ctx, tp, BuiltBatch{raw: raw, spans: spans, given: given}, p.cfg.Acks)
	} else {
		res, err = p.c.ProduceBatch(ctx, tp, raw, p.cfg.Acks)
	}
	expired = err != nil && ctx.Err() != nil
	cancel()
	return res, err, expired
}

// answerLocked records the answer to an attempt of b.
func (p *Producer) answerLocked(ps *partState, b *pbatch, res ProduceResult, err error, expired bool, recs []batch.Record) {
	if err == nil {
		p.resolveLocked(ps, b, res.BaseOffset, nil)
		return
	}
	b.lastErr = err
	wrapped := fmt.Errorf("log: produce to %s-%d: %w", ps.tp.Topic, ps.tp.Partition, err)
	switch {
	case expired:
		p.resolveLocked(ps, b, -1, p.timeoutErr(ps.tp, err))
	case recs != nil:
		p.splitLocked(ps, b, recs)
	case p.cfg.Idempotent && errors.Is(err, ErrProducerFenced):
		if p.fatal == nil {
			p.fatal = fmt.Errorf("log: producer %d epoch %d: %w", b.pid.ID, b.pid.Epoch, err)
			p.cfg.Logger.Error("producer fenced: every record not yet acknowledged fails", "producer", b.pid.ID, "epoch", b.pid.Epoch, "err", err)
		}
		p.resolveLocked(ps, b, -1, wrapped)
	case p.cfg.Idempotent && errors.Is(err, ErrOutOfOrderSequence):
		if b.predPending {
			// A batch before it may not have reached the broker yet.
			b.waitPred = true
		} else if p.txn != nil {
			// The coordinator owns a transactional producer's epoch: the
			// transaction fails, and its abort bumps the epoch.
			p.resolveLocked(ps, b, -1, wrapped)
		} else {
			ps.rewrite = true
		}
	case p.retriable(err):
		b.retryAt = time.Now().Add(p.cfg.RetryBackoff)
	default:
		p.resolveLocked(ps, b, -1, wrapped)
	}
}

// retriable reports whether a batch that failed with err may be sent again:
// the one place that says which errors are retried. An idempotent producer
// retries what may pass (the broker dedupes a batch that was written after
// all); the other producer only what says nothing was written.
func (p *Producer) retriable(err error) bool {
	if errors.Is(err, ErrNotEnoughReplicas) {
		return true // refused before the append (Kafka's NOT_ENOUGH_REPLICAS)
	}
	if !p.cfg.Idempotent {
		return false
	}
	return transient(err) ||
		errors.Is(err, context.DeadlineExceeded) || // the Client's own timeout: ours is handled apart
		errors.Is(err, ErrTimeout)
}

// maxRetryBackoff is Kafka's retry.backoff.max.ms: the longest wait
// between two retries of a backoff that doubles.
const maxRetryBackoff = time.Second

// transient reports whether err may go away by itself, as the cluster
// moves on: a leader moved or died, a connection was refused, reset or
// closed, a network operation timed out. A Client wraps the causes of its
// connection errors (net, syscall and io errors) so that they are seen
// here.
func transient(err error) bool {
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrUnreachable),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (p *Producer) timeoutErr(tp TopicPartition, last error) error {
	if last == nil || errors.Is(last, context.DeadlineExceeded) {
		if last == nil {
			last = context.DeadlineExceeded
		}
		return fmt.Errorf("%w: %s-%d: not acknowledged within %v: %w", ErrTimeout, tp.Topic, tp.Partition, p.cfg.Timeout, last)
	}
	return fmt.Errorf("%w: %s-%d: not acknowledged within %v (%w), last error: %w", ErrTimeout, tp.Topic, tp.Partition, p.cfg.Timeout, context.DeadlineExceeded, last)
}

// resolveLocked gives b its outcome. An idempotent batch that fails before
// it was ever sent leaves its sequence numbers to the batches after it, if
// none of them was sent either.
func (p *Producer) resolveLocked(ps *partState, b *pbatch, base int64, err error) {
	b.resolved, b.base, b.err = true, base, err
	ps.unresolved--
	if p.txn != nil {
		if err != nil {
			p.txn.failLocked(err)
		}
		if ps.unresolved == 0 {
			p.notifyLocked() // a commit waits for its batches' outcomes (waitResolvedLocked)
		}
	}
	if err != nil && b.seqSet && b.attempts == 0 {
		for n := b.next; n != nil; n = n.next {
			if n.attempts > 0 || n.inAttempt {
				return
			}
		}
		seq := b.baseSeq
		for n := b.next; n != nil && n.seqSet; n = n.next {
			if n.resolved {
				continue
			}
			p.setSeqLocked(n, ps.pid, seq)
			seq = incrementSequence(seq, int32(len(n.slots)))
		}
		ps.nextSeq = seq
	}
}

// firstUnresolved returns the oldest batch of ps without an outcome.
func firstUnresolved(ps *partState) *pbatch {
	b := ps.head
	for b.resolved {
		b = b.next
	}
	return b
}

// failUnresolvedLocked fails every batch of ps without an outcome and not
// in flight.
func (p *Producer) failUnresolvedLocked(ps *partState, err error) {
	for b := ps.head; b != nil; b = b.next {
		if !b.resolved && !b.inAttempt {
			p.resolveLocked(ps, b, -1, err)
		}
	}
	ps.rewrite = false
}

// completeLocked completes, in order, the batches at the head of ps that
// have their outcome: it calls their callbacks (without mu) and recycles
// them. One worker at a time does it, so callbacks stay in order.
func (p *Producer) completeLocked(ps *partState) {
	if ps.completing {
		return
	}
	ps.completing = true
	for b := ps.head; b != nil && b.resolved; b = ps.head {
		ps.head = b.next
		if ps.head == nil {
			ps.tail = nil
		}
		p.mu.Unlock()
		p.complete(ps, b.slots, b.base, b.err)
		clear(b.slots)
		p.lockBehind()
		ps.doneSeq = max(ps.doneSeq, b.seq)
		p.buffered -= b.bytes
		p.recycleLocked(b)
		p.notifyLocked()
	}
	ps.completing = false
}

// recycleLocked resets b and keeps it for reuse unless it grew too large.
func (p *Producer) recycleLocked(b *pbatch) {
	slots := b.slots[:0]
	bd := b.bd
	if b.detach {
		bd.Detach() // the broker may still hold the last batch's bytes
	}
	*b = pbatch{bd: bd, slots: slots}
	if b.bd.Size() <= 2*p.cfg.BatchBytes {
		p.free = append(p.free, b)
	}
}

// ensurePIDLocked gets the producer's id from the Client if it has none,
// or waits for the fetch under way. It releases mu while it waits.
func (p *Producer) ensurePIDLocked(deadline time.Time) error {
	for p.pidState != pidReady || p.txn != nil && p.txn.bump {
		if p.pidState == pidFetching {
			ch := p.pidWait
			p.mu.Unlock()
			<-ch
			p.mu.Lock()
			continue
		}
		current := ProducerID{ID: -1, Epoch: -1}
		if p.pidState == pidReady {
			current = p.pid // a transactional producer's epoch bump (KIP-360)
		}
		p.pidState, p.pidWait = pidFetching, make(chan struct{})
		p.mu.Unlock()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		var pid ProducerID
		var err error
		if p.txn != nil {
			pid, err = p.initTxnPID(ctx, current)
		} else {
			pid, err = p.c.InitProducerID(ctx)
		}
		cancel()
		p.mu.Lock()
		close(p.pidWait)
		p.pidState = pidNone
		if err == nil && (pid.ID < 0 || pid.Epoch < 0) {
			err = fmt.Errorf("%w: producer id %d epoch %d", ErrInvalidSequence, pid.ID, pid.Epoch)
		}
		if err != nil {
			return fmt.Errorf("log: producer: init producer id: %w", err)
		}
		p.pid, p.pidState = pid, pidReady
		if p.txn != nil {
			p.txn.bump = false
		}
	}
	return nil
}

// canAssignLocked reports whether ps's next batch can get its sequence now.
func (p *Producer) canAssignLocked(ps *partState) bool {
	return p.pidState == pidReady && !ps.rewrite && (p.txn == nil || !p.txn.bump)
}

// assignLocked gives b the next sequence of ps; before is the number of
// batches before b without an outcome. A partition with none first moves
// to the producer's current id and epoch, from sequence 0 (Kafka's
// maybeUpdateProducerIdAndEpoch): while it has batches of an older epoch
// unresolved, its new ones follow them in that epoch.
func (p *Producer) assignLocked(ps *partState, b *pbatch, before int) {
	if !ps.pidSet || (ps.pid != p.pid && before == 0) {
		ps.pid, ps.pidSet, ps.nextSeq = p.pid, true, 0
	}
	p.setSeqLocked(b, ps.pid, ps.nextSeq)
	ps.nextSeq = incrementSequence(ps.nextSeq, int32(len(b.slots)))
}

// assignPendingLocked gives the batches of ps without a sequence theirs,
// in order.
func (p *Producer) assignPendingLocked(ps *partState) {
	if ps.unassigned == 0 || !p.canAssignLocked(ps) {
		return
	}
	before := 0
	for b := ps.head; b != nil; b = b.next {
		if !b.seqSet && !b.resolved {
			p.assignLocked(ps, b, before)
		}
		if !b.resolved {
			before++
		}
	}
	ps.unassigned = 0
}

// setSeqLocked writes pid and seq into b, built or not.
func (p *Producer) setSeqLocked(b *pbatch, pid ProducerID, seq int32) {
	b.pid, b.baseSeq, b.seqSet = pid, seq, true
	if b.encoding {
		b.seqStale = true // the encoder writes it once done
		return
	}
	if b.raw != nil {
		b.own()
		batch.SetProducer(b.raw, pid.ID, pid.Epoch, seq)
	} else {
		b.bd.SetProducer(pid.ID, pid.Epoch, seq)
	}
}

// rewriteLocked moves ps to a new epoch: the producer's, bumped first if ps
// is on it (Kafka's bumpIdempotentProducerEpoch), and renumbers ps's
// unresolved batches from 0. Nothing of ps is in flight: none of those
// batches was appended (the oldest was refused, so were the others), and
// none can be later. It returns false when the epoch is exhausted and a new
// producer id is needed first.
func (p *Producer) rewriteLocked(ps *partState) bool {
	if p.pidState != pidReady {
		return false
	}
	if ps.pid == p.pid {
		if p.pid.Epoch == math.MaxInt16 {
			p.pidState = pidNone
			return false
		}
		p.pid.Epoch++
	}
	p.cfg.Logger.Info("producer: new epoch for a partition whose broker state did not match", "topic", ps.tp.Topic, "partition", ps.tp.Partition,
		"producer", p.pid.ID, "epoch", p.pid.Epoch)
	ps.pid, ps.pidSet = p.pid, true
	seq := int32(0)
	for b := ps.head; b != nil; b = b.next {
		if b.resolved || !b.seqSet {
			continue
		}
		p.setSeqLocked(b, ps.pid, seq)
		seq = incrementSequence(seq, int32(len(b.slots)))
		b.waitPred, b.retryAt = false, time.Time{}
	}
	ps.nextSeq, ps.rewrite = seq, false
	return true
}

// decodeForSplit reads the records of a batch the broker found too large,
// to send them in smaller batches. The keys, values and headers are
// copies: the batch's buffer is reused.
func decodeForSplit(raw []byte, want int, tooLarge error) ([]batch.Record, error) {
	var recs []batch.Record
	_, err := batch.Decode(raw, func(r *batch.Record) error {
		rr := *r
		rr.Key = append([]byte(nil), r.Key...)
		rr.Value = append([]byte(nil), r.Value...)
		if r.Key == nil {
			rr.Key = nil
		}
		if r.Value == nil {
			rr.Value = nil
		}
		rr.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			rr.Headers[i] = Header{Key: h.Key, Value: append([]byte(nil), h.Value...)}
			if h.Value == nil {
				rr.Headers[i].Value = nil
			}
		}
		recs = append(recs, rr)
		return nil
	})
	if err == nil && len(recs) != want {
		err = fmt.Errorf("%w: re-reading a batch to split it: %d records, want %d", ErrCorrupt, len(recs), want)
	}
	if err != nil {
		return nil, fmt.Errorf("log: split a batch refused as too large (%w): %w", tooLarge, err)
	}
	return recs, nil
}

// splitLocked replaces b, which the broker found too large, by two batches
// of half its records each, in its place (Kafka's producer splits such
// batches too): halves go on until a batch goes through or holds one
// record, so only the records too large by themselves fail. The halves
// keep b's sequence numbers.
func (p *Producer) splitLocked(ps *partState, b *pbatch, recs []batch.Record) {
	mid := len(recs) / 2
	halves := [2]*pbatch{}
	for i, r := range [2][2]int{{0, mid}, {mid, len(recs)}} {
		h := p.newBatchLocked()
		h.bd.Reset(recs[r[0]].Timestamp)
		for _, rec := range recs[r[0]:r[1]] {
			h.bd.Append(rec.Timestamp, rec.Key, rec.Value, rec.Headers)
		}
		h.slots = append(h.slots, b.slots[r[0]:r[1]]...)
		for _, s := range h.slots {
			if s.w == nil {
				h.async++
			}
		}
		h.id, h.created, h.deadline, h.lastErr = b.id, b.created, b.deadline, b.lastErr
		if b.seqSet {
			h.bd.SetProducer(b.pid.ID, b.pid.Epoch, incrementSequence(b.baseSeq, int32(r[0])))
			h.pid, h.baseSeq, h.seqSet = b.pid, incrementSequence(b.baseSeq, int32(r[0])), true
		}
		h.finish()
		halves[i] = h
	}
	// The first half completes the batch before b's: Flush waits for the
	// second, which holds b's place and memory.
	halves[0].seq, halves[1].seq, halves[1].bytes = 0, b.seq, b.bytes
	halves[0].next, halves[1].next = halves[1], b.next
	if ps.head == b {
		ps.head = halves[0]
	} else {
		for n := ps.head; ; n = n.next {
			if n.next == b {
				n.next = halves[0]
				break
			}
		}
	}
	if ps.tail == b {
		ps.tail = halves[1]
	}
	ps.unresolved++ // b's one becomes two
	clear(b.slots)
	b.bytes = 0
	p.recycleLocked(b)
}

// newBatchLocked returns an empty batch, reused if one is free.
func (p *Producer) newBatchLocked() *pbatch {
	var b *pbatch
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	} else {
		b = new(pbatch)
	}
	b.bd.SetCompression(int(p.cfg.Compression)) // compressed when finished
	b.txn = p.txn != nil
	return b
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
// wakes its partition's senders (a busy sender takes the batch itself when
// it is done with the one in flight). It waits only for batches still open:
// those that closed first (full, or flushed) are dropped whatever their
// deadline, so that a producer whose batches fill before their linger ends
// wakes it about once a linger, not once a batch, each waking a goroutine
// that then wanted the mu the sending caller holds.
func (p *Producer) lingerLoop() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		p.lockBehind()
		p.lingRuns++
		now := time.Now()
		wait := time.Duration(-1)
		for p.lingHead < len(p.lingers) {
			e := &p.lingers[p.lingHead]
			live := e.ps.open != nil && e.ps.open.id == e.id
			if d := e.at.Sub(now); live && d > 0 {
				wait = d
				break
			}
			if live {
				p.kickLocked(e.ps)
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
