package grouptest

import (
	"time"

	"github.com/strata-log/strata/clock/clocktest"
)

// Clock is a group.Clock whose time moves only when Advance is called: the
// one fake clock, clocktest.Clock. AfterFunc callbacks run in the goroutine
// that calls Advance, in the order of their due times (then of their
// creation), each with the clock reading its due time.
type Clock = clocktest.Clock

// NewClock returns a Clock reading start (clocktest.New).
func NewClock(start time.Time) *Clock { return clocktest.New(start) }
