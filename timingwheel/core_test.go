package timingwheel

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// Deterministic tests of the pure core: time is a tick count the test passes.

func newCoreTimer(exp int64) *Timer {
	t := &Timer{exp: exp}
	t.state.Store(timerPending)
	return t
}

// remove stops t as Timer.Stop does (without counting the stop for the
// sweep): it reports whether t was pending. t stays in the wheel until its
// bucket expires or a sweep drops it.
func (w *wheel) remove(t *Timer) bool {
	return t.state.CompareAndSwap(timerPending, timerStopped)
}

// tickEnd is the end of the finest-level tick holding e: by then a timer due
// at e must have fired.
func tickEnd(e, tick int64) int64 { return e/tick*tick + tick }

// where tells which level and bucket hold pending timer t: the level and the
// bucket's range [start, end) in ticks; level -1 is the ready list, -2 not
// pending (stopped, fired, or never added).
func (w *wheel) where(t *Timer) (lvl int, start, end int64) {
	if t.state.Load() != timerPending {
		return -2, 0, 0
	}
	if slices.Contains(w.readyTimers(), t) {
		return -1, 0, 0
	}
	for li, lv := range w.levels {
		for bi := range lv.bkts {
			b := &lv.bkts[bi]
			if slices.Contains(b.all(0), t) {
				start := b.exp / lv.tick * lv.tick
				return li, start, start + lv.tick
			}
		}
	}
	panic("pending timer in no list of the wheel")
}

// all returns b's timers, from index from of its first block on.
func (b *bucket) all(from int) []*Timer {
	var out []*Timer
	for bl := b.head; bl != nil; bl, from = bl.next, 0 {
		out = append(out, bl.t[from:bl.n]...)
	}
	return out
}

// each yields b's timers, from index from of its first block on, without
// allocating (checkInvariants runs after every step of the model tests).
func (b *bucket) each(from int) func(func(*Timer) bool) {
	return func(yield func(*Timer) bool) {
		for bl := b.head; bl != nil; bl, from = bl.next, 0 {
			for _, t := range bl.t[from:bl.n] {
				if !yield(t) {
					return
				}
			}
		}
	}
}

// readyTimers returns the timers in the ready list, not yet taken.
func (w *wheel) readyTimers() []*Timer { return w.ready.all(w.readyHead) }

// checkBlocks verifies b's chain of blocks: the tail is the last block,
// every slot past a block's n is nil, and every slot below it a timer.
func checkBlocks(t *testing.T, b *bucket, from int) {
	// No t.Helper: it costs a stack walk, and this runs for every bucket
	// after every step of the model tests.
	if (b.head == nil) != (b.tail == nil) {
		t.Fatalf("bucket head %p tail %p", b.head, b.tail)
	}
	for bl := b.head; bl != nil; bl, from = bl.next, 0 {
		if bl.next == nil && bl != b.tail {
			t.Fatal("the last block is not the bucket's tail")
		}
		if bl.n < 0 || bl.n > blockLen {
			t.Fatalf("block holds %d", bl.n)
		}
		for i, x := range bl.t {
			if (i >= from && i < bl.n) != (x != nil) {
				t.Fatalf("block slot %d of [%d, %d): %v", i, from, bl.n, x)
			}
		}
	}
}

// readyLen counts the pending timers in the ready list.
func (w *wheel) readyLen() int {
	n := 0
	for _, x := range w.readyTimers() {
		if x.state.Load() == timerPending {
			n++
		}
	}
	return n
}

