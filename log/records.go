package log

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
)

// replayChunk is how many bytes of whole batches Records reads from the
// segment files at a time (more when one batch is larger): large enough
// that the read's system call is amortised over thousands of small
// records, small enough to stay in the CPU's caches.
const replayChunk = 256 << 10

// Records returns an iterator over the records of the partition from offset
// from up to the high watermark at the call (on a standalone broker the
// high watermark is the end offset): a replay, as an event store does at
// start-up. Records appended after the call are not part of it, however
// long the iteration takes. Like a consumer it reads committed records
// only: on a follower replica, none at or past the high watermark.
//
// It allocates nothing per record: the batches are read from the segment
// files in chunks into one buffer, and decoded in place. So a record's Key,
// Value and Headers (and the header values) are valid only until the next
// iteration; copy what must outlive it. Compressed batches are decompressed,
// one at a time, into a second reused buffer.
//
// from must be within [StartOffset, EndOffset] when the iteration starts;
// otherwise the iterator yields one *OffsetOutOfRangeError (errors.Is
// ErrOffsetOutOfRange) and stops. So it does if retention deletes the
// records it has to read next while it runs. A batch that fails its checks
// (CRC, framing) yields one error matching ErrCorrupt, after the records
// before it, and stops; so does any other read error. Offsets need not be
// contiguous: compaction leaves gaps. Control batches (transaction markers)
// are skipped. A Close of the broker ends it with one error matching
// ErrClosed (after the records of the chunk it had read). Breaking out of
// the loop releases everything the iterator holds. The iterator may be
// ranged over more than once, each time from from to the same end.
//
// Records reads as a READ_UNCOMMITTED consumer does: the records of
// transactions still open or aborted are yielded too. RecordsIsolated
// reads as a READ_COMMITTED one.
func (p *Partition) Records(from int64) iter.Seq2[Record, error] {
	return p.RecordsIsolated(from, ReadUncommitted)
}

// RecordsIsolated is Records at isolation level level: with ReadCommitted,
// up to the last stable offset at the call rather than the high watermark,
// and without the records of aborted transactions, which it finds in the
// segments' .txnindex as a READ_COMMITTED fetch does. An unknown level
// yields one error matching ErrInvalidConfig.
func (p *Partition) RecordsIsolated(from int64, level IsolationLevel) iter.Seq2[Record, error] {
	end := p.HighWatermark()
	committed := level == ReadCommitted
	if committed {
		end = min(p.LastStableOffset(), end)
	}
	return func(yield func(Record, error) bool) {
		if level != ReadUncommitted && level != ReadCommitted {
			yield(Record{}, fmt.Errorf("%w: records of %s: unknown isolation level %d", ErrInvalidConfig, p, level))
			return
		}
		r := replay{p: p, yield: yield, committed: committed}
		r.run(from, end)
	}
}

// replay is the state of one iteration of Records.
type replay struct {
	p     *Partition
	yield func(Record, error) bool
	buf   []byte // the chunk of batches read from the segment files
	dbuf  []byte // the batch being read, decompressed
	it    batch.Iter
	rec   batch.Record
	// committed: a READ_COMMITTED replay, skipping aborted transactions
	// (ab, with the aborted transactions of each chunk in aborted).
	committed bool
	ab        abortFilter
	aborted   []AbortedTransaction
	// seg, when set, is the segment the last chunk was read from, held
	// (Acquire); segPos is the position in its .log after the whole
	// batches of that chunk, and buf[carryAt:carryAt+carry] the bytes read
	// past them (the start of the next batch). The next chunk reads on
	// from there, without looking its offset up in the segment again
	// (index, batch headers), as long as the segment has bytes past it.
	seg            *segment.Segment
	segCuts        uint64 // seg.Cuts() when segPos was found
	segPos         int64
	carryAt, carry int
}

