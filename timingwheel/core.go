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
	t.b = b
}

// unlink takes t out of the list holding it.
func unlink(t *Timer) {
	t.prev.next = t.next
	t.next.prev = t.prev
	t.next, t.prev, t.b = nil, nil, nil
}

// level is one wheel: size buckets, each tick wide (in base ticks).
type level struct {
	tick int64 // width of a bucket in base ticks: size^index
	span int64 // tick*size, saturated at math.MaxInt64
	cur  int64 // the level's current time, a multiple of tick
	bkts []bucket
}

// wheel is the hierarchy of levels plus the bucket heap and the ready list.
// Level 0 is created up front; each overflow level is created the first time
// a timer does not fit the levels below, as in Kafka.
//
// Invariants (checked by checkInvariants in the tests):
//   - a bucket is in the heap if and only if it holds at least one timer;
//   - a timer in a bucket of level L with expiration e satisfies
//     b.exp <= e < b.exp+tick(L), and b.exp is a multiple of tick(L);
//   - timers in ready are due: their expiration <= cur.
type wheel struct {
	size   int64
	levels []*level
	heap   []*bucket // min-heap of non-empty buckets by exp
	ready  bucket    // due timers waiting for the executor
	nready int
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
	lv := &level{tick: tick, span: span, cur: cur - cur%tick, bkts: make([]bucket, w.size)}
	for i := range lv.bkts {
		lv.bkts[i].init(len(w.levels))
	}
	w.levels = append(w.levels, lv)
	return lv
}

// add puts t (t.exp set, in no list) where it belongs: in the ready list if it
// is due, else in the bucket of the finest level whose span covers it. It
// reports the bucket if that bucket has just entered the heap (its expiration
// may be earlier than what the driver sleeps for), else nil.
func (w *wheel) add(t *Timer) *bucket {
	if t.exp > maxExp {
		t.exp = maxExp
	}
	lv := w.levels[0]
	if t.exp <= lv.cur {
		w.ready.pushBack(t)
		w.nready++
		return nil
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
		if t.exp-lv.cur < lv.span {
			vid := t.exp / lv.tick
			b := &lv.bkts[vid%w.size]
			b.pushBack(t)
			if b.heapIdx >= 0 {
				return nil
			}
			b.exp = vid * lv.tick
			w.heapPush(b)
			return b
		}
	}
}

// remove takes t out of the wheel or the ready list. It reports whether t was
// there (false: it already went to the executor, or was never added).
func (w *wheel) remove(t *Timer) bool {
	b := t.b
	if b == nil {
		return false
	}
	unlink(t)
	if b == &w.ready {
		w.nready--
	} else if b.empty() {
		w.heapRemove(b)
	}
	return true
}

// advanceClock moves every level's current time to now (rounded down to the
// level's tick). Buckets must not be left in the heap with exp <= now:
// advance pops them first.
func (w *wheel) advanceClock(now int64) {
	for _, lv := range w.levels {
		if now-lv.cur >= lv.tick {
			lv.cur = now - now%lv.tick
		}
	}
}

// advance moves the core to time now: each bucket that expires at or before
// now is taken from the heap in order, the clock is advanced to its
// expiration, and its timers are re-added, falling into finer levels or into
// the ready list. It returns how many timers entered the ready list.
func (w *wheel) advance(now int64) int {
	before := w.nready
	for len(w.heap) > 0 && w.heap[0].exp <= now {
		b := w.heapPop()
		w.advanceClock(b.exp)
		t := b.root.next
		b.root.next, b.root.prev = &b.root, &b.root
		for t != &b.root {
			next := t.next
			t.next, t.prev, t.b = nil, nil, nil
			w.add(t)
			t = next
		}
	}
	w.advanceClock(now)
	return w.nready - before
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
	w.nready--
	return t
}

// where tells which level and bucket hold t: the level, and the bucket's
// range [start, end) in ticks. level is -1 for the ready list and -2 when t is
// in no list.
func (w *wheel) where(t *Timer) (lvl int, start, end int64) {
	switch b := t.b; {
	case b == nil:
		return -2, 0, 0
	case b == &w.ready:
		return -1, 0, 0
	default:
		return b.level, b.exp, b.exp + w.levels[b.level].tick
	}
}