// checkInvariants verifies the core's structure: every non-empty bucket is in
// the heap, timers lie inside their bucket's range, the heap is ordered, and
// the ready list holds only due timers.
func checkInvariants(t *testing.T, w *wheel) {
	t.Helper()
	inHeap, held := 0, 0
	for li, lv := range w.levels {
		if lv.cur%lv.tick != 0 || lv.cur > w.clock || w.clock-lv.cur >= lv.tick {
			t.Fatalf("level %d: cur %d is not the clock %d rounded down to tick %d", li, lv.cur, w.clock, lv.tick)
		}
		if lv.curVid*lv.tick != lv.cur || lv.curIdx != lv.curVid%w.size {
			t.Fatalf("level %d: curVid %d curIdx %d disagree with cur %d", li, lv.curVid, lv.curIdx, lv.cur)
		}
		for bi := range lv.bkts {
			b := &lv.bkts[bi]
			if b.level != li {
				t.Fatalf("bucket %d of level %d says level %d", bi, li, b.level)
			}
			checkBlocks(t, b, 0)
			if !b.empty() && b.heapIdx < 0 {
				t.Fatalf("level %d bucket %d: holds timers, not in the heap", li, bi)
			}
			if b.heapIdx < 0 {
				continue
			}
			inHeap++
			if w.heap[b.heapIdx] != b {
				t.Fatalf("level %d bucket %d: heap[%d] is another bucket", li, bi, b.heapIdx)
			}
			start := b.exp / lv.tick * lv.tick
			if (li > 0 && b.exp != start) || int(start/lv.tick%w.size) != bi {
				t.Fatalf("level %d bucket %d: exp %d does not belong to this slot", li, bi, b.exp)
			}
			if b.exp <= w.clock {
				t.Fatalf("level %d bucket %d: expired (%d) at %d but still in the heap", li, bi, b.exp, w.clock)
			}
			for tm := range b.each(0) {
				held++
				if tm.exp < start || tm.exp-start >= lv.tick || (li == 0 && tm.exp > b.exp) {
					t.Fatalf("timer exp %d outside bucket [%d, %d) (exp %d) of level %d", tm.exp, start, start+lv.tick, b.exp, li)
				}
				if tm.exp <= w.clock && li > 0 {
					t.Fatalf("timer exp %d still in level %d at time %d", tm.exp, li, w.clock)
				}
			}
		}
	}
	if inHeap != len(w.heap) {
		t.Fatalf("%d non-empty buckets, heap holds %d", inHeap, len(w.heap))
	}
	for i := 1; i < len(w.heap); i++ {
		if w.heap[(i-1)/2].exp > w.heap[i].exp {
			t.Fatalf("heap out of order at %d", i)
		}
	}
	checkBlocks(t, &w.ready, w.readyHead)
	for tm := range w.ready.each(w.readyHead) {
		held++
		if tm.exp > w.clock {
			t.Fatalf("timer exp %d in ready list at time %d", tm.exp, w.clock)
		}
	}
	if held != w.n {
		t.Fatalf("wheel holds %d timers, n = %d", held, w.n)
	}
}

func drainReady(w *wheel) []*Timer {
	var out []*Timer
	for t := w.popReady(); t != nil; t = w.popReady() {
		out = append(out, t)
	}
	return out
}

// TestWorkedExample is the example of the design notes, in Kafka's
// arithmetic: 1 ms tick, 20 buckets, a timer due at 8903 ms.
func TestWorkedExample(t *testing.T) {
	w := newWheel(20, 1)
	tm := newCoreTimer(8903)
	w.add(tm)
	checkInvariants(t, w)

	if got := len(w.levels); got != 4 {
		t.Fatalf("levels = %d, want 4", got)
	}
	for i, want := range []struct{ tick, span int64 }{{1, 20}, {20, 400}, {400, 8000}, {8000, 160000}} {
		if lv := w.levels[i]; lv.tick != want.tick || lv.span != want.span {
			t.Fatalf("level %d: tick %d span %d, want %d %d", i, lv.tick, lv.span, want.tick, want.span)
		}
	}

	steps := []struct {
		at         int64 // advance to this time
		level      int   // then the timer is in this level (-1: due)
		start, end int64 // bucket range
	}{
		{0, 3, 8000, 16000},
		{7999, 3, 8000, 16000},
		{8000, 2, 8800, 9200},
		{8799, 2, 8800, 9200},
		{8800, 1, 8900, 8920},
		{8899, 1, 8900, 8920},
		{8900, 0, 8903, 8904},
		{8902, 0, 8903, 8904},
		{8903, -1, 0, 0},
	}
	for _, s := range steps {
		w.advance(s.at)
		checkInvariants(t, w)
		lvl, start, end := w.where(tm)
		if lvl != s.level || start != s.start || end != s.end {
			t.Fatalf("at %d ms: level %d [%d, %d), want level %d [%d, %d)", s.at, lvl, start, end, s.level, s.start, s.end)
		}
		if s.level >= 0 {
			if next, _ := w.next(); next != s.start {
				t.Fatalf("at %d ms: next wake-up %d, want %d", s.at, next, s.start)
			}
			if w.readyLen() != 0 {
				t.Fatalf("at %d ms: fired early", s.at)
			}
		}
	}
	if got := drainReady(w); len(got) != 1 || got[0] != tm {
		t.Fatalf("ready = %v, want the timer", got)
	}
	if lvl, _, _ := w.where(tm); lvl != -2 {
		t.Fatalf("fired timer still listed at level %d", lvl)
	}
	if len(w.heap) != 0 {
		t.Fatalf("heap holds %d buckets after the only timer fired", len(w.heap))
	}
}

