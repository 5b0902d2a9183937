// Package clock is Strata's one time seam: the [Clock] interface every
// package that waits or measures time takes in its Config, and [System], the
// clock of the operating system that a nil Config field stands for.
//
// The methods mirror package time: Now, NewTimer and AfterFunc. Tests pass a
// fake whose time moves only when they say so (package clocktest), or run
// under testing/synctest with the system clock, whose time is then virtual.
//
//	cfg := timingwheel.Config{Clock: clocktest.New(start)} // a fake in tests
//	cfg := timingwheel.Config{}                             // the system clock
package clock
