package grouptest

import (
	"sync"
	"time"

	"github.com/strata-log/strata/group"
)

// Clock is a group.Clock whose time moves only when Advance is called.
// AfterFunc callbacks run in the goroutine that calls Advance, in the order
// of their due times (then of their creation), each with the clock reading
// its due time.
type Clock struct {
	advancing sync.Mutex // one Advance at a time

	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*timer
}

type timer struct {
	c   *Clock
	at  time.Time
	seq uint64
	f   func()
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arranges for f to be called by the Advance that moves the clock
// to d from now or past it (by the next Advance, even of 0, if d ≤ 0).
func (c *Clock) AfterFunc(d time.Duration, f func()) group.Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, at: c.now.Add(max(d, 0)), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop cancels the timer; it reports false if the timer already fired or
// was stopped.
func (t *timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removeLocked(t)
}

func (c *Clock) removeLocked(t *timer) bool {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves the clock forward by d, calling each timer that comes due
// on the way (also those that callbacks arm within the window).
func (c *Clock) Advance(d time.Duration) {
	c.advancing.Lock()
	defer c.advancing.Unlock()
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *timer
		for _, t := range c.timers {
			if !t.at.After(end) && (next == nil || t.at.Before(next.at) || t.at.Equal(next.at) && t.seq < next.seq) {
				next = t
			}
		}
		if next == nil {
			break
		}
		c.removeLocked(next)
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Pending returns the number of timers that have neither fired nor been
// stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