// run yields the records in [from, end), and reports nothing: a stop (the
// caller's break, or an error yielded) ends it.
func (r *replay) run(from, end int64) {
	defer r.drop()
	p := r.p
	if err := p.checkRange(from); err != nil {
		r.yield(Record{}, err)
		return
	}
	for off := from; off < end; {
		next, err := r.chunk(off, end)
		if err != nil {
			if p.closed.Load() {
				err = p.closedErr()
			}
			r.yield(Record{}, err)
			return
		}
		if next < 0 { // the caller stopped
			return
		}
		if next <= off { // nothing more below end (cannot happen below the HW; be safe)
			return
		}
		off = next
	}
}

// drop releases the segment the replay holds, if any.
func (r *replay) drop() {
	if r.seg != nil {
		r.seg.Release()
		r.seg = nil
	}
	r.carry = 0
}

// chunk reads the batches from the one holding off on, up to replayChunk
// bytes, and yields their records in [off, end). It returns the offset after
// the last batch read, or -1 if the caller stopped.
func (r *replay) chunk(off, end int64) (int64, error) {
	p := r.p
	// Retention may have deleted what comes next, or a Close begun: as a
	// Slice would, say so before reading on in the segment held.
	if err := p.checkRange(off); err != nil {
		return 0, err
	}
	raw, next, err := r.read(off, end)
	if err != nil {
		return 0, err
	}
	if r.committed && len(raw) > 0 {
		if r.aborted, err = p.AbortedTransactions(r.aborted[:0], off, next); err != nil {
			return 0, fmt.Errorf("log: replay %s at %d: %w", p, off, err)
		}
		r.ab.reset(r.aborted)
	}
	out := Record{Topic: p.topic, Partition: p.id}
	ms := int64(math.MinInt64) // out.Timestamp's, once set
	for pos := 0; pos < len(raw); {
		h, bb, err := nextBatch(raw[pos:])
		if err != nil {
			return 0, fmt.Errorf("log: replay %s at %d: batch at byte %d of a read: %w", p, off, pos, err)
		}
		pos += len(bb)
		if h.NextOffset() <= off {
			continue
		}
		if r.committed && r.ab.skip(h, bb) || h.Control() {
			continue
		}
		if h.Compression() != batch.CompressionNone {
			if r.dbuf, err = batch.DecompressLimit(r.dbuf[:0], bb, h, p.maxInflate); err == nil {
				bb = r.dbuf
				h, err = batch.ParseHeader(bb)
			}
			if err != nil {
				return 0, fmt.Errorf("log: replay %s: batch at offset %d: %w", p, h.BaseOffset, err)
			}
		}
		if err := r.it.Reset(bb, h); err != nil {
			return 0, fmt.Errorf("log: replay %s: batch at offset %d: %w", p, h.BaseOffset, err)
		}
		for {
			ok, err := r.it.Next(&r.rec)
			if err != nil {
				return 0, fmt.Errorf("log: replay %s: batch at offset %d: %w", p, h.BaseOffset, err)
			}
			if !ok {
				break
			}
			if r.rec.Offset < off {
				continue
			}
			if r.rec.Offset >= end {
				return end, nil
			}
			out.Offset = r.rec.Offset
			if r.rec.Timestamp != ms {
				// Records of a batch often share their millisecond.
				ms, out.Timestamp = r.rec.Timestamp, time.UnixMilli(r.rec.Timestamp)
			}
			out.Key, out.Value, out.Headers = r.rec.Key, r.rec.Value, r.rec.Headers
			if !r.yield(out, nil) {
				return -1, nil
			}
		}
	}
	return next, nil
}