func TestOverflowLevelsCreatedOnDemand(t *testing.T) {
	w := newWheel(20, 1)
	if len(w.levels) != 1 {
		t.Fatalf("new wheel has %d levels", len(w.levels))
	}
	w.add(newCoreTimer(19))
	if len(w.levels) != 1 {
		t.Fatalf("timer within the first span made %d levels", len(w.levels))
	}
	w.add(newCoreTimer(20))
	if len(w.levels) != 2 {
		t.Fatalf("timer at the first span made %d levels, want 2", len(w.levels))
	}
	far := newCoreTimer(math.MaxInt64) // saturates to maxExp
	w.add(far)
	checkInvariants(t, w)
	top := w.levels[len(w.levels)-1]
	if top.span != math.MaxInt64 {
		t.Fatalf("top level span %d, want saturated", top.span)
	}
	if far.exp != maxExp {
		t.Fatalf("far timer exp %d, want %d", far.exp, maxExp)
	}
	// 20^14 < maxExp < 20^15: levels 0..14 hold everything.
	if len(w.levels) != 15 {
		t.Fatalf("levels = %d, want 15", len(w.levels))
	}
	if !w.remove(far) {
		t.Fatal("remove far timer")
	}
	checkInvariants(t, w)
}

func TestCoreRemove(t *testing.T) {
	w := newWheel(8, 1)
	a, b := newCoreTimer(5), newCoreTimer(5)
	w.add(a)
	w.add(b)
	if len(w.heap) != 1 {
		t.Fatalf("two timers in one bucket: heap %d", len(w.heap))
	}
	if !w.remove(a) {
		t.Fatal("remove pending timer = false")
	}
	if w.remove(a) {
		t.Fatal("second remove = true")
	}
	if !w.remove(b) {
		t.Fatal("remove b = false")
	}
	checkInvariants(t, w)
	// The emptied bucket stays queued until it expires, then leaves with
	// nothing to fire.
	if next, ok := w.next(); !ok || next != 5 {
		t.Fatalf("next = %d %v, want the emptied bucket at 5", next, ok)
	}
	// Its stopped timers reach the ready list and go no further.
	w.advance(5)
	if len(w.heap) != 0 || w.readyLen() != 0 || w.popReady() != nil || w.n != 0 {
		t.Fatalf("advance over a bucket of stopped timers: heap %d, ready %d, held %d", len(w.heap), w.readyLen(), w.n)
	}
	checkInvariants(t, w)

	// A due timer can still be removed before the executor takes it.
	c := newCoreTimer(7)
	w.add(c)
	w.advance(7)
	if w.readyLen() != 1 {
		t.Fatalf("ready = %d", w.readyLen())
	}
	if !w.remove(c) || w.readyLen() != 0 {
		t.Fatal("remove from ready list")
	}
	// After the executor took it, remove reports false.
	d := newCoreTimer(9)
	w.add(d)
	w.advance(9)
	if got := drainReady(w); len(got) != 1 {
		t.Fatalf("ready = %d timers", len(got))
	}
	if w.remove(d) {
		t.Fatal("remove after fire = true")
	}
	checkInvariants(t, w)
}

// TestCoreSweep: stopped timers stay where they are until a sweep (or their
// bucket's expiry) drops them; the sweep keeps the others, in order.
func TestCoreSweep(t *testing.T) {
	w := newWheel(20, 1)
	var all []*Timer
	for i := range 3000 {
		tm := newCoreTimer(int64(1 + i%9000*3)) // levels 0 to 2
		w.add(tm)
		all = append(all, tm)
	}
	w.advance(0)
	due := newCoreTimer(0) // in the ready list
	w.add(due)
	all = append(all, due)
	var kept []*Timer
	for i, tm := range all {
		if i%3 == 0 {
			if !w.remove(tm) {
				t.Fatal("remove of a pending timer = false")
			}
		} else {
			kept = append(kept, tm)
		}
	}
	if w.n != len(all) {
		t.Fatalf("before the sweep the wheel holds %d, want %d (stopped ones stay)", w.n, len(all))
	}
	if left := w.sweep(); left != len(kept) || w.dropped != len(all)-len(kept) {
		t.Fatalf("sweep left %d dropped %d, want %d and %d", left, w.dropped, len(kept), len(all)-len(kept))
	}
	checkInvariants(t, w)
	for _, lv := range w.levels {
		for i := range lv.bkts {
			b := &lv.bkts[i]
			ts := b.all(0)
			for j, tm := range ts {
				if tm.state.Load() != timerPending {
					t.Fatal("a stopped timer survived the sweep")
				}
				if j > 0 && ts[j-1].exp > tm.exp && lv == w.levels[0] {
					t.Fatal("sweep reordered a bucket")
				}
			}
		}
	}
	// Every kept timer fires, each once, and nothing else does.
	w.advance(1 << 20)
	got := drainReady(w)
	if len(got) != len(kept) {
		t.Fatalf("fired %d timers, want %d", len(got), len(kept))
	}
	if w.n != 0 || len(w.heap) != 0 {
		t.Fatalf("after firing everything: held %d, heap %d", w.n, len(w.heap))
	}
}

