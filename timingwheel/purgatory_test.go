package timingwheel

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
)

// testOp checks the purgatory's promises from the operation's side: it counts
// its callbacks and records any TryComplete that overlaps another, runs after
// the operation ended, or overlaps OnComplete.
type testOp struct {
	ready     atomic.Bool // what TryComplete answers
	inTry     atomic.Bool
	ended     atomic.Bool // OnComplete ran, or the test's Cancel won
	tries     atomic.Int32
	completes atomic.Int32
	expires   atomic.Int32
	bad       atomic.Int32
	why       atomic.Value // string: the first violation
}

func (o *testOp) violate(s string) {
	o.bad.Add(1)
	o.why.CompareAndSwap(nil, s)
}

func (o *testOp) TryComplete() bool {
	if !o.inTry.CompareAndSwap(false, true) {
		o.violate("TryComplete concurrent with itself")
	}
	if o.ended.Load() {
		o.violate("TryComplete after the operation ended")
	}
	o.tries.Add(1)
	r := o.ready.Load()
	o.inTry.Store(false)
	return r
}

func (o *testOp) OnComplete() {
	if o.inTry.Load() {
		o.violate("OnComplete concurrent with TryComplete")
	}
	o.ended.Store(true)
	if o.completes.Add(1) != 1 {
		o.violate("OnComplete twice")
	}
}

func (o *testOp) OnExpiration() {
	if o.completes.Load() != 1 {
		o.violate("OnExpiration without exactly one OnComplete before it")
	}
	if o.expires.Add(1) != 1 {
		o.violate("OnExpiration twice")
	}
}

func (o *testOp) check(t *testing.T) {
	t.Helper()
	if o.bad.Load() != 0 {
		t.Fatalf("%d violations, first: %v", o.bad.Load(), o.why.Load())
	}
}

func newTestPurgatory[K comparable](t *testing.T, tw *TimingWheel, cfg PurgatoryConfig) *Purgatory[K] {
	t.Helper()
	p, err := NewPurgatory[K](tw, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// listedKeys counts the watch lists in all shards and fails if one is empty.
func listedKeys[K comparable](t *testing.T, p *Purgatory[K]) int {
	t.Helper()
	n := 0
	for i := range p.shards {
		s := &p.shards[i]
		s.mu.Lock()
		for k, wl := range s.lists {
			if len(wl.ops) == 0 {
				t.Errorf("empty watch list kept for key %v", k)
			}
			n++
		}
		s.mu.Unlock()
	}
	return n
}

func TestPurgatoryCompletesAtOnce(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	p := newTestPurgatory[string](t, tw, PurgatoryConfig{})
	op := &testOp{}
	op.ready.Store(true)
	d, done := p.TryCompleteElseWatch(op, time.Hour, "a")
	if !done || !d.Done() || op.completes.Load() != 1 || op.tries.Load() != 1 {
		t.Fatalf("done=%v Done()=%v completes=%d tries=%d", done, d.Done(), op.completes.Load(), op.tries.Load())
	}
	if p.Watched() != 0 || p.Pending() != 0 || listedKeys(t, p) != 0 {
		t.Fatalf("watched %d pending %d after immediate completion", p.Watched(), p.Pending())
	}
	if d.Cancel() || d.ForceComplete() {
		t.Fatal("Cancel or ForceComplete of a completed operation = true")
	}
	op.check(t)
}

func TestPurgatoryCompletedByKey(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	p := newTestPurgatory[string](t, tw, PurgatoryConfig{})
	op := &testOp{}
	d, done := p.TryCompleteElseWatch(op, time.Hour, "a")
	if done || d.Done() {
		t.Fatal("completed without being ready")
	}
	if op.tries.Load() != 2 {
		t.Fatalf("tries = %d, want 2 (before and after watching)", op.tries.Load())
	}
	if p.Watched() != 1 || p.Pending() != 1 || listedKeys(t, p) != 1 {
		t.Fatalf("watched %d pending %d", p.Watched(), p.Pending())
	}
	if n := p.CheckAndComplete("b"); n != 0 {
		t.Fatalf("CheckAndComplete(unwatched key) = %d", n)
	}
	if n := p.CheckAndComplete("a"); n != 0 || op.tries.Load() != 3 {
		t.Fatalf("CheckAndComplete(not ready) = %d, tries %d", n, op.tries.Load())
	}
	op.ready.Store(true)
	if n := p.CheckAndComplete("a"); n != 1 {
		t.Fatalf("CheckAndComplete(ready) = %d, want 1", n)
	}
	if !d.Done() || op.completes.Load() != 1 || op.expires.Load() != 0 {
		t.Fatalf("Done %v completes %d expires %d", d.Done(), op.completes.Load(), op.expires.Load())
	}
	if p.Watched() != 0 || p.Pending() != 0 || listedKeys(t, p) != 0 {
		t.Fatalf("after completion: watched %d pending %d keys %d", p.Watched(), p.Pending(), listedKeys(t, p))
	}
	if d.timer.state.Load() != timerStopped {
		t.Fatal("completed operation's timer not stopped")
	}
	if n := p.CheckAndComplete("a"); n != 0 || op.tries.Load() != 4 {
		t.Fatalf("CheckAndComplete after completion = %d, tries %d", n, op.tries.Load())
	}
	op.check(t)
}

func TestPurgatoryExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		p := newTestPurgatory[int](t, tw, PurgatoryConfig{})
		op := &testOp{}
		d, _ := p.TryCompleteElseWatch(op, 500*time.Millisecond, 7)
		time.Sleep(500*time.Millisecond - 1)
		synctest.Wait()
		if d.Done() || op.completes.Load() != 0 {
			t.Fatal("expired early")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !d.Done() || op.completes.Load() != 1 || op.expires.Load() != 1 {
			t.Fatalf("at the timeout: Done %v completes %d expires %d", d.Done(), op.completes.Load(), op.expires.Load())
		}
		if p.Pending() != 0 || p.Watched() != 1 {
			t.Fatalf("pending %d watched %d; the expired entry stays listed until swept", p.Pending(), p.Watched())
		}
		op.ready.Store(true)
		if n := p.CheckAndComplete(7); n != 0 || p.Watched() != 0 || listedKeys(t, p) != 0 {
			t.Fatalf("CheckAndComplete after expiry = %d, watched %d", n, p.Watched())
		}
		if d.Cancel() || d.ForceComplete() {
			t.Fatal("Cancel or ForceComplete after expiry = true")
		}
		op.check(t)
	})
}

func TestPurgatoryForceCompleteAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		p := newTestPurgatory[string](t, tw, PurgatoryConfig{})

		forced := &testOp{}
		d1, _ := p.TryCompleteElseWatch(forced, time.Second, "a", "b")
		if !d1.ForceComplete() {
			t.Fatal("ForceComplete of a pending op = false")
		}
		if d1.ForceComplete() || d1.Cancel() {
			t.Fatal("second ForceComplete or Cancel = true")
		}

		cancelled := &testOp{}
		d2, _ := p.TryCompleteElseWatch(cancelled, time.Second, "a")
		if !d2.Cancel() {
			t.Fatal("Cancel of a pending op = false")
		}
		cancelled.ended.Store(true) // from here TryComplete must not be called
		if d2.Cancel() || d2.ForceComplete() {
			t.Fatal("second Cancel or ForceComplete = true")
		}
		cancelled.ready.Store(true)
		if n := p.CheckAndComplete("a"); n != 0 {
			t.Fatalf("CheckAndComplete completed %d ended ops", n)
		}

		// No keys: only the timeout (or the handle) ends it.
		lonely := &testOp{}
		p.TryCompleteElseWatch(lonely, 10*time.Millisecond)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if forced.completes.Load() != 1 || forced.expires.Load() != 0 {
			t.Fatalf("forced: completes %d expires %d", forced.completes.Load(), forced.expires.Load())
		}
		if cancelled.completes.Load() != 0 || cancelled.expires.Load() != 0 {
			t.Fatalf("cancelled: completes %d expires %d", cancelled.completes.Load(), cancelled.expires.Load())
		}
		if lonely.completes.Load() != 1 || lonely.expires.Load() != 1 {
			t.Fatalf("keyless op: completes %d expires %d", lonely.completes.Load(), lonely.expires.Load())
		}
		if p.Pending() != 0 {
			t.Fatalf("pending %d", p.Pending())
		}
		p.CheckAndComplete("b")
		if p.Watched() != 0 || listedKeys(t, p) != 0 {
			t.Fatalf("watched %d after sweeping both keys", p.Watched())
		}
		for _, op := range []*testOp{forced, cancelled, lonely} {
			op.check(t)
		}
	})
}

