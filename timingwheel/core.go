package timingwheel

import "math"

// This file is the pure core: hierarchical wheels of buckets, the bucket
// priority queue and the list of due timers. It does no IO, starts no
// goroutine, takes no lock and reads no clock; time is an int64 count of
// units (the driver uses nanoseconds since the wheel started) that the caller
// passes in. The driver in timingwheel.go owns the lock, the clock and the
// goroutines.

// maxExp caps expirations so that additions of a level's span never
// overflow.
const maxExp = math.MaxInt64 >> 1

// bucket is a doubly linked list of timers, linked through the timers
// themselves (intrusive: adding or removing a timer allocates nothing). root
// is the sentinel: root.next is the first timer. A timer does not point back
// to its bucket (keeping Timer at 48 bytes), so a bucket emptied by Stop
// stays in the heap until it expires, as in Kafka.
type bucket struct {
	root    Timer
	exp     int64 // when the bucket expires, while it is in the heap
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

// level is one wheel: size buckets, each tick wide.
type level struct {
	tick int64 // width of a bucket: the finest tick times size^index
	span int64 // tick*size, saturated at math.MaxInt64
	cur  int64 // the level's current time, rounded down to a multiple of tick
	// cur/tick and its slot, kept so that add divides at most once a level.
	curVid, curIdx int64
	bkts           []bucket
}

// wheel is the hierarchy of levels plus the bucket heap and the ready list.
// Level 0 is created up front; each overflow level is created the first time
// a timer does not fit the levels below, as in Kafka.
//
// Timers keep their exact expiration. A bucket of a coarse level expires at
// its start, as in Kafka, and its timers move down. A bucket of the finest
// level expires when its latest timer is due (never before any of its
// timers, less than one tick after the earliest) and all its timers fire.
//
// Invariants (checked by checkInvariants in the tests):
//   - a bucket that holds a timer is in the heap (an empty one may be too);
//   - a timer with expiration e in a bucket of level L starting at s
//     satisfies s <= e < s+tick(L); at level 0, e <= b.exp < s+tick(0) (e
//     may be past while the bucket waits for its latest timer); at the
//     others b.exp == s and clock < e;
//   - every bucket in the heap expires after clock;
//   - timers in ready are due: expiration <= clock.
type wheel struct {
	size   int64
	clock  int64 // current time: the last time advanced to
	levels []*level
	heap   []*bucket // min-heap of buckets by exp
	ready  bucket    // due timers waiting for the executor
}

// newWheel returns a core whose finest level has size buckets of tick units.
func newWheel(size int, tick int64) *wheel {
	w := &wheel{size: int64(size)}
	w.ready.init(-1)
	w.addLevel(tick)
	return w
}

func (w *wheel) addLevel(tick int64) *level {
	span := int64(math.MaxInt64)
	if tick <= math.MaxInt64/w.size {
		span = tick * w.size
	}
	lv := &level{tick: tick, span: span, bkts: make([]bucket, w.size)}
	w.setCur(lv, w.clock)
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
	if t.exp <= w.clock {
		w.ready.pushBack(t)
		return &w.ready
	}
	for i := 0; ; i++ {
		var lv *level
		if i == len(w.levels) {
			lv = w.addLevel(w.levels[i-1].span)
		} else {
			lv = w.levels[i]
		}
		// t.exp > clock >= cur at every level, so this cannot overflow.
		off := t.exp - lv.cur
		if off >= lv.span {
			continue
		}
		slots := off / lv.tick // buckets ahead of the current one; < size
		idx := lv.curIdx + slots
		if idx >= w.size {
			idx -= w.size
		}
		b := &lv.bkts[idx]
		b.pushBack(t)
		switch {
		case b.heapIdx < 0:
			b.exp = (lv.curVid + slots) * lv.tick
			if i == 0 {
				b.exp = t.exp
			}
			w.heapPush(b)
			return b
		case i == 0 && t.exp > b.exp:
			b.exp = t.exp // later: the driver need not wake sooner
			w.heapFix(b.heapIdx)
		}
		return nil
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

// setClock moves the current time forward to now, and every level's current
// time with it (rounded down to the level's tick). Buckets must not be left
// in the heap with exp <= now: advance pops them first.
func (w *wheel) setClock(now int64) {
	if now <= w.clock {
		return
	}
	w.clock = now
	if now-w.levels[0].cur < w.levels[0].tick {
		return // no level's tick boundary crossed (each is a multiple)
	}
	for _, lv := range w.levels {
		if now-lv.cur >= lv.tick {
			w.setCur(lv, now)
		}
	}
}

func (w *wheel) setCur(lv *level, now int64) {
	lv.curVid = now / lv.tick
	lv.cur = lv.curVid * lv.tick
	lv.curIdx = lv.curVid % w.size
}

// advance moves the core to time now: each bucket that expires at or before
// now is taken from the heap in order and the clock moved to its expiration.
// A finest-level bucket's timers are all due: the list is spliced onto the
// ready list whole. A coarser bucket's timers are added again and fall into
// finer levels, or into the ready list. advance reports whether any timer
// entered the ready list.
func (w *wheel) advance(now int64) bool {
	readied := false
	for len(w.heap) > 0 && w.heap[0].exp <= now {
		b := w.heapPop()
		w.setClock(b.exp)
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
	w.setClock(now)
	return readied
}

// next reports when the earliest bucket expires.
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
