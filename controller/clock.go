package controller

import "time"

// Clock is the time the active controller measures broker sessions with.
// Tests drive a fake one (controllertest.Clock).
type Clock interface {
	Now() time.Time
	// At returns a channel that receives a value once the clock reads t or
	// later, at once if it already does. (An absolute time, not a duration:
	// a fake clock advanced between Now and At cannot make a timer late.)
	At(t time.Time) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                  { return time.Now() }
func (systemClock) At(t time.Time) <-chan time.Time { return time.After(time.Until(t)) }