// TestPurgatoryPurge: operations that end other than through a key stay in
// that key's list until a sweep; sweeps keep ended entries at most
// max(PurgeInterval, live entries), and drop empty lists.
func TestPurgatoryPurge(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	const interval, n = 10, 200
	p := newTestPurgatory[string](t, tw, PurgatoryConfig{PurgeInterval: interval, Shards: 4})
	ds := make([]*Delayed, n)
	for i := range n {
		ds[i], _ = p.TryCompleteElseWatch(&testOp{}, time.Hour, "hot", fmt.Sprint("k", i))
	}
	if p.Watched() != 2*n || listedKeys(t, p) != n+1 {
		t.Fatalf("watched %d keys %d", p.Watched(), listedKeys(t, p))
	}
	minWatched := p.Watched()
	for i, d := range ds {
		if i%2 == 0 {
			d.Cancel()
		} else {
			d.ForceComplete()
		}
		live := 2 * p.Pending()
		stale := p.Watched() - live
		if stale > max(interval, live) {
			t.Fatalf("after %d ended: %d stale entries, %d live", i+1, stale, live)
		}
		minWatched = min(minWatched, p.Watched())
	}
	if p.Pending() != 0 || p.Watched() > interval {
		t.Fatalf("all ended: pending %d watched %d, want <= %d", p.Pending(), p.Watched(), interval)
	}
	if keys := listedKeys(t, p); keys > interval {
		t.Fatalf("%d watch lists left for ended operations", keys)
	}
	p.purge()
	if p.Watched() != 0 || listedKeys(t, p) != 0 || p.stale.Load() != 0 {
		t.Fatalf("after a sweep: watched %d keys %d stale %d", p.Watched(), listedKeys(t, p), p.stale.Load())
	}
}

// TestPurgatoryKeyCompletionLeavesOtherKeys: an operation completed through
// one key is dropped from that key's list at once, from its other keys'
// lists when they are checked or swept.
func TestPurgatoryKeyCompletionLeavesOtherKeys(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	p := newTestPurgatory[int](t, tw, PurgatoryConfig{})
	op := &testOp{}
	p.TryCompleteElseWatch(op, time.Hour, 1, 2, 3)
	op.ready.Store(true)
	if n := p.CheckAndComplete(2); n != 1 {
		t.Fatalf("completed %d", n)
	}
	if p.Watched() != 2 || listedKeys(t, p) != 2 {
		t.Fatalf("watched %d keys %d, want the two other keys' stale entries", p.Watched(), listedKeys(t, p))
	}
	p.CheckAndComplete(1)
	p.CheckAndComplete(3)
	if p.Watched() != 0 || listedKeys(t, p) != 0 || p.stale.Load() != 0 {
		t.Fatalf("watched %d keys %d stale %d", p.Watched(), listedKeys(t, p), p.stale.Load())
	}
	op.check(t)
}

// TestPurgatoryNoLostWakeup races a watch against the change that makes the
// operation complete plus its CheckAndComplete: once both have returned, the
// operation must have completed.
func TestPurgatoryNoLostWakeup(t *testing.T) {
	leaktest.Check(t)
	rounds := 2000
	if os.Getenv("STRATA_SOAK") != "" {
		rounds = 200000
	}
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	p := newTestPurgatory[int](t, tw, PurgatoryConfig{})
	for i := range rounds {
		op := &testOp{}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			p.TryCompleteElseWatch(op, time.Hour, i)
		}()
		go func() {
			defer wg.Done()
			op.ready.Store(true)
			p.CheckAndComplete(i)
		}()
		wg.Wait()
		if op.completes.Load() != 1 {
			t.Fatalf("round %d: the operation missed its wake-up", i)
		}
		op.check(t)
	}
	if p.Pending() != 0 || p.Watched() != 0 {
		t.Fatalf("pending %d watched %d", p.Pending(), p.Watched())
	}
}

