package grouptest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group/grouptest"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := grouptest.NewClock(start)
	var fired []string
	at := func(name string) func() {
		return func() { fired = append(fired, name+"@"+c.Now().Sub(start).String()) }
	}
	c.AfterFunc(3*time.Second, at("c"))
	c.AfterFunc(time.Second, at("a"))
	b := c.AfterFunc(2*time.Second, at("b"))
	c.AfterFunc(time.Second, at("a2")) // same due time: creation order
	stopped := c.AfterFunc(time.Second, at("never"))
	require.True(t, stopped.Stop())
	require.False(t, stopped.Stop())
	require.Equal(t, 4, c.Pending())

	c.Advance(2 * time.Second)
	require.Equal(t, []string{"a@1s", "a2@1s", "b@2s"}, fired)
	require.False(t, b.Stop(), "fired already")
	require.Equal(t, start.Add(2*time.Second), c.Now())

	// A callback that arms a timer due within the same Advance sees it fire.
	c.AfterFunc(500*time.Millisecond, func() {
		at("d")()
		c.AfterFunc(time.Second, at("e"))
	})
	c.AfterFunc(0, at("now"))
	c.Advance(2 * time.Second)
	require.Equal(t, []string{"a@1s", "a2@1s", "b@2s", "now@2s", "d@2.5s", "c@3s", "e@3.5s"}, fired)
	require.Equal(t, start.Add(4*time.Second), c.Now())
	require.Zero(t, c.Pending())
}
