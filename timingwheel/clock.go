package timingwheel

import "time"

// Clock is the time seam of a [TimingWheel]: where it reads the time and how it
// sleeps. The zero Config uses the system clock; tests (and packages that run
// on a clock of their own, such as a broker under a fake clock) pass theirs.
type Clock interface {
	// Now returns the current time. Only differences between two readings
	// matter to the wheel.
	Now() time.Time
	// NewTimer returns a timer that delivers on its channel once d has passed.
	NewTimer(d time.Duration) ClockTimer
}

// ClockTimer is the one timer a TimingWheel's driver sleeps on.
type ClockTimer interface {
	// C is the channel the timer delivers on. A spurious or stale delivery
	// is harmless: the driver re-reads the clock each time it wakes.
	C() <-chan time.Time
	// Reset re-arms the timer to deliver once d has passed from now.
	Reset(d time.Duration)
	// Stop disarms the timer.
	Stop()
}

// systemTimer is a time.Timer seen as a ClockTimer.
type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time   { return s.t.C }
func (s systemTimer) Reset(d time.Duration) { s.t.Reset(d) }
func (s systemTimer) Stop()                 { s.t.Stop() }
