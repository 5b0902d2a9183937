// Package clocktest has the fake [clock.Clock] that Strata's tests drive:
// its time moves only when the test calls [Clock.Advance], which fires
// every timer and AfterFunc that comes due on the way, in the order of
// their due times, each with the clock reading its due time.
//
//	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	tw, _ := timingwheel.Start(timingwheel.Config{Clock: clk})
//	tw.AfterFunc(time.Second, f)
//	clk.Advance(time.Second) // the wheel's driver wakes; f runs on a worker
//
// Under testing/synctest a test may not need it: the system clock's time
// is then virtual already, and synctest.Wait says when everything is idle.
// The fake is for tests that also do real IO (a Raft quorum on loopback
// TCP, say), where a bubble's time cannot stand still.
package clocktest
