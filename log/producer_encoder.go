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

// encodeAheadBytes is the smallest uncompressed batch finished ahead: below
// it, the CRC of the batch costs less than the hand-off to an encoder. A
// compressed batch is always worth it.
const encodeAheadBytes = 128 << 10

// encodeAhead reports whether b, closed and waiting for its turn, is
// finished by an encoder.
func (p *Producer) encodeAhead(b *pbatch) bool {
	return p.cfg.Compression != CompressionNone || b.bd.Size() >= encodeAheadBytes
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
	p.mu.Lock()
	for p.encHead < len(p.encQ) {
		j := p.encQ[p.encHead]
		p.encQ[p.encHead] = encodeJob{}
		p.encHead++
		if p.encHead == len(p.encQ) {
			p.encQ, p.encHead = p.encQ[:0], 0
		}
		p.mu.Unlock()
		j.b.finish()
		p.mu.Lock()
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
		batch.SetProducer(b.raw, b.pid.ID, b.pid.Epoch, b.baseSeq)
		b.seqStale = false
	}
	p.kickLocked(j.ps)
}