func TestCoreDueOnAdd(t *testing.T) {
	w := newWheel(20, 1)
	w.advance(100)
	for _, exp := range []int64{100, 99, 0, -5} {
		tm := newCoreTimer(exp)
		if b := w.add(tm); b != &w.ready {
			t.Fatalf("exp %d at time 100 went to a bucket", exp)
		}
		if lvl, _, _ := w.where(tm); lvl != -1 {
			t.Fatalf("exp %d at time 100: level %d, want ready", exp, lvl)
		}
	}
	tm := newCoreTimer(101)
	if b := w.add(tm); b == nil || b.exp != 101 {
		t.Fatalf("exp 101 at time 100: bucket %v", b)
	}
	checkInvariants(t, w)
}

// TestCoreManyTimersOneBucket: the driver wakes per bucket, not per timer.
func TestCoreManyTimersOneBucket(t *testing.T) {
	w := newWheel(20, 1)
	timers := make([]*Timer, 10000)
	for i := range timers {
		timers[i] = newCoreTimer(50)
		w.add(timers[i])
	}
	if len(w.heap) != 1 {
		t.Fatalf("10000 timers due together use %d buckets", len(w.heap))
	}
	wakes := 0
	for {
		next, ok := w.next()
		if !ok {
			break
		}
		wakes++
		w.advance(next)
		checkInvariants(t, w)
	}
	if wakes != 2 { // [40,60) on level 1, then 50 on level 0
		t.Fatalf("wakes = %d, want 2", wakes)
	}
	if got := drainReady(w); len(got) != len(timers) {
		t.Fatalf("fired %d, want %d", len(got), len(timers))
	}
}

// runCoreModel applies a random sequence of adds, removes and advances to the
// core and to a trivial model (a set of due times), checking after each step
// that no timer fired early or twice, and every timer whose finest tick has
// passed has fired.
func runCoreModel(t *testing.T, seed uint64, size int, tick int64, steps int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := newWheel(size, tick)
	pending := map[*Timer]bool{}
	var live []*Timer
	now := int64(0)
	fired := 0
	for step := range steps {
		switch r := rng.IntN(10); {
		case r < 5: // add, with delays across all levels
			var d int64
			switch rng.IntN(4) {
			case 0:
				d = rng.Int64N(int64(size) * tick) // finest level (or due now)
			case 1:
				d = rng.Int64N(int64(size*size*size) * tick)
			case 2:
				d = rng.Int64N(1 << 40)
			default:
				d = -rng.Int64N(3)
			}
			tm := newCoreTimer(now + d)
			w.add(tm)
			pending[tm] = true
			live = append(live, tm)
		case r < 7: // remove a random timer, pending or not
			if len(live) == 0 {
				continue
			}
			i := rng.IntN(len(live))
			tm := live[i]
			got := w.remove(tm)
			if got != pending[tm] {
				t.Fatalf("seed %d step %d: remove = %v, model says pending = %v", seed, step, got, pending[tm])
			}
			delete(pending, tm)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		case r == 7 && rng.IntN(4) == 0: // sweep the stopped timers out
			before := w.n
			left := w.sweep()
			if inWheel := len(pending); left != inWheel || w.n != left || w.n > before {
				t.Fatalf("seed %d step %d: sweep left %d (n %d, was %d), %d pending", seed, step, left, w.n, before, inWheel)
			}
		default: // advance, sometimes far
			switch rng.IntN(3) {
			case 0:
				now += 1 + rng.Int64N(tick)
			case 1:
				now += rng.Int64N(int64(size*size) * tick)
			default:
				now += rng.Int64N(1 << 30)
			}
			w.advance(now)
			for _, tm := range drainReady(w) {
				if !pending[tm] {
					t.Fatalf("seed %d step %d: a timer fired that is not pending (twice or after remove)", seed, step)
				}
				if tm.exp > now {
					t.Fatalf("seed %d step %d: timer due %d fired early at %d", seed, step, tm.exp, now)
				}
				delete(pending, tm)
				fired++
			}
			for tm := range pending {
				if tm.exp <= 0 || tickEnd(tm.exp, tick) <= now {
					t.Fatalf("seed %d step %d: timer due %d not fired at %d", seed, step, tm.exp, now)
				}
			}
		}
		checkInvariants(t, w)
	}
	if fired == 0 && steps > 100 {
		t.Fatalf("seed %d: nothing fired in %d steps", seed, steps)
	}
}

