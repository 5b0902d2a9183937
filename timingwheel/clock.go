package timingwheel

import "github.com/strata-log/strata/clock"

// Clock is the time seam of a [TimingWheel]: where it reads the time and how
// it sleeps. The wheel uses Now and NewTimer; only differences between two
// readings of Now matter to it, and a spurious or stale delivery of its
// timer is harmless (the driver re-reads the clock each time it wakes). The
// zero Config uses the system clock; tests (and packages that run on a clock
// of their own, such as a broker under a fake clock) pass theirs.
//
// Deprecated: Clock is [clock.Clock]; use that name.
type Clock = clock.Clock

// ClockTimer is the one timer a TimingWheel's driver sleeps on.
//
// Deprecated: ClockTimer is [clock.Timer]; use that name.
type ClockTimer = clock.Timer
