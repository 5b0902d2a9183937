package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReplicationQuotaMeasuresAsKafka(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := newReplicationQuota(1000, time.Second)
	require.False(t, q.exceeded(t0))
	// A quota that saw nothing yet spreads what it sees over 10 windows.
	q.record(t0, 5000)
	require.False(t, q.exceeded(t0), "5000 B over the least span of 10 s is 500 B/s")
	q.record(t0.Add(500*time.Millisecond), 6000)
	require.True(t, q.exceeded(t0.Add(time.Second)), "11000 B over 10 s")
	require.True(t, q.exceeded(t0.Add(9*time.Second)))
	// 11 s on, it is down to 11000 B over 11 s: the quota exactly, not above.
	require.False(t, q.exceeded(t0.Add(11*time.Second)))
	// Past 11 windows the samples are gone.
	require.False(t, q.exceeded(t0.Add(20*time.Second)))

	var none *replicationQuota
	none.record(t0, 1<<40)
	require.False(t, none.exceeded(t0), "no quota: never exceeded")
	zero := newReplicationQuota(0, time.Second)
	zero.record(t0, 1<<40)
	require.False(t, zero.exceeded(t0), "a zero rate is no quota")
}

// TestReplicationQuotaBoundsCatchUp drives a catch-up in virtual time: a
// follower fetching 64 KiB whenever the quota lets it, every 10 ms,
// copies no more than the rate allows (plus the first burst of 10
// windows and one fetch) and no less than 90% of it.
func TestReplicationQuotaBoundsCatchUp(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const rate, chunk = 1 << 20, 64 << 10
	for _, window := range []time.Duration{time.Second, 100 * time.Millisecond} {
		q := newReplicationQuota(rate, window)
		var sent int64
		now := t0
		for step := time.Duration(0); step < 60*time.Second; step += 10 * time.Millisecond {
			now = t0.Add(step)
			if !q.exceeded(now) {
				q.record(now, chunk)
				sent += chunk
			}
			elapsed := now.Sub(t0).Seconds()
			limit := rate*elapsed + float64(rate)*(quotaSamples-1)*window.Seconds() + chunk
			require.LessOrEqual(t, float64(sent), limit, "window %v: %d bytes after %.2f s", window, sent, elapsed)
		}
		require.GreaterOrEqual(t, float64(sent), 0.9*rate*60, "window %v: %d bytes in 60 s", window, sent)
		t.Logf("window %v: %.0f B/s over 60 s at a quota of %d B/s", window, float64(sent)/60, rate)
	}
}
