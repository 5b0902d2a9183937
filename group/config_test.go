package group_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
)

// TestSessionTimeoutBoundAlone: either bound may be set alone, the other
// taking its default (6 s, 30 min), and the one set is what Join enforces.
// (New used to compare the bounds before the defaults, so a
// MinSessionTimeout alone failed against a MaxSessionTimeout of 0.)
func TestSessionTimeoutBoundAlone(t *testing.T) {
	join := func(c *group.Coordinator, session time.Duration) error {
		r := req("client", "a")
		r.SessionTimeout = session
		_, err := c.Join(t.Context(), r)
		return err
	}

	c := newCoordinator(t, group.Config{MinSessionTimeout: 20 * time.Second})
	require.ErrorIs(t, join(c, 10*time.Second), group.ErrInvalidSessionTimeout, "below the minimum set")
	require.ErrorIs(t, join(c, time.Hour), group.ErrInvalidSessionTimeout, "above the default maximum")
	require.NoError(t, join(c, 20*time.Second))

	c = newCoordinator(t, group.Config{MaxSessionTimeout: 10 * time.Minute})
	require.ErrorIs(t, join(c, 20*time.Minute), group.ErrInvalidSessionTimeout, "above the maximum set")
	require.ErrorIs(t, join(c, time.Second), group.ErrInvalidSessionTimeout, "below the default minimum")
	require.NoError(t, join(c, 10*time.Minute))

	for _, cfg := range []group.Config{
		{MinSessionTimeout: time.Hour},    // above the default maximum
		{MaxSessionTimeout: time.Second},  // below the default minimum
		{MinSessionTimeout: -time.Second}, // negative
		{MaxSessionTimeout: -time.Second}, // negative
		{MinSessionTimeout: 2 * time.Minute, // both set, crossed
			MaxSessionTimeout: time.Minute},
	} {
		cfg.Partitions = partitionsOf(testTopics)
		_, err := group.New(cfg)
		require.ErrorIs(t, err, group.ErrInvalidConfig, "%+v", cfg)
	}
}
