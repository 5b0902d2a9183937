package clocktest

import (
	"container/heap"
	"sync"
	"time"

	"github.com/strata-log/strata/clock"
)

// Clock is a clock.Clock whose time moves only when Advance is called. It is
// safe for concurrent use.
//
// AfterFunc callbacks run in the goroutine that calls Advance, one at a
// time, with no lock of the Clock held (they may call the Clock). Timers
// from NewTimer deliver on their channel (a buffer of one) from Advance, or
// at once from NewTimer and Reset when d <= 0. An AfterFunc with d <= 0 is
// called by the next Advance, even of 0, never by AfterFunc itself.
type Clock struct {
	advancing sync.Mutex // one Advance at a time

	mu  sync.Mutex
	now time.Time
	seq uint64
	due queue // armed timers and calls, earliest first
}

// New returns a Clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

var _ clock.Clock = (*Clock)(nil)

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that delivers once the clock has moved d from
// now, at once if d <= 0.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &Timer{e: event{c: c, idx: -1, ch: make(chan time.Time, 1)}}
	t.Reset(d)
	return t
}

// AfterFunc arranges for f to be called by the Advance that moves the clock
// to d from now or past it.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Stopper {
	if f == nil {
		panic("clocktest: AfterFunc with nil func")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fn := &Func{e: event{c: c, idx: -1, f: f}}
	c.armLocked(&fn.e, d)
	return fn
}

// Advance moves the clock forward by d. On the way it fires, in the order
// of their due times (then of their arming), every timer and call due by
// the end, also those that callbacks arm within the window; the clock reads
// each one's due time while it fires, and now+d at the end. Advances are
// serialised; d < 0 panics.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("clocktest: negative Advance")
	}
	c.advancing.Lock()
	defer c.advancing.Unlock()
	c.mu.Lock()
	end := c.now.Add(d)
	for len(c.due) > 0 && !c.due[0].at.After(end) {
		e := heap.Pop(&c.due).(*event)
		if e.at.After(c.now) {
			c.now = e.at
		}
		if e.f == nil {
			e.deliverLocked()
			continue
		}
		c.mu.Unlock()
		e.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// AdvanceTo moves the clock forward to t, as Advance does; a t before Now
// does nothing.
func (c *Clock) AdvanceTo(t time.Time) {
	if d := t.Sub(c.Now()); d > 0 {
		c.Advance(d)
	}
}

// Pending returns the number of timers and calls that are armed: neither
// fired nor stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.due)
}

// Next returns when the earliest armed timer or call is due, and false if
// none is armed.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.due) == 0 {
		return time.Time{}, false
	}
	return c.due[0].at, true
}

func (c *Clock) armLocked(e *event, d time.Duration) {
	c.seq++
	e.at, e.seq = c.now.Add(max(d, 0)), c.seq
	heap.Push(&c.due, e)
}

// event is an armed timer (ch) or call (f).
type event struct {
	c   *Clock
	at  time.Time
	seq uint64
	idx int // in c.due; -1 when not armed
	ch  chan time.Time
	f   func()
}

func (e *event) deliverLocked() {
	select {
	case e.ch <- e.c.now:
	default: // a value is waiting already: a timer fires once per arming
	}
}

// stopLocked disarms e and reports whether it was armed.
func (e *event) stopLocked() bool {
	if e.idx < 0 {
		return false
	}
	heap.Remove(&e.c.due, e.idx)
	return true
}

func (e *event) drainLocked() {
	select {
	case <-e.ch:
	default:
	}
}

// Timer is a timer of a Clock, made by NewTimer.
type Timer struct{ e event }

// C returns the channel the timer delivers on.
func (t *Timer) C() <-chan time.Time { return t.e.ch }

// Reset re-arms the timer to deliver once the clock has moved d from now (at
// once if d <= 0), dropping a delivery not yet received. It reports whether
// the timer was armed.
func (t *Timer) Reset(d time.Duration) bool {
	c := t.e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	armed := t.e.stopLocked()
	t.e.drainLocked()
	if d <= 0 {
		t.e.deliverLocked()
		return armed
	}
	c.armLocked(&t.e, d)
	return armed
}

// Stop disarms the timer, dropping a delivery not yet received. It reports
// whether the timer was armed.
func (t *Timer) Stop() bool {
	c := t.e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	armed := t.e.stopLocked()
	t.e.drainLocked()
	return armed
}

// Func is a call arranged by AfterFunc.
type Func struct{ e event }

// Stop cancels the call; it reports false if it was already called or
// stopped.
func (f *Func) Stop() bool {
	c := f.e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return f.e.stopLocked()
}

// queue is a min-heap of armed events by (at, seq).
type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *queue) Push(x any) {
	e := x.(*event)
	e.idx = len(*q)
	*q = append(*q, e)
}
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.idx = -1
	return e
}
