package timingwheel

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/clock/clocktest"

	"github.com/strata-log/strata/internal/leaktest"
)

// Driver tests. They run in a testing/synctest bubble: time is virtual, moves
// only when every goroutine of the bubble is blocked, and a time.Sleep there
// costs no real time. synctest.Test also fails if a goroutine is left behind.

// fireTimes is when each timer, all set at the wheel's start with the given
// delays and never stopped, fires: timers due within the same tick of the
// finest level fire together, when the latest of them is due.
func fireTimes(delays []time.Duration, tick time.Duration) []time.Duration {
	latest := map[time.Duration]time.Duration{}
	for _, d := range delays {
		latest[d/tick] = max(latest[d/tick], d)
	}
	out := make([]time.Duration, len(delays))
	for i, d := range delays {
		out[i] = latest[d/tick]
	}
	return out
}

func TestFiresWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = time.Millisecond
		tw := New(tick, 20)
		defer tw.Stop()
		start := time.Now()
		delays := []time.Duration{
			500 * time.Microsecond, tick, tick + 1, 19 * tick, 20 * tick, 399 * tick,
			8903 * tick, 3 * time.Minute, 26 * time.Hour,
		}
		got := make([]time.Duration, len(delays))
		done := make(chan int)
		for i, d := range delays {
			tw.AfterFunc(d, func() {
				got[i] = time.Since(start)
				done <- i
			})
		}
		for range delays {
			<-done
		}
		want := fireTimes(delays, tick)
		for i, d := range delays {
			if got[i] != want[i] {
				t.Errorf("delay %v fired after %v, want %v", d, got[i], want[i])
			}
		}
		// The two timers sharing the tick [1ms, 2ms) fire together.
		if want[1] != tick+1 {
			t.Fatalf("fireTimes: %v", want)
		}
	})
}

func TestNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		var fired atomic.Bool
		const d = 8903 * time.Millisecond
		tw.AfterFunc(d, func() { fired.Store(true) })
		time.Sleep(d - 1)
		synctest.Wait()
		if fired.Load() {
			t.Fatal("fired 1ns early")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !fired.Load() {
			t.Fatal("not fired when due")
		}
	})
}

// TestSameTickFiresTogether: timers due within one tick of the finest level
// fire together when the latest is due; the tick grid starts with the wheel.
func TestSameTickFiresTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = 10 * time.Millisecond
		tw := New(tick, 8)
		defer tw.Stop()
		start := time.Now()
		time.Sleep(3 * time.Millisecond) // off the tick grid
		var a, b, c atomic.Int64
		tw.AfterFunc(18*time.Millisecond, func() { a.Store(int64(time.Since(start))) }) // due 21 ms
		tw.AfterFunc(25*time.Millisecond, func() { b.Store(int64(time.Since(start))) }) // due 28 ms
		tw.AfterFunc(28*time.Millisecond, func() { c.Store(int64(time.Since(start))) }) // due 31 ms
		time.Sleep(time.Second)
		for _, x := range []struct {
			name string
			got  *atomic.Int64
			want time.Duration
		}{{"due 21ms", &a, 28 * time.Millisecond}, {"due 28ms", &b, 28 * time.Millisecond}, {"due 31ms", &c, 31 * time.Millisecond}} {
			if got := time.Duration(x.got.Load()); got != x.want {
				t.Errorf("timer %s fired at %v, want %v", x.name, got, x.want)
			}
		}
	})
}

func TestZeroAndNegativeDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		start := time.Now()
		done := make(chan time.Duration, 2)
		tw.AfterFunc(0, func() { done <- time.Since(start) })
		tw.AfterFunc(-time.Hour, func() { done <- time.Since(start) })
		for range 2 {
			if d := <-done; d != 0 {
				t.Fatalf("due timer ran after %v", d)
			}
		}
	})
}

func TestTimerStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		var fired atomic.Int32
		a := tw.AfterFunc(50*time.Millisecond, func() { fired.Add(1) })
		time.Sleep(20 * time.Millisecond)
		if !a.Stop() {
			t.Fatal("Stop before fire = false")
		}
		if a.Stop() {
			t.Fatal("second Stop = true")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if fired.Load() != 0 {
			t.Fatal("stopped timer fired")
		}

		b := tw.AfterFunc(10*time.Millisecond, func() { fired.Add(1) })
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if fired.Load() != 1 {
			t.Fatal("timer did not fire")
		}
		if b.Stop() {
			t.Fatal("Stop after fire = true")
		}

		var zero Timer
		if zero.Stop() {
			t.Fatal("Stop of a zero Timer = true")
		}
	})
}

func TestCallbackMayUseTheWheel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		done := make(chan bool)
		var self *Timer
		var mu sync.Mutex
		mu.Lock()
		self = tw.AfterFunc(5*time.Millisecond, func() {
			mu.Lock()
			stopped := self.Stop()
			mu.Unlock()
			tw.AfterFunc(5*time.Millisecond, func() { done <- stopped })
		})
		mu.Unlock()
		if <-done {
			t.Fatal("a timer's Stop from its own callback returned true")
		}
	})
}

func TestStopWaitsAndFiresNothingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		release := make(chan struct{})
		var running, finished atomic.Bool
		var late atomic.Int32
		tw.AfterFunc(time.Millisecond, func() {
			running.Store(true)
			<-release
			finished.Store(true)
		})
		for i := range 100 {
			tw.AfterFunc(time.Duration(2+i)*time.Millisecond, func() { late.Add(1) })
		}
		pending := tw.AfterFunc(time.Hour, func() { late.Add(1) })
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !running.Load() {
			t.Fatal("first callback not running")
		}
		// The second worker runs the timers due meanwhile.
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		firedBeforeStop := late.Load()
		if firedBeforeStop != 50 { // due at 2..51 ms
			t.Fatalf("%d timers fired by 51ms with one worker blocked, want 50", firedBeforeStop)
		}

		stopped := make(chan struct{})
		go func() {
			tw.Stop()
			close(stopped)
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a callback was running")
		default:
		}
		close(release)
		<-stopped
		if !finished.Load() {
			t.Fatal("Stop returned before the running callback finished")
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if late.Load() != firedBeforeStop {
			t.Fatalf("%d callbacks ran after Stop", late.Load()-firedBeforeStop)
		}
		if !pending.Stop() {
			t.Fatal("a timer abandoned by Stop: its Stop should report it never fired")
		}
		after := tw.AfterFunc(time.Millisecond, func() { late.Add(1) })
		time.Sleep(time.Second)
		synctest.Wait()
		if late.Load() != firedBeforeStop {
			t.Fatal("AfterFunc after Stop fired")
		}
		if after.Stop() {
			t.Fatal("Stop of a timer made after the wheel stopped = true")
		}
		tw.Stop() // idempotent
	})
}

// TestSlowCallbackDoesNotStallClock: with every worker blocked, the driver
// still moves due timers to the queue on time, and AfterFunc and Stop do not
// block; the queued callbacks run when a worker frees up.
func TestSlowCallbackDoesNotStallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw, err := Start(Config{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer tw.Stop()
		release := make(chan struct{})
		tw.AfterFunc(time.Millisecond, func() { <-release })
		var ran atomic.Int32
		var timers []*Timer
		for i := range 10 {
			timers = append(timers, tw.AfterFunc(time.Duration(2+i)*time.Millisecond, func() { ran.Add(1) }))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		tw.mu.Lock()
		queued := tw.w.readyLen()
		tw.mu.Unlock()
		if queued != 10 || ran.Load() != 0 {
			t.Fatalf("queued %d ran %d, want 10 queued, 0 run", queued, ran.Load())
		}
		if !timers[0].Stop() {
			t.Fatal("Stop of a due, queued timer = false")
		}
		close(release)
		synctest.Wait()
		if ran.Load() != 9 {
			t.Fatalf("ran %d after the worker freed up, want 9", ran.Load())
		}
	})
}

func TestManyTimersVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = time.Millisecond
		tw := New(tick, 20)
		defer tw.Stop()
		rng := rand.New(rand.NewPCG(7, 11))
		const n = 20000
		start := time.Now()
		delays := make([]time.Duration, n)
		firedAt := make([]atomic.Int64, n)
		timers := make([]*Timer, n)
		for i := range n {
			delays[i] = time.Duration(rng.Int64N(int64(10*time.Second))) + time.Millisecond
			timers[i] = tw.AfterFunc(delays[i], func() { firedAt[i].Store(int64(time.Since(start)) + 1) })
		}
		stopped := make([]bool, n)
		for i := range n {
			if rng.IntN(2) == 0 {
				stopped[i] = true
				if !timers[i].Stop() {
					t.Fatalf("timer %d: Stop before any time passed = false", i)
				}
			}
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		for i := range n {
			got := time.Duration(firedAt[i].Load() - 1)
			switch {
			case stopped[i] && got >= 0:
				t.Fatalf("stopped timer %d fired", i)
			case !stopped[i] && (got < delays[i] || got >= delays[i]/tick*tick+tick):
				t.Fatalf("timer %d (delay %v) fired at %v, want within its tick [%v, %v)", i, delays[i], got, delays[i], delays[i]/tick*tick+tick)
			}
		}
	})
}

// TestStoppedTimersAreSwept: Stop only marks a timer, and the wheel lets go
// of stopped timers in sweeps, so a caller that keeps scheduling and stopping
// long timers does not make the wheel grow.
func TestStoppedTimersAreSwept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		f := func() {}
		const live = 100
		for range live {
			tw.AfterFunc(time.Hour, f)
		}
		peak := 0
		for range 100 * sweepMin {
			if !tw.AfterFunc(time.Hour, f).Stop() {
				t.Fatal("Stop of a pending timer = false")
			}
			tw.mu.Lock()
			peak = max(peak, tw.w.n)
			tw.mu.Unlock()
		}
		// A sweep starts once sweepMin stopped timers are at least half of
		// those held: at most 2·sweepMin, or 2·live, plus the one just added.
		if limit := 2*max(sweepMin, live) + 1; peak > limit {
			t.Fatalf("the wheel held up to %d timers, want at most %d", peak, limit)
		}
		tw.mu.Lock()
		dropped := tw.w.dropped
		tw.mu.Unlock()
		if dropped < 99*sweepMin {
			t.Fatalf("sweeps dropped %d stopped timers, want most of %d", dropped, 100*sweepMin)
		}
	})
}

// TestStopRacesFire: when Stop races the executor for a due timer, exactly
// one wins: Stop reports true and the callback never runs, or Stop reports
// false and the callback runs once.
func TestStopRacesFire(t *testing.T) {
	leaktest.Check(t)
	tw := New(50*time.Microsecond, 20)
	const n, stoppers = 4000, 4
	fired := make([]atomic.Int32, n)
	done := make(chan int, n)
	timers := make([]*Timer, n)
	for i := range n {
		timers[i] = tw.AfterFunc(time.Duration(i%40)*25*time.Microsecond, func() {
			fired[i].Add(1)
			done <- i
		})
	}
	stopped := make([]bool, n)
	var wg sync.WaitGroup
	for g := range stoppers {
		wg.Go(func() {
			for i := g; i < n; i += stoppers {
				stopped[i] = timers[i].Stop()
			}
		})
	}
	wg.Wait()
	want := 0
	for i := range n {
		if !stopped[i] {
			want++
		}
	}
	for range want {
		<-done
	}
	tw.Stop() // nothing fires after it returns
	if len(done) != 0 {
		t.Fatalf("%d more callbacks ran than Stops failed", len(done))
	}
	for i := range n {
		if w := map[bool]int32{true: 0, false: 1}[stopped[i]]; fired[i].Load() != w {
			t.Fatalf("timer %d: Stop = %v, callback ran %d times", i, stopped[i], fired[i].Load())
		}
	}
}

