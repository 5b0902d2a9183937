package timingwheel

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/internal/errs"
)

// ErrInvalidConfig is returned by [Start] and [NewPurgatory] for a
// configuration they cannot run with.
var ErrInvalidConfig = errs.Mark("timingwheel: invalid config", errs.ErrInvalidConfig) // matches log.ErrInvalidConfig

// Defaults, as in Kafka's SystemTimer.
const (
	DefaultTick      = time.Millisecond
	DefaultWheelSize = 20
	DefaultWorkers   = 2
	maxWheelSize     = 1 << 16
	maxWorkers       = 256
)

// Config configures a [TimingWheel]. The zero value means the defaults.
type Config struct {
	// Tick is the width of a bucket of the finest wheel, the wheel's
	// resolution: timers due within the same tick fire together, when the
	// latest of them is due, so a timer fires less than a tick after its
	// due time (plus scheduling latency) and never before. 0 means 1 ms
	// (Kafka's tickMs).
	Tick time.Duration
	// WheelSize is the number of buckets of each level; the finest level
	// spans Tick × WheelSize and each overflow level WheelSize times the one
	// below. 0 means 20 (Kafka's wheelSize). At least 2.
	WheelSize int
	// Workers is the number of goroutines that run callbacks. 0 means 2.
	Workers int
	// Clock is where the wheel reads time and sleeps (Now and NewTimer).
	// nil means the system clock, as does clock.System() (read as fast).
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.WheelSize == 0 {
		c.WheelSize = DefaultWheelSize
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Tick < 0:
		return fmt.Errorf("%w: negative tick %v", ErrInvalidConfig, c.Tick)
	case c.WheelSize < 2 || c.WheelSize > maxWheelSize:
		return fmt.Errorf("%w: wheel size %d not in [2, %d]", ErrInvalidConfig, c.WheelSize, maxWheelSize)
	case c.Workers < 0 || c.Workers > maxWorkers:
		return fmt.Errorf("%w: workers %d not in [1, %d]", ErrInvalidConfig, c.Workers, maxWorkers)
	}
	return nil
}

// TimingWheel is a hierarchical timing wheel: a running timer service whose
// AfterFunc and Timer.Stop cost O(1). Its methods are safe for concurrent
// use.
type TimingWheel struct {
	tick  time.Duration
	clock clock.Clock // nil: the system clock (fast path for reading it)
	start time.Time   // time 0 of the core

	mu      sync.Mutex
	w       *wheel // made by the first schedule, with the goroutines
	size    int    // the wheel size of w
	armed   int64  // when the driver wakes (ns since start); MaxInt64 when idle
	stopped bool
	// running: the goroutines have been started, by the first schedule.
	running bool
	workers int
	unused  []Timer // zero Timers for AfterFunc, handed out from the front
	// sweeping is set while a caller of schedule sweeps (see sweepMin).
	sweeping bool
	// stops counts successful Timer.Stops, for the sweep (the core counts
	// the stopped timers it let go of); on its own cache line, as Stop
	// does not take mu.
	stops struct {
		_ [64]byte
		n atomic.Int64
		_ [56]byte
	}
	work sync.Cond // workers wait here for due timers (L = &mu)

	wake chan struct{} // cap 1: an earlier bucket than armed entered the heap
	quit chan struct{} // closed by Stop
	wg   sync.WaitGroup
}

// Timer is a pending call made by [TimingWheel.AfterFunc]: 40 bytes, which
// the wheel's buckets point to.
type Timer struct {
	tw    *TimingWheel // set when scheduled
	exp   int64        // when it is due, in ns since the wheel's start
	task  runner
	state atomic.Uint32 // timerIdle, timerPending, then timerStopped or timerFired
}

// runner is what a timer runs when it fires.
type runner interface{ run() }

// funcTask makes a func a runner without allocating (a func value is
// pointer-shaped, so it fits in the interface word).
type funcTask func()

func (f funcTask) run() { f() }

// New returns a running timing wheel with the given tick and wheel size, the
// system clock and the default number of workers. Zero means the default, as
// in [Config]; New panics where [Start] would return an error (a negative tick,
// a wheel size of 1). Stop it when done.
func New(tick time.Duration, wheelSize int) *TimingWheel {
	tw, err := Start(Config{Tick: tick, WheelSize: wheelSize})
	if err != nil {
		panic(err)
	}
	return tw
}

