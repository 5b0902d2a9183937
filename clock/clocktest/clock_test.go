package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestAfterFuncOrder(t *testing.T) {
	c := clocktest.New(start)
	var fired []string
	at := func(name string) func() {
		return func() { fired = append(fired, name+"@"+c.Now().Sub(start).String()) }
	}
	c.AfterFunc(3*time.Second, at("c"))
	c.AfterFunc(time.Second, at("a"))
	b := c.AfterFunc(2*time.Second, at("b"))
	c.AfterFunc(time.Second, at("a2")) // same due time: arming order
	stopped := c.AfterFunc(time.Second, at("never"))
	require.True(t, stopped.Stop())
	require.False(t, stopped.Stop())
	require.Equal(t, 4, c.Pending())
	next, ok := c.Next()
	require.True(t, ok)
	require.Equal(t, start.Add(time.Second), next)

	c.Advance(2 * time.Second)
	require.Equal(t, []string{"a@1s", "a2@1s", "b@2s"}, fired)
	require.False(t, b.Stop(), "fired already")
	require.Equal(t, start.Add(2*time.Second), c.Now())

	// A callback that arms a call due within the same Advance sees it run;
	// a call due now waits for the next Advance.
	c.AfterFunc(500*time.Millisecond, func() {
		at("d")()
		c.AfterFunc(time.Second, at("e"))
	})
	c.AfterFunc(0, at("now"))
	require.Len(t, fired, 3, "AfterFunc(0) ran before any Advance")
	c.Advance(2 * time.Second)
	require.Equal(t, []string{"a@1s", "a2@1s", "b@2s", "now@2s", "d@2.5s", "c@3s", "e@3.5s"}, fired)
	require.Equal(t, start.Add(4*time.Second), c.Now())
	require.Zero(t, c.Pending())
	_, ok = c.Next()
	require.False(t, ok)

	c.AdvanceTo(start) // the past: nothing
	require.Equal(t, start.Add(4*time.Second), c.Now())
	c.AdvanceTo(start.Add(5 * time.Second))
	require.Equal(t, start.Add(5*time.Second), c.Now())
	require.Panics(t, func() { c.Advance(-1) })
}

func received(t *testing.T, ch <-chan time.Time) (time.Time, bool) {
	t.Helper()
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestTimer(t *testing.T) {
	c := clocktest.New(start)
	tm := c.NewTimer(time.Second)
	require.Equal(t, 1, c.Pending())
	c.Advance(time.Second - 1)
	_, ok := received(t, tm.C())
	require.False(t, ok, "delivered early")
	c.Advance(time.Hour)
	v, ok := received(t, tm.C())
	require.True(t, ok)
	require.Equal(t, start.Add(time.Second), v, "delivers its due time")
	require.Zero(t, c.Pending())

	// Stop and Reset say whether the timer was armed, and drop a delivery
	// not yet received.
	require.False(t, tm.Stop())
	require.False(t, tm.Reset(time.Second))
	require.True(t, tm.Reset(2*time.Second))
	c.Advance(2 * time.Second)
	require.False(t, tm.Reset(time.Minute), "fired")
	_, ok = received(t, tm.C())
	require.False(t, ok, "stale delivery kept across Reset")
	require.True(t, tm.Stop())
	c.Advance(time.Hour)
	_, ok = received(t, tm.C())
	require.False(t, ok, "stopped timer delivered")

	// d <= 0 delivers at once, from NewTimer and Reset.
	now := c.NewTimer(0)
	v, ok = received(t, now.C())
	require.True(t, ok)
	require.Equal(t, c.Now(), v)
	require.False(t, now.Reset(-time.Second))
	_, ok = received(t, now.C())
	require.True(t, ok)
	require.Zero(t, c.Pending())
}

// TestTimersAndFuncsInterleave: timers deliver, and calls run, in due order
// with the clock reading each one's due time.
func TestTimersAndFuncsInterleave(t *testing.T) {
	c := clocktest.New(start)
	tm := c.NewTimer(2 * time.Second)
	var sawTimer []bool
	c.AfterFunc(time.Second, func() { _, ok := received(t, tm.C()); sawTimer = append(sawTimer, ok) })
	c.AfterFunc(3*time.Second, func() { _, ok := received(t, tm.C()); sawTimer = append(sawTimer, ok) })
	c.Advance(3 * time.Second)
	require.Equal(t, []bool{false, true}, sawTimer)
}

// TestConcurrent arms, stops and resets timers from many goroutines while
// another advances (run with -race). Every call is run exactly once or
// stopped, never both.
func TestConcurrent(t *testing.T) {
	c := clocktest.New(start)
	const workers, per = 4, 200
	var mu sync.Mutex
	ran := map[int]int{}
	stopped := map[int]bool{}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(workers)
	for w := range workers {
		go func() {
			defer wg.Done()
			tm := c.NewTimer(time.Millisecond)
			for i := range per {
				id := w*per + i
				s := c.AfterFunc(time.Duration(i%7)*time.Millisecond, func() {
					mu.Lock()
					ran[id]++
					mu.Unlock()
				})
				if i%3 == 0 && s.Stop() {
					mu.Lock()
					stopped[id] = true
					mu.Unlock()
				}
				tm.Reset(time.Duration(i%5) * time.Millisecond)
				_ = c.Now()
			}
			tm.Stop()
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	for advancing := true; advancing; {
		select {
		case <-done:
			advancing = false
		default:
		}
		c.Advance(time.Millisecond)
	}
	c.Advance(time.Second)
	require.Zero(t, c.Pending())
	for id := range workers * per {
		if stopped[id] {
			require.Zero(t, ran[id], "call %d stopped and run", id)
		} else {
			require.Equal(t, 1, ran[id], "call %d", id)
		}
	}
}
