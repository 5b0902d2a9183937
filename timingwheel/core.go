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

// bucket holds the timers of one slot of a level in a chain of blocks of
// blockLen pointers: adding a timer stores a pointer, growing never copies,
// a whole bucket moves to the ready list in O(1), and expiring it walks memory
// in order. Stopped timers stay until the bucket expires or is swept. Blocks
// come from, and go back to, the wheel's free list.
type bucket struct {
	head, tail *block
	exp        int64 // when the bucket expires, while it is in the heap
	heapIdx    int   // position in the heap; -1 when not in it
	level      int   // wheel level that owns the bucket; -1 for the ready list
}

// blockLen is the number of timers a block holds.
const blockLen = 64

// block is a piece of a bucket: t[:n] are its timers.
type block struct {
	next *block
	n    int
	t    [blockLen]*Timer
}

func (b *bucket) init(level int) {
	b.heapIdx = -1
	b.level = level
}

func (b *bucket) empty() bool { return b.head == nil }

// push appends t, taking a block from w when the last one is full.
func (b *bucket) push(w *wheel, t *Timer) {
	bl := b.tail
	if bl == nil || bl.n == blockLen {
		nb := w.newBlock()
		if bl == nil {
			b.head = nb
		} else {
			bl.next = nb
		}
		b.tail, bl = nb, nb
	}
	bl.t[bl.n] = t
	bl.n++
}

// take moves src's timers, in order, to the end of b.
func (b *bucket) take(src *bucket) {
	if src.head == nil {
		return
	}
	if b.head == nil {
		b.head = src.head
	} else {
		b.tail.next = src.head
	}
	b.tail = src.tail
	src.head, src.tail = nil, nil
}

// maxFreeBlocks bounds the wheel's free list: 1024 blocks of 64 timers
// (about 0.5 MiB) are kept for reuse, more go to the garbage collector.
const maxFreeBlocks = 1024

func (w *wheel) newBlock() *block {
	bl := w.free
	if bl == nil {
		return new(block)
	}
	w.free, bl.next = bl.next, nil
	w.nfree--
	return bl
}

// freeBlock returns bl, whose timer pointers must be nil, to the free list.
func (w *wheel) freeBlock(bl *block) {
	if w.nfree == maxFreeBlocks {
		return
	}
	bl.n = 0
	bl.next = w.free
	w.free = bl
	w.nfree++
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
//   - timers in ready are due: expiration <= clock;
//   - n counts the timers in buckets and in ready, stopped ones included.
type wheel struct {
	size      int64
	clock     int64 // current time: the last time advanced to
	levels    []*level
	heap      []*bucket // min-heap of buckets by exp
	ready     bucket    // due timers waiting for the executor, from readyHead
	readyHead int       // ready.head.t[:readyHead] are taken (nil)
	n         int
	dropped   int    // stopped timers let go of, ever
	free      *block // spare blocks, a list through next
	nfree     int
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
		w.ready.push(w, t)
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
		b.push(w, t)
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
		if b.empty() {
			continue
		}
		if b.level == 0 {
			w.ready.take(b)
			readied = true
			continue
		}
		bl := b.head
		b.head, b.tail = nil, nil
		for bl != nil {
			for i, t := range bl.t[:bl.n] {
				bl.t[i] = nil
				if t.state.Load() == timerStopped {
					w.n--
					w.dropped++
					continue
				}
				if w.place(t) == &w.ready {
					readied = true
				}
			}
			next := bl.next
			w.freeBlock(bl)
			bl = next
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

// hasReady reports whether the ready list may hold a due timer (it may
// also hold only stopped ones: then popReady returns nil).
func (w *wheel) hasReady() bool { return w.ready.head != nil }

// popReady takes the first due timer that is still pending, moving it to
// timerFired, or returns nil. Stopped timers it passes are dropped.
func (w *wheel) popReady() *Timer {
	for bl := w.ready.head; bl != nil; bl = w.ready.head {
		for w.readyHead < bl.n {
			t := bl.t[w.readyHead]
			bl.t[w.readyHead] = nil
			w.readyHead++
			w.n--
			if t.state.CompareAndSwap(timerPending, timerFired) {
				return t
			}
			w.dropped++
		}
		w.ready.head = bl.next
		if w.ready.head == nil {
			w.ready.tail = nil
		}
		w.readyHead = 0
		w.freeBlock(bl)
	}
	return nil
}

// sweep drops the stopped timers from every bucket and the ready list and
// returns how many timers are left. Buckets it empties stay in the heap
// until they expire, as if their timers had been stopped one by one.
func (w *wheel) sweep() int {
	for i := -1; w.sweepSlot(i); i++ {
	}
	return w.n
}

// sweepSlot sweeps one bucket: i = -1 is the ready list, then i counts the
// buckets of the levels in order. It reports false once i is past the last
// bucket. A driver that must not hold its lock for a whole sweep takes it
// for one slot at a time.
func (w *wheel) sweepSlot(i int) bool {
	var removed int
	switch lv := i / int(w.size); {
	case i < 0:
		removed = w.sweepBucket(&w.ready, w.readyHead)
	case lv < len(w.levels):
		removed = w.sweepBucket(&w.levels[lv].bkts[i%int(w.size)], 0)
	default:
		return false
	}
	w.n -= removed
	w.dropped += removed
	return true
}

// sweepBucket moves the timers of b that are not stopped, from index from of
// its first block on, to the front of that range, in order, frees the blocks
// left empty, and returns how many stopped timers it removed.
func (w *wheel) sweepBucket(b *bucket, from int) (removed int) {
	if b.head == nil {
		return 0
	}
	kept := 0
	dst, di := b.head, from // where the next kept timer goes
	for src, si := b.head, from; src != nil; src, si = src.next, 0 {
		for ; si < src.n; si++ {
			t := src.t[si]
			src.t[si] = nil
			if t.state.Load() == timerStopped {
				removed++
				continue
			}
			if di == blockLen {
				dst, di = dst.next, 0
			}
			dst.t[di] = t
			di++
			kept++
		}
	}
	// dst holds the last kept timer (or, kept == 0, is the head): cut after it.
	rest := dst.next
	dst.next, dst.n, b.tail = nil, di, dst
	for rest != nil {
		next := rest.next
		w.freeBlock(rest)
		rest = next
	}
	if kept == 0 && from == 0 {
		w.freeBlock(b.head)
		b.head, b.tail = nil, nil
	}
	return removed
}