// TestPurgatoryExactlyOnce: many goroutines complete, force, cancel and
// expire the same operations at once; each must end exactly once.
func TestPurgatoryExactlyOnce(t *testing.T) {
	leaktest.Check(t)
	ops, workers := 4000, 8
	if os.Getenv("STRATA_SOAK") != "" {
		ops = 200000
	}
	tw, err := Start(Config{Tick: 100 * time.Microsecond, WheelSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPurgatory[int](t, tw, PurgatoryConfig{PurgeInterval: 50, Shards: 8})
	const keys = 16
	all := make([]*testOp, ops)
	handles := make([]atomic.Pointer[Delayed], ops)
	var cancelWins, forceWins atomic.Int32
	cancelled := make([]atomic.Bool, ops)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for {
				i := int(next.Add(1)) - 1
				if i >= ops {
					return
				}
				op := &testOp{}
				all[i] = op
				timeout := time.Duration(rng.IntN(3000)) * time.Microsecond
				if rng.IntN(10) == 0 {
					timeout = 0 // expires on a worker at once, racing the rest
				}
				k1, k2 := rng.IntN(keys), rng.IntN(keys)
				d, _ := p.TryCompleteElseWatch(op, timeout, k1, k2)
				handles[i].Store(d)
				// Meanwhile: make some ready and check random keys, and
				// force or cancel random earlier operations.
				if rng.IntN(3) == 0 {
					op.ready.Store(true)
				}
				p.CheckAndComplete(rng.IntN(keys))
				j := rng.IntN(i + 1)
				if h := handles[j].Load(); h != nil {
					switch rng.IntN(4) {
					case 0:
						if h.Cancel() {
							cancelled[j].Store(true)
							all[j].ended.Store(true)
							cancelWins.Add(1)
						}
					case 1:
						if h.ForceComplete() {
							forceWins.Add(1)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range ops { // end whatever is left
		all[i].ready.Store(true)
	}
	for k := range keys {
		p.CheckAndComplete(k)
	}
	tw.Stop() // waits for expiry callbacks in flight
	for i, op := range all {
		op.check(t)
		ended := op.completes.Load()
		if cancelled[i].Load() {
			ended++
		}
		if ended != 1 {
			t.Fatalf("op %d ended %d times (completes %d, cancelled %v)", i, ended, op.completes.Load(), cancelled[i].Load())
		}
		if op.expires.Load() > 0 && cancelled[i].Load() {
			t.Fatalf("op %d both expired and cancelled", i)
		}
	}
	if p.Pending() != 0 {
		t.Fatalf("pending %d", p.Pending())
	}
	if p.Watched() != 0 || listedKeys(t, p) != 0 {
		t.Fatalf("watched %d after every key was checked", p.Watched())
	}
	expired := 0
	for _, op := range all {
		expired += int(op.expires.Load())
	}
	t.Logf("%d ops: %d expired, %d forced, %d cancelled, the rest completed by key", ops, expired, forceWins.Load(), cancelWins.Load())
	if expired == 0 || forceWins.Load() == 0 || cancelWins.Load() == 0 {
		t.Fatal("the race did not exercise every way an operation ends")
	}
}

func TestPurgatoryConfigValidation(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	for _, cfg := range []PurgatoryConfig{{PurgeInterval: -1}, {Shards: 3}, {Shards: -4}, {Shards: 1 << 17}} {
		if _, err := NewPurgatory[int](tw, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewPurgatory(%+v) error = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := NewPurgatory[int](nil, PurgatoryConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewPurgatory(nil wheel) error = %v", err)
	}
	p := newTestPurgatory[int](t, tw, PurgatoryConfig{})
	if p.nshards != DefaultShards || p.purgeInterval != DefaultPurgeInterval {
		t.Errorf("defaults: %d shards, purge interval %d", p.nshards, p.purgeInterval)
	}
}

// TestPurgatoryAllocatesShardsOnFirstWatch: a purgatory that never parks an
// operation never allocates its shards, and then allocates them all.
func TestPurgatoryAllocatesShardsOnFirstWatch(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	p := newTestPurgatory[int](t, tw, PurgatoryConfig{})
	if n := p.CheckAndComplete(1); n != 0 {
		t.Fatalf("CheckAndComplete on a fresh purgatory = %d", n)
	}
	ready := new(atomic.Bool)
	ready.Store(true)
	if _, done := p.TryCompleteElseWatch(&benchOp{ready: ready}, time.Hour, 1); !done {
		t.Fatal("an operation that can complete was parked")
	}
	if p.shards != nil {
		t.Fatal("shards allocated without a watch")
	}
	ready.Store(false)
	d, done := p.TryCompleteElseWatch(&benchOp{ready: ready}, time.Hour, 1)
	if done || len(p.shards) != DefaultShards || p.Watched() != 1 {
		t.Fatalf("after a watch: done %v, %d shards, %d watched", done, len(p.shards), p.Watched())
	}
	ready.Store(true)
	if n := p.CheckAndComplete(1); n != 1 || !d.Done() {
		t.Fatalf("CheckAndComplete = %d, done %v", n, d.Done())
	}
}

// secondTry cannot complete when first asked, but can when asked again
// after being watched, as when data arrives in between.
type secondTry struct {
	testOp
}

func (o *secondTry) TryComplete() bool {
	o.testOp.TryComplete()
	return o.tries.Load() >= 2
}

func TestPurgatoryCompletesOnSecondTry(t *testing.T) {
	leaktest.Check(t)
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	p := newTestPurgatory[string](t, tw, PurgatoryConfig{})
	op := &secondTry{}
	d, done := p.TryCompleteElseWatch(op, time.Hour, "a", "b", "a")
	if !done || !d.Done() || op.completes.Load() != 1 {
		t.Fatalf("done %v completes %d", done, op.completes.Load())
	}
	if p.Watched() != 0 || p.Pending() != 0 || listedKeys(t, p) != 0 || p.stale.Load() != 0 {
		t.Fatalf("watched %d pending %d keys %d stale %d", p.Watched(), p.Pending(), listedKeys(t, p), p.stale.Load())
	}
	if d.timer.state.Load() != timerIdle {
		t.Fatal("a timer was armed for an operation that completed while being watched")
	}
	op.check(t)
}