// TestClockSeam runs the wheel on a fake clock that moves only on Advance.
func TestClockSeam(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		tw, err := Start(Config{Tick: 10 * time.Millisecond, WheelSize: 8, Clock: fc})
		if err != nil {
			t.Fatal(err)
		}
		defer tw.Stop()
		var a, b atomic.Bool
		tw.AfterFunc(35*time.Millisecond, func() { a.Store(true) })
		tw.AfterFunc(8903*time.Millisecond, func() { b.Store(true) }) // level 2 at first
		fc.Advance(35*time.Millisecond - 1)
		synctest.Wait()
		if a.Load() {
			t.Fatal("fired 1ns before 35ms")
		}
		fc.Advance(1)
		synctest.Wait()
		if !a.Load() {
			t.Fatal("not fired at 35ms")
		}
		fc.Advance(8868*time.Millisecond - 1) // 1ns before 8903 ms
		synctest.Wait()
		if b.Load() {
			t.Fatal("fired 1ns before 8903ms")
		}
		fc.Advance(1)
		synctest.Wait()
		if !b.Load() {
			t.Fatal("not fired at 8903ms")
		}
		// One jump far ahead cascades through every level at once.
		var c atomic.Bool
		tw.AfterFunc(time.Hour, func() { c.Store(true) })
		fc.Advance(2 * time.Hour)
		synctest.Wait()
		if !c.Load() {
			t.Fatal("an hour's timer did not fire after a jump of two hours")
		}
	})
}

func TestConfigValidation(t *testing.T) {
	leaktest.Check(t)
	for _, cfg := range []Config{
		{Tick: -1},
		{WheelSize: 1},
		{WheelSize: -3},
		{WheelSize: maxWheelSize + 1},
		{Workers: -1},
		{Workers: maxWorkers + 1},
	} {
		if tw, err := Start(cfg); !errors.Is(err, ErrInvalidConfig) {
			if tw != nil {
				tw.Stop()
			}
			t.Errorf("Start(%+v) error = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("New(-1ms, 20) did not panic")
			} else if err, ok := r.(error); !ok || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New panicked with %v, want ErrInvalidConfig", r)
			}
		}()
		New(-time.Millisecond, 20)
	}()
	tw := New(0, 0) // zero means defaults
	if tw.Tick() != DefaultTick || tw.size != DefaultWheelSize {
		t.Errorf("defaults: tick %v size %d", tw.Tick(), tw.size)
	}
	tw.Stop()
}

// TestSystemClock runs one timer on the real clock (no virtual time), given
// as clock.System(): the wheel takes its fast path for it.
func TestSystemClock(t *testing.T) {
	leaktest.Check(t)
	tw, err := Start(Config{Clock: clock.System()})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Stop()
	if tw.clock != nil {
		t.Error("clock.System() not read through the fast path")
	}
	start := time.Now()
	const d = 3 * time.Millisecond
	done := make(chan time.Duration, 1)
	tw.AfterFunc(d, func() { done <- time.Since(start) })
	select {
	case got := <-done:
		if got < d {
			t.Fatalf("fired after %v, before its delay %v", got, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timer did not fire within 10s")
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	leaktest.Check(t)
	for i := range 20 {
		tw, err := Start(Config{Workers: 1 + i%4})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 100 {
			tw.AfterFunc(time.Duration(j)*time.Microsecond*50, func() {})
		}
		tw.AfterFunc(time.Hour, func() {})
		tw.Stop()
	}
}

// TestGoroutinesStartWithTheFirstTimer: a wheel that never times anything
// starts no goroutine; the first timer starts them, and Stop joins them.
func TestGoroutinesStartWithTheFirstTimer(t *testing.T) {
	leaktest.Check(t)
	before := runtime.NumGoroutine()
	tw, err := Start(Config{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("an idle wheel runs %d goroutines", n-before)
	}
	fired := make(chan struct{})
	tw.AfterFunc(time.Millisecond, func() { close(fired) })
	if n := runtime.NumGoroutine(); n < before+4 {
		t.Fatalf("after the first timer: %d goroutines, want the driver and 3 workers", n-before)
	}
	<-fired
	tw.Stop()

	idle := New(0, 0)
	idle.Stop() // never started: nothing to wait for
	if tm := idle.AfterFunc(time.Millisecond, func() { t.Error("a stopped wheel fired") }); tm.Stop() {
		t.Error("a timer of a stopped wheel was pending")
	}
}
