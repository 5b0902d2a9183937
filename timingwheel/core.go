package timingwheel

import "math"

// This file is the pure core: hierarchical wheels of buckets, the bucket
// priority queue and the list of due timers. It does no IO, starts no
// goroutine, takes no lock and reads no clock; time is an int64 count of ticks
// that the caller passes in. The driver in timingwheel.go owns the lock, the
// clock and the goroutines.

// maxExp caps expirations (in ticks) so that additions of a level's span
// never overflow.
const maxExp = math.MaxInt64 >> 1

// bucket is a doubly linked list of timers sharing one expiration, linked
// through the timers themselves (intrusive: adding or removing a timer
// allocates nothing). root is the sentinel: root.next is the first timer.
// A timer does not point back to its bucket (keeping Timer at 48 bytes), so
// a bucket emptied by Stop stays in the heap until it expires, as in Kafka.
type bucket struct {
	root    Timer
	exp     int64 // the bucket's expiration tick while it is in the heap
	heapIdx int   // position in the heap; -1 when not in it
	level   int   // wheel level that owns the bucket; -1 for the ready list
}

func (b *bucket) init(level int) {
	b.root.next = &b.root
	b.root.prev = &b.root
	b.heapIdx = -1
	b.level = level
}

func (b *bucket) empty() bool { return b.root.next == &b.root }

// pushBack appends t, which must not be in any list.
func (b *bucket) pushBack(t *Timer) {
	last := b.root.prev
	t.prev = last
	t.next = &b.root
	last.next = t
	b.root.prev = t
}

// splice moves all of src's timers, in order, to the end of b.
func (b *bucket) splice(src *bucket) {
	first, last := src.root.next, src.root.prev
	src.root.next, src.root.prev = &src.root, &src.root
	tail := b.root.prev
	tail.next = first
	first.prev = tail
	last.next = &b.root
	b.root.prev = last
}

// unlink takes t out of the list holding it. t.next == nil means t is in
// no list.
func unlink(t *Timer) {
	t.prev.next = t.next
	t.next.prev = t.prev
	t.next, t.prev = nil, nil
}

// level is one wheel: size buckets, each tick wide (in base ticks).
type level struct {
	tick int64 // width of a bucket in base ticks: size^index
	span int64 // tick*size, saturated at math.MaxInt64
	cur  int64 // the level's current time, a multiple of tick
	// cur/tick and its slot, kept so that add divides at most once.
	curVid, curIdx int64
	bkts           []bucket
}

// wheel is the hierarchy of levels plus the bucket heap and the ready list.
// Level 0 is created up front; each overflow level is created the first time
// a timer does not fit the levels below, as in Kafka.
//
// Invariants (checked by checkInvariants in the tests):
//   - a bucket that holds a timer is in the heap (an empty one may be too);
//   - a timer in a bucket of level L with expiration e satisfies
//     b.exp <= e < b.exp+tick(L), and b.exp is a multiple of tick(L);
//   - timers in ready are due: their expiration <= cur.
type wheel struct {
	size   int64
	levels []*level
	heap   []*bucket // min-heap of buckets by exp
	ready  bucket    // due timers waiting for the executor
}

func newWheel(size int) *wheel {
	w := &wheel{size: int64(size)}
	w.ready.init(-1)
	w.addLevel(1, 0)
	return w
}

// now is the core's current time in ticks.
func (w *wheel) now() int64 { return w.levels[0].cur }

func (w *wheel) addLevel(tick, cur int64) *level {
	span := int64(math.MaxInt64)
	if tick <= math.MaxInt64/w.size {
		span = tick * w.size
	}
	lv := &level{tick: tick, span: span, bkts: make([]bucket, w.size)}
	w.setCur(lv, cur)
	for i := range lv.bkts {
		lv.bkts[i].init(len(w.levels))
	}
	w.levels = append(w.levels, lv)
	return lv
}

// add puts t (t.exp set, in no list) where it belongs: in the ready list if it
// is due (then it returns &w.ready), else in the bucket of the finest level
// whose span covers it. It returns that bucket if it has just entered the
// heap (its expiration may be earlier than what the driver sleeps for), else
// nil.
func (w *wheel) add(t *Timer) *bucket {
	if t.exp > maxExp {
		t.exp = maxExp
	}
	lv := w.levels[0]
	if t.exp <= lv.cur {
		w.ready.pushBack(t)
		return &w.ready
	}
	for i := 0; ; i++ {
		if i == len(w.levels) {
			below := w.levels[i-1]
			lv = w.addLevel(below.span, w.levels[0].cur)
		} else {
			lv = w.levels[i]
		}
		// t.exp > cur at every level (cur only decreases upwards), so this
		// difference cannot overflow.
		if off := t.exp - lv.cur; off < lv.span {
			slots := off // buckets ahead of the current one; < size
			if i > 0 {
				slots = off / lv.tick
			}
			idx := lv.curIdx + slots
			if idx >= w.size {
				idx -= w.size
			}
			b := &lv.bkts[idx]
			b.pushBack(t)
			if b.heapIdx >= 0 {
				return nil
			}
			b.exp = (lv.curVid + slots) * lv.tick
			w.heapPush(b)
			return b
		}
	}
}

// remove takes t out of the wheel or the ready list. It reports whether t was
// there (false: it already went to the executor, or was never added).
func (w *wheel) remove(t *Timer) bool {
	if t.next == nil {
		return false
	}
	unlink(t)
	return true
}

// advanceClock moves every level's current time to now (rounded down to the
// level's tick). Buckets must not be left in the heap with exp <= now:
// advance pops them first.
func (w *wheel) advanceClock(now int64) {
	for _, lv := range w.levels {
		if now-lv.cur >= lv.tick {
			w.setCur(lv, now)
		}
	}
}

// setCur sets lv's current time to now rounded down to its tick.
func (w *wheel) setCur(lv *level, now int64) {
	lv.curVid = now / lv.tick
	lv.cur = lv.curVid * lv.tick
	lv.curIdx = lv.curVid % w.size
}

// advance moves the core to time now: each bucket that expires at or before
// now is taken from the heap in order, the clock is advanced to its
// expiration, and its timers are re-added, falling into finer levels or into
// the ready list. A bucket of the finest level holds only timers due at its
// expiration: it is spliced onto the ready list whole. advance reports
// whether any timer entered the ready list.
func (w *wheel) advance(now int64) bool {
	readied := false
	for len(w.heap) > 0 && w.heap[0].exp <= now {
		b := w.heapPop()
		w.advanceClock(b.exp)
		if b.empty() {
			continue
		}
		if b.level == 0 {
			w.ready.splice(b)
			readied = true
			continue
		}
		t := b.root.next
		b.root.next, b.root.prev = &b.root, &b.root
		for t != &b.root {
			next := t.next
			t.next, t.prev = nil, nil
			if w.add(t) == &w.ready {
				readied = true
			}
			t = next
		}
	}
	w.advanceClock(now)
	return readied
}

// next reports the expiration of the earliest bucket.
func (w *wheel) next() (int64, bool) {
	if len(w.heap) == 0 {
		return 0, false
	}
	return w.heap[0].exp, true
}

// popReady takes the first due timer, or returns nil.
func (w *wheel) popReady() *Timer {
	t := w.ready.root.next
	if t == &w.ready.root {
		return nil
	}
	unlink(t)
	return t
}
