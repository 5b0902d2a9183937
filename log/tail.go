package log

import (
	"sync/atomic"
	"unsafe"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
)

// The tail: the last batches a Producer of this process appended to a
// partition, kept in memory as the Producer built them, so that a consumer
// of the same process reading the end of the log (an application tailing
// what it writes, the commonest read there is) gets those bytes without a
// read(2) of the segment file and without a buffer of its own, and, from
// the spans its Builder recorded (batch.Span), their records without
// parsing them.
//
// A batch goes into the tail on the trusted path (partition_trusted.go),
// when its caller gives the bytes up (batches of tailMinBatch and more): the
// Producer never writes to a slice it handed over again (it copies it first,
// pbatch.own) and builds the next batch in a new buffer
// (batch.Builder.Detach). A batch appended with AppendBatch (a Kafka
// produce request's, validated, in a buffer the server reuses once it has
// answered) goes in as a copy if it has tailCopyMax bytes or fewer: a
// consumer fetching at the end of the log then gets it without a pread(2)
// and a buffer of its own. Any other append empties the
// tail, and so does every truncation, since the bytes at a position of the
// active segment can then change. The batches in the tail are byte for byte
// what was written to the file at their positions: a read served from the
// tail returns what reading the file would.
//
// Memory is bounded per Store (tailBudget) and per partition (tailSlots
// batches, tailCopySlots when the newest is small, each at most a batch's
// MaxMessageBytes); over the budget, the partition appending gives up its
// oldest batches first, its newest too if that alone does not fit.

// tailMinBatch is the smallest batch a Producer gives to the tail. A large
// batch is most of what a consumer at the end reads in one fetch (a read(2)
// and a buffer saved per batch), and costs the Producer a new buffer; small
// batches come many to a fetch, where a new buffer for each cost more than
// the reads they saved (BenchmarkProduceConsume/none-16KiB in bench/).
const tailMinBatch = 256 << 10

// tailCopyMax is the largest batch appended with AppendBatch that the tail
// keeps a copy of. A Kafka server sends the record batches of a fetch below
// 16 KiB from memory (one writev beats a sendfile per partition), which it
// would otherwise read from the segment file into a new buffer; larger ones
// go from the file with sendfile, and are not copied.
const tailCopyMax = 16 << 10

// tailSlots is how many of a partition's last batches the tail holds: a
// consumer a few batches behind still reads from memory.
const tailSlots = 16

// tailCopySlots is how many it holds when the newest batch is a small one
// (tailCopyMax or less, a Kafka producer's): a consumer at the end reads the
// newest one or two, and each append builds a new ring, copying the
// entries it keeps (a ring of 16 cost a small append 1.1 KB and 15 copies).
const tailCopySlots = 4

// defaultTailBudget bounds the bytes all of a Store's tails hold.
const defaultTailBudget = 64 << 20

// tailBudget counts the bytes held by a Store's tails.
type tailBudget struct {
	used atomic.Int64
	max  int64
}

// tailBatch is one batch of the tail: b is at pos in seg's .log. spans,
// if not nil, are where its records are, as its Builder wrote them
// (batch.Span): a consumer takes them from there without parsing b.
type tailBatch struct {
	seg   *segment.Segment
	pos   int64
	b     []byte
	spans []batch.Span
}

// mem is the memory t holds: its bytes and its spans.
func (t *tailBatch) mem() int64 {
	return int64(len(t.b)) + int64(len(t.spans))*int64(unsafe.Sizeof(batch.Span{}))
}

// tailRing is an immutable snapshot of a partition's tail, oldest first:
// each append replaces it whole, so a reader holds a consistent one.
type tailRing struct {
	n       int
	batches []tailBatch // the ring's slots, n of them in use
	bytes   int64       // the memory its batches hold (mem)
}

// newTailRing returns an empty ring of slots slots (tailSlots or
// tailCopySlots), in one allocation.
func newTailRing(slots int) *tailRing {
	if slots <= tailCopySlots {
		r := &struct {
			tailRing
			slots [tailCopySlots]tailBatch
		}{}
		r.batches = r.slots[:slots]
		return &r.tailRing
	}
	r := &struct {
		tailRing
		slots [tailSlots]tailBatch
	}{}
	r.batches = r.slots[:min(slots, tailSlots)]
	return &r.tailRing
}

// keepTailLocked adds b, just written at pos of seg, with the spans of its
// records (nil if unknown), to the tail (which
// starts anew unless b follows its newest batch), dropping the oldest batch
// if it is full or the budget has no room, and emptying it if even b does
// not fit. It reports whether b was kept: if so, b is the partition's now.
// Holds mu.
func (p *Partition) keepTailLocked(seg *segment.Segment, pos int64, b []byte, spans []batch.Span) bool {
	if p.tails == nil {
		return false
	}
	old := p.tail.Load()
	slots := tailSlots
	if len(b) <= tailCopyMax {
		slots = tailCopySlots
	}
	r := newTailRing(slots)
	if old != nil && old.n > 0 && old.batches[old.n-1].seg == seg &&
		old.batches[old.n-1].pos+int64(len(old.batches[old.n-1].b)) == pos {
		// Contiguous with what the tail holds: keep its newest batches.
		from := max(0, old.n-(slots-1))
		r.n = copy(r.batches, old.batches[from:old.n])
		for _, t := range r.batches[:r.n] {
			r.bytes += t.mem()
		}
	}
	r.batches[r.n] = tailBatch{seg: seg, pos: pos, b: b, spans: spans}
	r.bytes += r.batches[r.n].mem()
	r.n++
	var had int64
	if old != nil {
		had = old.bytes
	}
	used := p.tails.used.Add(r.bytes - had)
	// Over the budget, this partition gives up its oldest batches first,
	// the newest too if it must.
	drop := 0
	for ; used > p.tails.max && drop < r.n; drop++ {
		n := r.batches[drop].mem()
		used = p.tails.used.Add(-n)
		r.bytes -= n
	}
	if drop == r.n {
		p.tail.Store(nil)
		return false
	}
	if drop > 0 {
		r.n = copy(r.batches, r.batches[drop:r.n])
		clear(r.batches[r.n:])
	}
	p.tail.Store(r)
	return true
}

// dropTailLocked empties the tail. Holds mu (or the partition is closed).
func (p *Partition) dropTailLocked() {
	if old := p.tail.Swap(nil); old != nil {
		p.tails.used.Add(-old.bytes)
	}
}

// bytesOf returns the bytes of the file range of bs if the tail holds all
// of it, and the tail's batches they are, in order: the tail's own slice
// for one batch, one new slice for several.
func (r *tailRing) bytesOf(bs *Batches) ([]byte, []tailBatch, bool) {
	if bs.n != 1 {
		return nil, nil, false // the ranges of another segment are not in the tail
	}
	fr := bs.first
	for i := range r.n {
		t := &r.batches[i]
		if t.seg != fr.seg || t.pos != fr.pos {
			continue
		}
		if int64(len(t.b)) == fr.len {
			return t.b, r.batches[i : i+1 : i+1], true
		}
		// Several batches: they must tile the range exactly.
		end := fr.pos + fr.len
		at := t.pos
		j := i
		for ; j < r.n && at < end; j++ {
			at += int64(len(r.batches[j].b))
		}
		if at != end {
			return nil, nil, false
		}
		out := make([]byte, 0, fr.len)
		for _, u := range r.batches[i:j] {
			out = append(out, u.b...)
		}
		return out, r.batches[i:j:j], true
	}
	return nil, nil, false
}
