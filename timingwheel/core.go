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

// Timer states. [Timer.Stop] and the executor taking a due timer race for the
// one transition out of timerPending, an atomic compare-and-swap; the loser
// does nothing. A stopped timer is not unlinked at once (that would need the
// wheel's lock and two cache misses on its neighbours): it stays in its
// bucket, inert, until the bucket expires or a sweep drops it.
const (
	timerIdle    uint32 = iota // never scheduled, or AfterFunc on a stopped wheel
	timerPending               // in the wheel, waiting
	timerStopped               // stopped before it fired
	timerFired                 // taken by the executor
)

// bucket holds the timers of one slot of a level, in a slice: adding a
// timer appends a pointer, and expiring the bucket walks memory in order.
// Stopped timers stay in the slice until the bucket expires or is swept.
type bucket struct {
	timers  []*Timer
	exp     int64 // when the bucket expires, while it is in the heap
	heapIdx int   // position in the heap; -1 when not in it
	level   int   // wheel level that owns the bucket; -1 for the ready list
}

func (b *bucket) init(level int) {
	b.heapIdx = -1
	b.level = level
}

// reset empties b, dropping its references; a large slice is let go rather
// than kept for the next round.
func (b *bucket) reset() {
	if cap(b.timers) > maxKeptCap {
		b.timers = nil
		return
	}
	clear(b.timers)
	b.timers = b.timers[:0]
}

// maxKeptCap is the largest slice an emptied bucket keeps for reuse.
const maxKeptCap = 4096

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
//   - timers in ready are due: expiration <= clock;
//   - n counts the timers in buckets and in ready, stopped ones included.
type wheel struct {
	size      int64
	clock     int64 // current time: the last time advanced to
	levels    []*level
	heap      []*bucket // min-heap of buckets by exp
	ready     bucket    // due timers waiting for the executor, from readyHead
	readyHead int
	n         int
	dropped   int // stopped timers let go of, ever
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

// add puts t (t.exp set, state timerPending) where it belongs: in the ready
// list if it is due (then it returns &w.ready), else in the bucket of the
// finest level whose span covers it. It returns that bucket if it has just
// entered the heap (its expiration may be earlier than what the driver sleeps
// for), else nil.
func (w *wheel) add(t *Timer) *bucket {
	w.n++
	return w.place(t)
}

// place is add for a timer already counted in n.
func (w *wheel) place(t *Timer) *bucket {
	if t.exp > maxExp {
		t.exp = maxExp
	}
	if t.exp <= w.clock {
		w.ready.timers = append(w.ready.timers, t)
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
		b.timers = append(b.timers, t)
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

// remove stops t: it reports whether t was pending (false: it already went
// to the executor, or was stopped, or never added). t stays where it is
// until its bucket expires or a sweep drops it.
func (w *wheel) remove(t *Timer) bool {
	return t.state.CompareAndSwap(timerPending, timerStopped)
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
// A finest-level bucket's timers are all due and go to the ready list whole.
// A coarser bucket's timers are placed again and fall into finer levels, or
// into the ready list; stopped ones are dropped. advance reports whether any
// timer entered the ready list.
func (w *wheel) advance(now int64) bool {
	readied := false
	for len(w.heap) > 0 && w.heap[0].exp <= now {
		b := w.heapPop()
		w.setClock(b.exp)
		if len(b.timers) == 0 {
			continue
		}
		if b.level == 0 {
			if w.readyHead == len(w.ready.timers) {
				// Nothing queued: take b's slice, give it the old one.
				w.ready.timers, b.timers = b.timers, w.ready.timers
				w.readyHead = 0
			} else {
				w.ready.timers = append(w.ready.timers, b.timers...)
			}
			b.reset()
			readied = true
			continue
		}
		for i, t := range b.timers {
			b.timers[i] = nil
			if t.state.Load() == timerStopped {
				w.n--
				w.dropped++
				continue
			}
			if w.place(t) == &w.ready {
				readied = true
			}
		}
		b.reset()
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

// hasReady reports whether the ready list may hold a due timer (it may
// also hold only stopped ones: then popReady returns nil).
func (w *wheel) hasReady() bool { return w.readyHead < len(w.ready.timers) }

// popReady takes the first due timer that is still pending, moving it to
// timerFired, or returns nil. Stopped timers it passes are dropped.
func (w *wheel) popReady() *Timer {
	for w.readyHead < len(w.ready.timers) {
		t := w.ready.timers[w.readyHead]
		w.ready.timers[w.readyHead] = nil
		w.readyHead++
		w.n--
		if t.state.CompareAndSwap(timerPending, timerFired) {
			return t
		}
		w.dropped++
	}
	w.ready.reset()
	w.readyHead = 0
	return nil
}

// sweep drops the stopped timers from every bucket and the ready list and
// returns how many timers are left. Buckets it empties stay in the heap
// until they expire, as if their timers had been stopped one by one.
func (w *wheel) sweep() int {
	q := w.ready.timers[w.readyHead:]
	kept := sweepTimers(q)
	clear(w.ready.timers[:w.readyHead])
	clear(q[kept:])
	w.ready.timers = w.ready.timers[:w.readyHead+kept]
	n := kept
	for _, lv := range w.levels {
		for i := range lv.bkts {
			b := &lv.bkts[i]
			k := sweepTimers(b.timers)
			clear(b.timers[k:])
			b.timers = b.timers[:k]
			n += k
		}
	}
	w.dropped += w.n - n
	w.n = n
	return n
}

// sweepTimers moves the timers of ts that are not stopped to its front, in
// order, and returns how many there are.
func sweepTimers(ts []*Timer) int {
	k := 0
	for i, t := range ts {
		if t.state.Load() == timerStopped {
			continue
		}
		if k != i {
			ts[k] = t
		}
		k++
	}
	return k
}
