package main

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server/thw"
	"github.com/strata-log/strata/timingwheel"
)

const (
	timersDurability = "– (in memory)"
	thwDurability    = "– (in memory; a data structure: the caller adds the lock and the driver goroutine, as here)"
)

// timerVariants: Strata's timing wheel vs time.AfterFunc vs NATS's thw, for
// timers that are cancelled before they fire (the common case of a long
// poll or a produce timeout) and for timers that fire.
func timerVariants(e *env) []variant {
	nCancel := e.pick(1_000_000, 200_000, 1_000)
	nFire := e.pick(200_000, 50_000, 500)
	return []variant{
		{
			label: "timers: schedule 30 s + cancel", unit: "timers", cpuNote: "timer",
			systems: []system{
				{name: "strata timingwheel", baseline: true, durability: timersDurability,
					run: func(e *env) (sample, error) { return cancelTimers(nCancel, strataTimers()) }},
				{name: "time.AfterFunc", durability: timersDurability,
					run: func(e *env) (sample, error) { return cancelTimers(nCancel, goTimers()) }},
				{name: "NATS thw", durability: thwDurability,
					run: func(e *env) (sample, error) { return cancelTimers(nCancel, thwTimers()) }},
			},
		},
		{
			label: "timers: schedule 1–20 ms + fire", unit: "timers per CPU-second", cpuNote: "timer", byCPU: true,
			systems: []system{
				{name: "strata timingwheel", baseline: true, durability: timersDurability,
					run: func(e *env) (sample, error) { return fireTimers(nFire, strataTimers()) }},
				{name: "time.AfterFunc", durability: timersDurability,
					run: func(e *env) (sample, error) { return fireTimers(nFire, goTimers()) }},
				{name: "NATS thw", durability: thwDurability,
					run: func(e *env) (sample, error) { return fireTimers(nFire, thwTimers()) }},
			},
		},
	}
}

// timerService is what the timers case needs of each system.
type timerService struct {
	start func()
	after func(seq uint64, d time.Duration, f func()) (cancel func() bool)
	stop  func()
}

func strataTimers() func() timerService {
	return func() timerService {
		var tw *timingwheel.TimingWheel
		return timerService{
			start: func() { tw = timingwheel.New(time.Millisecond, 20) },
			after: func(_ uint64, d time.Duration, f func()) func() bool { return tw.AfterFunc(d, f).Stop },
			stop:  func() { tw.Stop() },
		}
	}
}

func goTimers() func() timerService {
	return func() timerService {
		return timerService{
			start: func() {},
			after: func(_ uint64, d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop },
			stop:  func() {},
		}
	}
}

// thwTimers drives a thw.HashWheel the simplest way that works: a mutex
// around it and one goroutine that sleeps until its next expiration and
// runs the callbacks of the expired entries.
func thwTimers() func() timerService {
	return func() timerService {
		var (
			mu    sync.Mutex
			hw    = thw.NewHashWheel()
			fns   = map[uint64]func(){}
			wake  = make(chan struct{}, 1)
			quit  = make(chan struct{})
			ended = make(chan struct{})
		)
		drive := func() {
			defer close(ended)
			t := time.NewTimer(time.Hour)
			defer t.Stop()
			for {
				mu.Lock()
				var due []func()
				hw.ExpireTasks(func(seq uint64, _ int64) bool {
					due = append(due, fns[seq])
					delete(fns, seq)
					return true
				})
				next := hw.GetNextExpiration(math.MaxInt64)
				mu.Unlock()
				for _, f := range due {
					f()
				}
				if next != math.MaxInt64 {
					t.Reset(time.Until(time.Unix(0, next)))
				}
				select {
				case <-t.C:
				case <-wake:
				case <-quit:
					return
				}
			}
		}
		return timerService{
			start: func() { go drive() },
			after: func(seq uint64, d time.Duration, f func()) func() bool {
				exp := time.Now().Add(d).UnixNano()
				mu.Lock()
				first := exp < hw.GetNextExpiration(math.MaxInt64)
				hw.Add(seq, exp)
				fns[seq] = f
				mu.Unlock()
				if first {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
				return func() bool {
					mu.Lock()
					defer mu.Unlock()
					delete(fns, seq)
					return hw.Remove(seq, exp) == nil
				}
			},
			stop: func() { close(quit); <-ended },
		}
	}
}

// cancelTimers schedules n timers 30 s (+ up to 1 s) out and cancels them
// all, timing both.
func cancelTimers(n int, mk func() timerService) (sample, error) {
	ts := mk()
	ts.start()
	defer ts.stop()
	cancels := make([]func() bool, n)
	nop := func() {}
	runtime.GC()
	cpu0, start := processCPU(), time.Now()
	for i := range n {
		cancels[i] = ts.after(uint64(i), 30*time.Second+time.Duration(i%1000)*time.Millisecond, nop)
	}
	stopped := 0
	for _, c := range cancels {
		if c() {
			stopped++
		}
	}
	el, cpu := time.Since(start), processCPU()-cpu0
	if stopped != n {
		return sample{}, errors.New("a 30 s timer could not be cancelled")
	}
	return sample{Records: int64(n), Elapsed: el, CPU: cpu}, nil
}

// fireTimers schedules n timers 1–20 ms out and waits until all fired; the
// figure is the process CPU time it took.
func fireTimers(n int, mk func() timerService) (sample, error) {
	ts := mk()
	ts.start()
	defer ts.stop()
	var fired atomic.Int64
	done := make(chan struct{})
	f := func() {
		if fired.Add(1) == int64(n) {
			close(done)
		}
	}
	runtime.GC()
	cpu0, start := processCPU(), time.Now()
	for i := range n {
		ts.after(uint64(i), time.Millisecond+time.Duration(i%20)*time.Millisecond, f)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		return sample{}, errors.New("timers did not fire within a minute")
	}
	el, cpu := time.Since(start), processCPU()-cpu0
	return sample{Records: int64(n), Elapsed: el, CPU: cpu}, nil
}
