package controllertest

import (
	"time"

	"github.com/strata-log/strata/clock/clocktest"
)

// Clock is a fake clock.Clock: time moves only when Advance is called. It is
// the one fake, clocktest.Clock, with the At method the controller's clock
// used to have.
//
// Deprecated: use [clocktest.Clock].
type Clock struct{ *clocktest.Clock }

// NewClock returns a Clock reading start.
//
// Deprecated: use [clocktest.New].
func NewClock(start time.Time) *Clock { return &Clock{clocktest.New(start)} }

// At returns a channel that receives the clock's time once it reads t or
// later, at once if it already does.
//
// Deprecated: use NewTimer(t.Sub(c.Now())).
func (c *Clock) At(t time.Time) <-chan time.Time { return c.NewTimer(t.Sub(c.Now())).C() }
