package segment

import (
	"sync/atomic"

	"github.com/strata-log/strata/segment/batch"
)

// recentSlots is how many of its last batches the active segment
// remembers: a consumer at the end of the log, the commonest reader, finds
// its batch and those after it there without reading a header from the
// file. 64 slots of 40 bytes: 2.5 KiB per partition that is appended to
// (allocated by its first append, dropped when its segment is sealed).
const recentSlots = 64

// recent remembers where the active segment's last batches are, as Append
// wrote them: a ring of their positions, offsets and sizes that readers
// search without a lock (a seqlock per slot) while the appender adds to it.
//
// Batches are numbered from 0 in the order Append recorded them; batch k
// lives in slot k%recentSlots. A number is never reused, so a slot whose
// seq is k+1 holds batch k's fields, whatever happened since. The batches
// still in the ring are contiguous in the .log, the last of them ending
// where the appender wrote last; a reader checks that again as it walks.
// When the .log changes below them (a truncation, a recovery) the segment
// drops the ring and appends start a new one.
type recent struct {
	n     atomic.Uint64 // batches recorded: the number of the next one
	slots [recentSlots]recentSlot
}

type recentSlot struct {
	seq  atomic.Uint64 // k+1 once the fields are batch k's; 0 while written
	pos  atomic.Int64
	base atomic.Int64
	next atomic.Int64 // the offset after the batch
	size atomic.Int64
}

// span is what a read needs of a batch's header: where it is, its offsets
// and its size.
type span struct {
	pos, base, next, size int64
}

func spanOf(pos int64, h batch.Header) span {
	return span{pos: pos, base: h.BaseOffset, next: h.NextOffset(), size: int64(h.Size())}
}

// add records the batch just written at pos; the appender calls it before
// publishing the segment's new size, so that a reader that sees a size
// finds every batch below it here (or in the file).
func (r *recent) add(pos int64, h batch.Header) {
	k := r.n.Load()
	sl := &r.slots[k%recentSlots]
	sl.seq.Store(0)
	sl.pos.Store(pos)
	sl.base.Store(h.BaseOffset)
	sl.next.Store(h.NextOffset())
	sl.size.Store(int64(h.Size()))
	sl.seq.Store(k + 1)
	r.n.Store(k + 1)
}

// get returns batch k, false if its slot holds another batch by now.
func (r *recent) get(k uint64) (span, bool) {
	sl := &r.slots[k%recentSlots]
	if sl.seq.Load() != k+1 {
		return span{}, false
	}
	s := span{pos: sl.pos.Load(), base: sl.base.Load(), next: sl.next.Load(), size: sl.size.Load()}
	if sl.seq.Load() != k+1 {
		return span{}, false
	}
	return s, true
}

// window returns the numbers [lo, hi) of the batches a reader may find in
// the ring now.
func (r *recent) window() (lo, hi uint64) {
	hi = r.n.Load()
	if hi > recentSlots {
		lo = hi - recentSlots
	}
	return lo, hi
}

// find returns the batch that holds offset, or the first after it, among
// those below end (the segment's published size, loaded before), and its
// number. eof: none below end ends at or after offset. ok is false when
// the ring cannot tell (offset is before the batches it holds, or the
// appender overwrote a slot meanwhile): the caller reads the file.
func (r *recent) find(offset, end int64) (s span, k uint64, eof, ok bool) {
	lo, hi := r.window()
	if lo >= hi {
		return span{}, 0, false, false
	}
	first, ok := r.get(lo)
	if !ok || offset < first.base || first.pos+first.size > end {
		return span{}, 0, false, false
	}
	// The first batch in [lo, hi) whose next offset is past offset;
	// batches are in offset order. Those past end are not published yet:
	// they count as past offset, and are checked below.
	a, b := lo, hi
	for a < b {
		m := a + (b-a)/2
		sm, ok := r.get(m)
		if !ok {
			return span{}, 0, false, false
		}
		if sm.next > offset && sm.pos+sm.size <= end || sm.pos+sm.size > end {
			b = m
		} else {
			a = m + 1
		}
	}
	if a == hi {
		return span{}, 0, true, true
	}
	s, ok = r.get(a)
	if !ok {
		return span{}, 0, false, false
	}
	if s.pos+s.size > end {
		return span{}, 0, true, true
	}
	if a > lo {
		// Contiguous with the batch before it: both of one run.
		prev, ok := r.get(a - 1)
		if !ok || prev.pos+prev.size != s.pos {
			return span{}, 0, false, false
		}
	}
	return s, a, false, true
}
