package controller

import "github.com/strata-log/strata/clock"

// Clock is the time the active controller measures broker sessions with
// (Now and NewTimer). Tests drive a fake one (clocktest.Clock).
//
// Deprecated: Clock is [clock.Clock]; use that name. (It used to have an
// At(t) method in place of NewTimer.)
type Clock = clock.Clock
