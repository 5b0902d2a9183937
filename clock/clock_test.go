package clock_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock"
)

// TestSystem runs the system clock in a synctest bubble, where its time is
// virtual and exact.
func TestSystem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.System()
		start := c.Now()

		tm := c.NewTimer(time.Second)
		at := <-tm.C()
		require.Equal(t, time.Second, at.Sub(start))
		require.False(t, tm.Stop(), "fired already")
		require.False(t, tm.Reset(time.Second), "was not armed")
		require.True(t, tm.Stop())
		time.Sleep(2 * time.Second) // virtual: past the stopped deadline
		select {
		case <-tm.C():
			t.Fatal("stopped timer delivered")
		default:
		}

		var fired time.Duration
		c.AfterFunc(time.Minute, func() { fired = c.Now().Sub(start) })
		never := c.AfterFunc(time.Minute, func() { t.Error("stopped AfterFunc ran") })
		require.True(t, never.Stop())
		time.Sleep(time.Hour)
		synctest.Wait()
		require.Equal(t, 3*time.Second+time.Minute, fired)
	})
}