func TestCoreRandomAgainstModel(t *testing.T) {
	rounds, steps := 20, 2000
	if os.Getenv("STRATA_SOAK") != "" {
		rounds, steps = 500, 20000
	}
	base := rand.Uint64()
	for i := range rounds {
		seed := base + uint64(i)
		size := []int{2, 3, 8, 20, 64}[i%5]
		tick := []int64{1, 7, 1000}[i%3]
		t.Logf("seed %d size %d tick %d", seed, size, tick) // replay: runCoreModel(t, seed, size, tick, steps)
		runCoreModel(t, seed, size, tick, steps)
	}
}

// TestCoreNeverEarlyTickByTick advances one tick at a time and checks that
// each timer fires exactly at its due tick.
func TestCoreNeverEarlyTickByTick(t *testing.T) {
	w := newWheel(20, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	due := map[*Timer]int64{}
	for range 5000 {
		tm := newCoreTimer(1 + rng.Int64N(30000))
		due[tm] = tm.exp
		w.add(tm)
	}
	for now := int64(1); now <= 30000; now++ {
		w.advance(now)
		for _, tm := range drainReady(w) {
			if due[tm] != now {
				t.Fatalf("timer due %d fired at %d", due[tm], now)
			}
			delete(due, tm)
		}
	}
	if len(due) != 0 {
		t.Fatalf("%d timers never fired", len(due))
	}
	checkInvariants(t, w)
}

// FuzzCore drives the core with operations decoded from the input and
// compares it with the model. Seeds make it a unit test.
func FuzzCore(f *testing.F) {
	f.Add([]byte{0, 5, 0, 30, 2, 10, 1, 0, 2, 255})
	f.Add([]byte{0, 0, 0, 0, 2, 1, 2, 1})
	f.Add([]byte{3, 200, 0, 250, 0, 1, 2, 0, 2, 255, 2, 255, 1, 1})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 1, 1, 2, 2, 0, 9, 2, 100, 1, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const tick = 3
		w := newWheel(4, tick)
		var live []*Timer
		pending := map[*Timer]bool{}
		now := int64(0)
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int64(ops[i+1])
			switch ops[i] % 4 {
			case 0:
				tm := newCoreTimer(now + arg)
				w.add(tm)
				live = append(live, tm)
				pending[tm] = true
			case 1:
				if len(live) == 0 {
					continue
				}
				tm := live[int(arg)%len(live)]
				if w.remove(tm) != pending[tm] {
					t.Fatal("remove disagrees with model")
				}
				delete(pending, tm)
				if arg%2 == 1 {
					if left := w.sweep(); left != len(pending) {
						t.Fatalf("sweep left %d, %d pending", left, len(pending))
					}
				}
			case 2:
				now += arg
				w.advance(now)
				for _, tm := range drainReady(w) {
					if !pending[tm] || tm.exp > now {
						t.Fatalf("bad fire: pending=%v exp=%d now=%d", pending[tm], tm.exp, now)
					}
					delete(pending, tm)
				}
				for tm := range pending {
					if tickEnd(tm.exp, tick) <= now {
						t.Fatalf("timer due %d not fired at %d", tm.exp, now)
					}
				}
			case 3:
				now += arg << 20
				w.advance(now)
				for _, tm := range drainReady(w) {
					if !pending[tm] || tm.exp > now {
						t.Fatal("bad fire")
					}
					delete(pending, tm)
				}
			}
			checkInvariants(t, w)
		}
		exps := make([]int64, 0, len(pending))
		for tm := range pending {
			exps = append(exps, tm.exp)
		}
		slices.Sort(exps)
		for _, e := range exps { // by the end of its tick every timer fired
			now = max(tickEnd(e, tick), now)
			w.advance(now)
		}
		for _, tm := range drainReady(w) {
			delete(pending, tm)
		}
		if len(pending) != 0 {
			t.Fatalf("%d timers never fired", len(pending))
		}
	})
}
