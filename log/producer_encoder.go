package log

import "github.com/strata-log/strata/segment/batch"

// The encoders: a batch closed while others of its partition are still
// unresolved is not taken by a sender at once, so it is finished
// (compressed, its header and CRC written) ahead of its turn, by encoder
// goroutines, outside mu and off the caller of Send and SendAsync: the
// caller goes on filling the next batch while up to GOMAXPROCS batches are
// compressed at once, on as many cores (kgo compresses on one goroutine per
// broker). A batch a sender takes at once is finished by that sender, as
// before: an idle sender has nothing else to do. The senders do not take a
// batch while it is encoding, and it is not failed meanwhile (its memory is
// in use); the encoder kicks its partition's senders once it is done.
//
// An idempotent producer may renumber a batch not yet sent at any time
// (setSeqLocked): while the batch is encoding that writes only the pbatch's
// fields and marks it seqStale, and the encoder writes the new sequence into
// the finished bytes after.

// encodeAhead reports whether b, closed and waiting for its turn, is
// finished by an encoder: if it is compressed. An uncompressed batch is
// finished by the caller that closes it when it fills (finishFullLocked), as
// it is cache-hot there: its CRC on an encoder's core cost more CPU per
// record (BenchmarkProducerSendAsync, 1000 B) than it saved the caller.
func (p *Producer) encodeAhead(*pbatch) bool {
	return p.cfg.Compression != CompressionNone
}

// finishFullLocked finishes an uncompressed batch that enqueue has just
// closed full: its header and CRC, on the sending goroutine, which has time
// to spare, and under mu, which no sender can take it without. A compressed
// batch is never compressed under mu (that stalled every other send and
// the senders' bookkeeping for the whole of it): an encoder or its sender
// compresses it.
func (p *Producer) finishFullLocked(b *pbatch) {
	if p.cfg.Compression == CompressionNone {
		b.finish()
	}
}

// encodeJob is a batch waiting for an encoder.
type encodeJob struct {
	ps *partState
	b  *pbatch
}

// queueEncodeLocked marks b encoding and hands it to an encoder, starting
// one if fewer than maxEncoders run.
func (p *Producer) queueEncodeLocked(ps *partState, b *pbatch) {
	b.encoding = true
	p.encQ = append(p.encQ, encodeJob{ps, b})
	if p.encoders < p.maxEncoders {
		p.encoders++
		p.wg.Add(1)
		go p.encodeLoop()
	}
}

// encodeLoop is an encoder goroutine: it finishes queued batches, in the
// order they were closed, until none is left.
func (p *Producer) encodeLoop() {
	defer p.wg.Done()
	p.lockBehind()
	for p.encHead < len(p.encQ) {
		j := p.encQ[p.encHead]
		p.encQ[p.encHead] = encodeJob{}
		p.encHead++
		if p.encHead == len(p.encQ) {
			p.encQ, p.encHead = p.encQ[:0], 0
		}
		p.mu.Unlock()
		j.b.finish()
		p.lockBehind()
		p.encodedLocked(j)
	}
	p.encoders--
	p.mu.Unlock()
}

// encodedLocked ends the encoding of j.b, finished outside mu: a sequence
// given to it meanwhile goes into its bytes, and its senders may take it.
func (p *Producer) encodedLocked(j encodeJob) {
	b := j.b
	b.encoding = false
	if b.seqStale {
		b.own()
		batch.SetProducer(b.raw, b.pid.ID, b.pid.Epoch, b.baseSeq)
		b.seqStale = false
	}
	p.kickLocked(j.ps)
}