// Start returns a running timing wheel configured by cfg: one driver goroutine
// that sleeps until the earliest bucket expires, and cfg.Workers goroutines
// that run callbacks. Stop ends them. The goroutines start with the first
// timer, so a wheel that never times anything (a broker that never parks a
// fetch) costs no goroutine and no wake-up.
func Start(cfg Config) (*TimingWheel, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	clk := cfg.Clock
	if clk == clock.System() {
		clk = nil // the fast path reads time.Now directly
	}
	tw := &TimingWheel{
		tick:    cfg.Tick,
		clock:   clk,
		size:    cfg.WheelSize,
		armed:   math.MaxInt64,
		workers: cfg.Workers,
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
	}
	tw.work.L = &tw.mu
	if tw.clock == nil {
		tw.start = time.Now()
	} else {
		tw.start = tw.clock.Now()
	}
	return tw, nil
}

// run makes the core and starts the driver and the workers. tw.mu must be
// held.
func (tw *TimingWheel) run() {
	tw.running = true
	tw.w = newWheel(tw.size, int64(tw.tick))
	tw.wg.Add(1 + tw.workers)
	go tw.drive()
	for range tw.workers {
		go tw.worker()
	}
}

// Tick returns the wheel's resolution.
func (tw *TimingWheel) Tick() time.Duration { return tw.tick }

// AfterFunc calls f on one of the wheel's workers once d has passed, never
// before, and less than a tick after (plus scheduling latency). d <= 0 means
// as soon as a worker is free. Callbacks may run concurrently with each other.
// The returned Timer cancels the call with Stop. After the wheel is stopped,
// AfterFunc returns a timer that never fires.
func (tw *TimingWheel) AfterFunc(d time.Duration, f func()) *Timer {
	if f == nil {
		panic("timingwheel: AfterFunc with nil func")
	}
	return tw.schedule(nil, d, funcTask(f))
}

// elapsed reads the clock: the time since the wheel started.
func (tw *TimingWheel) elapsed() time.Duration {
	if tw.clock == nil {
		return time.Since(tw.start)
	}
	return tw.clock.Now().Sub(tw.start)
}

// schedule links t (zero or idle; nil: a new one) into the wheel to run task
// after d, and returns it.
func (tw *TimingWheel) schedule(t *Timer, d time.Duration, task runner) *Timer {
	e := tw.elapsed()
	exp := int64(-1) // d <= 0: due now
	if d > 0 {
		exp = int64(e + d)
		if exp < int64(e) {
			exp = maxExp // overflow: effectively never
		}
	}

	tw.mu.Lock()
	if t == nil {
		t = tw.newTimer()
	}
	t.tw, t.exp, t.task = tw, exp, task
	if tw.stopped {
		tw.mu.Unlock()
		return t
	}
	if !tw.running {
		tw.run()
	}
	t.state.Store(timerPending)
	w := tw.w
	sweep := false
	if z := int(tw.stops.n.Load()) - w.dropped; z >= sweepMin && 2*z >= w.n && !tw.sweeping {
		tw.sweeping, sweep = true, true
	}
	// Keep the core's clock fresh while the driver sleeps, so the timer
	// lands in the finest level that can hold it. Only when no bucket is
	// due: those are the driver's to pop first.
	if len(w.heap) == 0 || w.heap[0].exp > int64(e) {
		w.setClock(int64(e))
	}
	b := w.add(t)
	ready := b == &w.ready
	wakeDriver := b != nil && !ready && b.exp < tw.armed
	if wakeDriver {
		tw.armed = b.exp
	}
	tw.mu.Unlock()
	if wakeDriver {
		select {
		case tw.wake <- struct{}{}:
		default:
		}
	}
	if ready {
		tw.work.Signal()
	}
	if sweep {
		tw.sweep()
	}
	return t
}

// sweep drops the stopped timers from the wheel, taking the lock for one
// bucket at a time so that the driver and other callers wait at most for
// the largest bucket, not for the whole wheel (1 M timers: about 20 ms).
func (tw *TimingWheel) sweep() {
	for i, more := -1, true; more; i++ {
		tw.mu.Lock()
		more = tw.w.sweepSlot(i)
		tw.mu.Unlock()
	}
	tw.mu.Lock()
	tw.sweeping = false
	tw.mu.Unlock()
}

