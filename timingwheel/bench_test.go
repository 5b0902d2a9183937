package timingwheel

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/clock/clocktest"
)

// Benchmarks. Performance targets are checked here, never in unit tests:
//
//	go test -run '^$' -bench . ./timingwheel/
//
// (about 15 s; -benchtime 5x on the first two gives more rounds).

type memSnap struct{ bytes, mallocs uint64 }

func readMem() memSnap {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSnap{m.TotalAlloc, m.Mallocs}
}

// BenchmarkScheduleStop1M schedules 1,000,000 timers with delays uniform in
// [1ms, 10s] and then stops them all, on the wheel and with time.AfterFunc,
// alternating which goes first, 3×b.N rounds each in the same run. The
// built-in ns/op, B/op and allocs/op are the wheel's per timer (schedule +
// stop); std-* are time.AfterFunc's; ratio is wheel/std. Times are medians
// over the rounds, which shrugs off a round slowed by other processes
// (best-ratio compares the fastest rounds); bytes and allocations are means. cpu-* count the process's CPU time
// (Linux; every thread: the caller, the wheel's or the runtime's timer
// goroutines, the garbage collector), which waiting for a core taken by
// another process does not inflate.
func BenchmarkScheduleStop1M(b *testing.B) {
	const n = 1_000_000
	rng := rand.New(rand.NewPCG(1, 2))
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Millisecond + time.Duration(rng.Int64N(int64(10*time.Second-time.Millisecond)+1))
	}
	f := func() {}
	tw := New(time.Millisecond, 20)
	defer tw.Stop()
	timers := make([]*Timer, n)
	stdTimers := make([]*time.Timer, n)

	type result struct {
		sched, stop []float64 // ns per timer, one per round
		cpu         time.Duration
		mem         memSnap
	}
	var w, s result
	measure := func(r *result, schedule, stop func()) {
		runtime.GC()
		m0 := readMem()
		c0, _ := processCPU()
		t0 := time.Now()
		schedule()
		t1 := time.Now()
		stop()
		t2 := time.Now()
		c1, _ := processCPU()
		m1 := readMem()
		r.cpu += c1 - c0
		r.sched = append(r.sched, float64(t1.Sub(t0))/n)
		r.stop = append(r.stop, float64(t2.Sub(t1))/n)
		r.mem.bytes += m1.bytes - m0.bytes
		r.mem.mallocs += m1.mallocs - m0.mallocs
	}
	wheel := func() {
		measure(&w, func() {
			for i, d := range delays {
				timers[i] = tw.AfterFunc(d, f)
			}
		}, func() {
			for _, t := range timers {
				t.Stop()
			}
		})
		clear(timers)
	}
	std := func() {
		measure(&s, func() {
			for i, d := range delays {
				stdTimers[i] = time.AfterFunc(d, f)
			}
		}, func() {
			for _, t := range stdTimers {
				t.Stop()
			}
		})
		clear(stdTimers)
	}
	b.ReportAllocs()
	b.ResetTimer()
	const rounds = 3 // per iteration, so that even b.N == 1 gives a median
	for i := range b.N * rounds {
		if i%2 == 0 {
			wheel()
			std()
		} else {
			std()
			wheel()
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	total := func(r result) []float64 {
		out := make([]float64, len(r.sched))
		for i := range out {
			out[i] = r.sched[i] + r.stop[i]
		}
		return out
	}
	per := float64(b.N) * rounds * n
	wns, sns := median(total(w)), median(total(s))
	b.ReportMetric(wns, "ns/op")
	b.ReportMetric(float64(w.mem.bytes)/per, "B/op")
	b.ReportMetric(float64(w.mem.mallocs)/per, "allocs/op")
	b.ReportMetric(median(w.sched), "sched-ns/timer")
	b.ReportMetric(median(w.stop), "stop-ns/timer")
	b.ReportMetric(float64(w.mem.mallocs)/per, "allocs/timer") // unrounded
	b.ReportMetric(sns, "std-ns/timer")
	b.ReportMetric(median(s.sched), "std-sched-ns/timer")
	b.ReportMetric(median(s.stop), "std-stop-ns/timer")
	b.ReportMetric(float64(s.mem.bytes)/per, "std-B/timer")
	b.ReportMetric(float64(s.mem.mallocs)/per, "std-allocs/timer")
	b.ReportMetric(wns/sns, "ratio")
	b.ReportMetric(slices.Min(total(w))/slices.Min(total(s)), "best-ratio") // fastest rounds
	if _, ok := processCPU(); ok {
		b.ReportMetric(float64(w.cpu)/per, "cpu-ns/timer")
		b.ReportMetric(float64(s.cpu)/per, "std-cpu-ns/timer")
		b.ReportMetric(float64(w.cpu)/float64(s.cpu), "cpu-ratio")
	}
}

// BenchmarkLateness10k sets 10,000 timers due at the same instant 50 ms
// ahead and reports how late their callbacks start, in ticks (1 ms), for the
// wheel and, for reference, time.AfterFunc; timer-* is how late a single
// time.Timer wakes in the same run, the floor under both (on Linux an idle
// Go process sleeps in whole milliseconds).
func BenchmarkLateness10k(b *testing.B) {
	const n, tick = 10_000, time.Millisecond
	tw := New(tick, 20)
	defer tw.Stop()
	late := make([]time.Duration, n)
	var wheel, std []time.Duration
	round := func(after func(time.Duration, func())) []time.Duration {
		var wg sync.WaitGroup
		wg.Add(n)
		due := time.Now().Add(50 * time.Millisecond)
		for i := range n {
			after(time.Until(due), func() {
				late[i] = time.Since(due)
				wg.Done()
			})
		}
		wg.Wait()
		return late
	}
	var bare []time.Duration // one time.Timer at a time: the runtime's own wake-up
	b.ResetTimer()
	for i := range b.N {
		wheel = append(wheel, round(func(d time.Duration, f func()) { tw.AfterFunc(d, f) })...)
		std = append(std, round(func(d time.Duration, f func()) { time.AfterFunc(d, f) })...)
		for j := range 10 {
			d := time.Millisecond + time.Duration((i*10+j)*137%1000)*time.Microsecond
			t0 := time.Now()
			<-time.NewTimer(d).C
			bare = append(bare, time.Since(t0)-d)
		}
	}
	b.StopTimer()
	pct := func(xs []time.Duration, p float64) float64 {
		slices.Sort(xs)
		return float64(xs[min(len(xs)-1, int(p*float64(len(xs))))]) / float64(tick)
	}
	b.ReportMetric(pct(wheel, 0.50), "p50-late-ticks")
	b.ReportMetric(pct(wheel, 0.99), "p99-late-ticks")
	b.ReportMetric(pct(wheel, 1), "max-late-ticks")
	b.ReportMetric(pct(std, 0.50), "std-p50-late-ticks")
	b.ReportMetric(pct(std, 0.99), "std-p99-late-ticks")
	b.ReportMetric(pct(bare, 0.50), "timer-p50-late-ticks")
	b.ReportMetric(pct(bare, 0.99), "timer-p99-late-ticks")
}

// benchOp completes once its key's partition has data.
type benchOp struct {
	ready   *atomic.Bool
	expired *sync.WaitGroup
}

func (o *benchOp) TryComplete() bool { return o.ready.Load() }
func (o *benchOp) OnComplete()       {}
func (o *benchOp) OnExpiration()     { o.expired.Done() }

// BenchmarkPurgatory parks rounds of 100,000 operations under 1,000 keys.
// completed-by-key: each key's CheckAndComplete completes its operations
// (and stops their timers). expired: a fake clock moves 100 ms in 1 ms steps
// and every operation expires on the wheel's workers. One op is one
// operation, from TryCompleteElseWatch to its end.
func BenchmarkPurgatory(b *testing.B) {
	const batch, keys = 100_000, 1000
	b.Run("completed-by-key", func(b *testing.B) {
		tw := New(time.Millisecond, 20)
		defer tw.Stop()
		p, _ := NewPurgatory[int](tw, PurgatoryConfig{})
		ready := make([]atomic.Bool, keys)
		ops := make([]benchOp, batch)
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; {
			m := min(batch, b.N-done)
			for k := range ready {
				ready[k].Store(false)
			}
			for i := range m {
				ops[i] = benchOp{ready: &ready[i%keys]}
				p.TryCompleteElseWatch(&ops[i], 30*time.Second, i%keys)
			}
			completed := 0
			for k := range keys {
				ready[k].Store(true)
				completed += p.CheckAndComplete(k)
			}
			if completed != m {
				b.Fatalf("completed %d of %d", completed, m)
			}
			done += m
		}
	})
	b.Run("expired", func(b *testing.B) {
		fc := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		tw, _ := Start(Config{Clock: fc})
		defer tw.Stop()
		p, _ := NewPurgatory[int](tw, PurgatoryConfig{})
		never := new(atomic.Bool)
		ops := make([]benchOp, batch)
		var wg sync.WaitGroup
		rng := rand.New(rand.NewPCG(3, 4))
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; {
			m := min(batch, b.N-done)
			wg.Add(m)
			for i := range m {
				ops[i] = benchOp{ready: never, expired: &wg}
				timeout := time.Duration(1+rng.IntN(100)) * time.Millisecond
				p.TryCompleteElseWatch(&ops[i], timeout, i%keys)
			}
			for range 100 {
				fc.Advance(time.Millisecond)
			}
			wg.Wait()
			done += m
		}
		b.StopTimer()
		if p.Pending() != 0 {
			b.Fatalf("pending %d", p.Pending())
		}
	})
}
