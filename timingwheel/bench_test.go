package timingwheel

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks. Performance targets are checked here, never in unit tests:
//
//	go test -run '^$' -bench . -benchtime 3x ./timingwheel/

type memSnap struct{ bytes, mallocs uint64 }

func readMem() memSnap {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSnap{m.TotalAlloc, m.Mallocs}
}

// BenchmarkScheduleStop1M schedules 1,000,000 timers with delays uniform in
// [1ms, 10s] and then stops them all, on the wheel and with time.AfterFunc in
// the same run. The built-in ns/op, B/op and allocs/op are the wheel's per
// timer (schedule + stop); std-* are time.AfterFunc's; ratio is wheel/std.
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

	var w, s struct {
		sched, stop time.Duration
		mem         memSnap
	}
	measure := func(schedule, stop func()) (time.Duration, time.Duration, memSnap) {
		runtime.GC()
		m0 := readMem()
		t0 := time.Now()
		schedule()
		t1 := time.Now()
		stop()
		t2 := time.Now()
		m1 := readMem()
		return t1.Sub(t0), t2.Sub(t1), memSnap{m1.bytes - m0.bytes, m1.mallocs - m0.mallocs}
	}
	b.ResetTimer()
	for range b.N {
		sched, stop, mem := measure(
			func() {
				for i, d := range delays {
					timers[i] = tw.AfterFunc(d, f)
				}
			},
			func() {
				for _, t := range timers {
					t.Stop()
				}
			})
		w.sched, w.stop = w.sched+sched, w.stop+stop
		w.mem.bytes, w.mem.mallocs = w.mem.bytes+mem.bytes, w.mem.mallocs+mem.mallocs
		clear(timers)

		sched, stop, mem = measure(
			func() {
				for i, d := range delays {
					stdTimers[i] = time.AfterFunc(d, f)
				}
			},
			func() {
				for _, t := range stdTimers {
					t.Stop()
				}
			})
		s.sched, s.stop = s.sched+sched, s.stop+stop
		s.mem.bytes, s.mem.mallocs = s.mem.bytes+mem.bytes, s.mem.mallocs+mem.mallocs
		clear(stdTimers)
	}
	b.StopTimer()
	per := float64(b.N) * n
	wns := float64(w.sched+w.stop) / per
	sns := float64(s.sched+s.stop) / per
	b.ReportMetric(wns, "ns/op")
	b.ReportMetric(float64(w.mem.bytes)/per, "B/op")
	b.ReportMetric(float64(w.mem.mallocs)/per, "allocs/op")
	b.ReportMetric(float64(w.sched)/per, "sched-ns/timer")
	b.ReportMetric(float64(w.stop)/per, "stop-ns/timer")
	b.ReportMetric(sns, "std-ns/timer")
	b.ReportMetric(float64(s.sched)/per, "std-sched-ns/timer")
	b.ReportMetric(float64(s.stop)/per, "std-stop-ns/timer")
	b.ReportMetric(float64(s.mem.bytes)/per, "std-B/timer")
	b.ReportMetric(float64(s.mem.mallocs)/per, "std-allocs/timer")
	b.ReportMetric(wns/sns, "ratio")
}

// BenchmarkLateness10k sets 10,000 timers due at the same instant 50 ms
// ahead and reports how late their callbacks start, in ticks (1 ms), for the
// wheel and, for reference, time.AfterFunc.
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
	b.ResetTimer()
	for range b.N {
		wheel = append(wheel, round(func(d time.Duration, f func()) { tw.AfterFunc(d, f) })...)
		std = append(std, round(func(d time.Duration, f func()) { time.AfterFunc(d, f) })...)
	}
	b.StopTimer()
	pct := func(xs []time.Duration, p float64) float64 {
		slices.Sort(xs)
		return float64(xs[min(len(xs)-1, int(p*float64(len(xs))))]) / float64(tick)
	}
	b.ReportMetric(pct(wheel, 0.50), "p50-late-ticks")
	b.ReportMetric(pct(wheel, 0.99), "p99-late-ticks")
	b.ReportMetric(pct(wheel, 1), "max-late-ticks")
	b.ReportMetric(pct(std, 0.99), "std-p99-late-ticks")
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
		fc := newFakeClock()
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
