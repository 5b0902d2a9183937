package clock

import "time"

// Clock is where a component reads the time and how it waits. It is safe
// for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that delivers the time on its channel once
	// d has passed; at once if d <= 0.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once d has passed, never from within AfterFunc
	// itself: in a goroutine of its own (as time.AfterFunc does) or, for a
	// fake clock, from the call that moves the clock. The caller may hold
	// a lock that f takes.
	AfterFunc(d time.Duration, f func()) Stopper
}

// Timer is a one-shot timer with a channel, as a *time.Timer is (with Go
// 1.23's semantics: no value sent before a Stop or Reset is received after
// it).
type Timer interface {
	// C is the channel the timer delivers on; it has a buffer of one.
	C() <-chan time.Time
	// Reset re-arms the timer to deliver once d has passed from now. It
	// reports whether the timer was armed.
	Reset(d time.Duration) bool
	// Stop disarms the timer. It reports whether the timer was armed.
	Stop() bool
}

// Stopper stops a call arranged by AfterFunc. Stop reports whether it
// stopped it before f was called: after true, f is never called; after
// false, f is running or has run (or was stopped before). Stop never waits
// for a running f. *time.Timer is a Stopper.
type Stopper interface {
	Stop() bool
}

// System returns the clock of the operating system (package time). Under
// testing/synctest its time is the bubble's virtual time.
func System() Clock { return system{} }

type system struct{}

func (system) Now() time.Time                              { return time.Now() }
func (system) NewTimer(d time.Duration) Timer              { return systemTimer{time.NewTimer(d)} }
func (system) AfterFunc(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }

// systemTimer is a *time.Timer seen as a Timer.
type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time        { return s.t.C }
func (s systemTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
func (s systemTimer) Stop() bool                 { return s.t.Stop() }