// read returns whole batches from the one holding off on, about
// replayChunk bytes of them (more if one batch is larger), read into r.buf,
// and the offset after the last of them. It reads on in the segment it
// holds when it can, and looks off up (Slice) otherwise.
func (r *replay) read(off, end int64) ([]byte, int64, error) {
	p := r.p
	if r.seg != nil {
		raw, next, ok, err := r.readOn(off)
		if err != nil {
			return nil, 0, fmt.Errorf("log: replay %s at %d: %w", p, off, err)
		}
		if ok {
			return raw, next, nil
		}
		r.drop()
	}
	b, err := p.Slice(off, replayChunk, end)
	if err != nil {
		return nil, 0, err
	}
	defer b.Release()
	if cap(r.buf) < replayChunk {
		r.buf = make([]byte, 0, replayChunk) // what readOn reads into too
	}
	if r.buf, err = readInto(r.buf[:0], &b); err != nil {
		return nil, 0, fmt.Errorf("log: replay %s at %d: %w", p, off, err)
	}
	if b.n > 0 && b.mem == nil {
		// Hold the last segment read, to read on in it. (A cut between
		// the lookup and Cuts is the segment's documented race: the
		// reads check framing and CRC, never yield another batch.)
		last := b.rangeAt(b.n - 1)
		cuts := last.seg.Cuts()
		if last.seg.Acquire() {
			r.seg, r.segCuts, r.segPos, r.carry = last.seg, cuts, last.pos+last.len, 0
		}
	}
	return r.buf, b.next, nil
}

// readOn reads the batches after those of the last chunk from the segment
// held, up to its published size: whole batches, and the offset after the
// last of them. ok is false when it has none to give (the segment ends
// there, or does not continue at off: a truncation changed it), and the
// caller looks off up instead.
func (r *replay) readOn(off int64) (raw []byte, next int64, ok bool, err error) {
	copy(r.buf, r.buf[r.carryAt:r.carryAt+r.carry])
	have := r.carry
	r.carry = 0
	want := replayChunk
	for {
		size := r.seg.Size()
		if r.seg.Cuts() != r.segCuts {
			return nil, 0, false, nil // truncated: segPos may be gone
		}
		from := r.segPos + int64(have)
		n := int(min(int64(want-have), size-from))
		if n > 0 {
			r.buf = slices.Grow(r.buf[:have], n)[:have+n]
			err := readFull(r.seg.File(), r.buf[have:], from)
			if r.seg.Cuts() != r.segCuts {
				return nil, 0, false, nil // truncated while read
			}
			if err != nil {
				return nil, 0, false, err
			}
			have += n
		}
		w := 0
		next = -1
		for have-w >= batch.HeaderSize {
			h, err := batch.ParseHeader(r.buf[w:have])
			if err != nil {
				// Let a lookup read it, and say what is wrong.
				return nil, 0, false, nil
			}
			if w == 0 && h.BaseOffset < off {
				return nil, 0, false, nil // not where the last chunk ended
			}
			if int64(w+h.Size()) > size-r.segPos {
				// Past what the segment has: a lookup says what is wrong.
				return nil, 0, false, nil
			}
			if w+h.Size() > have {
				if w == 0 && h.Size() > want {
					want = h.Size() // one batch larger than a chunk: read it whole
					w = -1
				}
				break
			}
			next = h.NextOffset()
			w += h.Size()
		}
		switch {
		case w < 0:
			continue
		case w == 0:
			return nil, 0, false, nil
		}
		r.segPos += int64(w)
		r.carryAt, r.carry = w, have-w
		return r.buf[:w], next, true, nil
	}
}

// readInto appends the bytes of the batches b holds to dst, reading them
// from the segment files: Bytes, into a buffer of the caller's.
func readInto(dst []byte, b *Batches) ([]byte, error) {
	if b.released {
		return dst, ErrReleased
	}
	if b.mem != nil {
		return append(dst, b.mem...), nil
	}
	n := len(dst)
	if need := n + int(b.size); cap(dst) < need {
		g := make([]byte, n, need)
		copy(g, dst)
		dst = g
	}
	dst = dst[:n+int(b.size)]
	at := int64(n)
	for i := range b.n {
		fr := b.rangeAt(i)
		if err := readFull(fr.seg.File(), dst[at:at+fr.len], fr.pos); err != nil {
			return dst[:n], fmt.Errorf("log: read batches: %w", err)
		}
		at += fr.len
	}
	return dst, nil
}