// timerChunk is how many Timers newTimer allocates at once.
const timerChunk = 32

// newTimer returns a zero Timer. Timers are allocated timerChunk at a time,
// which makes AfterFunc's allocation a fraction of one per timer; the price
// is that a Timer the caller keeps keeps its chunk's memory alive, at most
// timerChunk × 40 bytes. tw.mu must be held.
func (tw *TimingWheel) newTimer() *Timer {
	if len(tw.unused) == 0 {
		tw.unused = make([]Timer, timerChunk)
	}
	t := &tw.unused[0]
	tw.unused = tw.unused[1:]
	return t
}

// Stop cancels the timer. It reports whether it stopped the call before it
// began: false if the callback has already started (or finished), or the timer
// was already stopped. Stop does not wait for a callback that has started.
// It is O(1) and takes no lock: it marks the timer, and the wheel lets go of
// it when its bucket expires or in a sweep (see sweepMin).
func (t *Timer) Stop() bool {
	if !t.state.CompareAndSwap(timerPending, timerStopped) {
		return false
	}
	t.tw.stops.n.Add(1)
	return true
}

// sweepMin sets when schedule sweeps stopped timers out of the wheel: when
// at least sweepMin of the timers it holds, and at least half of them, are
// stopped. A sweep costs O(timers held) and removes at least half of them,
// which makes it O(1) per Stop; between sweeps stopped timers are never more
// than the pending ones (plus sweepMin), which bounds the memory they keep
// (the Timer and what its callback refers to).
const sweepMin = 1024

// Stop stops the wheel and waits for its goroutines: the driver, and the
// workers after the callbacks they are running return. No callback starts
// after Stop returns; timers still pending never fire. Stop is idempotent but
// must not be called from a callback of the same wheel (it would wait for
// itself).
func (tw *TimingWheel) Stop() {
	tw.mu.Lock()
	first := !tw.stopped
	tw.stopped = true
	tw.mu.Unlock()
	if first {
		close(tw.quit)
		tw.work.Broadcast()
	}
	tw.wg.Wait()
}

// drive is the clock goroutine: it advances the core to the current time,
// hands due timers to the workers and sleeps until the next bucket expires
// or an earlier one appears. It never runs a callback.
func (tw *TimingWheel) drive() {
	defer tw.wg.Done()
	var sleeper clock.Timer // made when first needed
	var sleep <-chan time.Time
	defer func() {
		if sleeper != nil {
			sleeper.Stop()
		}
	}()
	for {
		tw.mu.Lock()
		e := tw.elapsed()
		readied := tw.w.advance(int64(e))
		next, ok := tw.w.next()
		if ok {
			tw.armed = next
		} else {
			tw.armed = math.MaxInt64
		}
		tw.mu.Unlock()
		if readied {
			tw.work.Broadcast()
		}
		switch d := max(time.Duration(next)-e, 0); {
		case ok && sleeper == nil:
			sleeper = tw.newSleeper(d)
			sleep = sleeper.C()
		case ok:
			sleeper.Reset(d)
		case sleeper != nil:
			sleeper.Stop()
		}
		select {
		case <-sleep:
		case <-tw.wake:
		case <-tw.quit:
			return
		}
	}
}

// newSleeper returns the driver's timer, due in d.
func (tw *TimingWheel) newSleeper(d time.Duration) clock.Timer {
	if tw.clock == nil {
		return clock.System().NewTimer(d)
	}
	return tw.clock.NewTimer(d)
}

// worker runs due timers' callbacks, one at a time, until Stop.
func (tw *TimingWheel) worker() {
	defer tw.wg.Done()
	tw.mu.Lock()
	for {
		for !tw.w.hasReady() && !tw.stopped {
			tw.work.Wait()
		}
		if tw.stopped {
			tw.mu.Unlock()
			return
		}
		t := tw.w.popReady()
		if t == nil {
			continue // only stopped timers were queued
		}
		task := t.task
		tw.mu.Unlock()
		task.run()
		tw.mu.Lock()
	}
}
