package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

var quotaT0 = time.Unix(1_700_000_000, 0)

// TestRateWindowThrottle checks recordThrottle against values worked out
// by hand from Kafka's Rate and QuotaUtils: the rate is the bytes of the
// samples over the span (at least 10 whole windows), the throttle
// (rate-quota)/quota × span.
func TestRateWindowThrottle(t *testing.T) {
	type rec struct {
		at    time.Duration // since quotaT0
		bytes float64
		want  time.Duration
	}
	for _, tc := range []struct {
		name  string
		quota float64
		recs  []rec
	}{
		{"under the quota", 1000, []rec{{0, 5000, 0}, {time.Second, 5000, 0}}},
		// 10 000 bytes over the 10 s least span: exactly the quota.
		{"at the quota", 1000, []rec{{0, 10000, 0}}},
		// 20 000 over 10 s is 2000/s: (2000-1000)/1000 × 10 s.
		{"first burst twice the quota", 1000, []rec{{0, 20000, 10 * time.Second}}},
		// 11 000 over 10 s: 1100/s, 0.1 × 10 s.
		{"10% over", 1000, []rec{{0, 11000, time.Second}}},
		// 50 000 over 10 s: 5000/s, 40 s; then 61 000 over 10 s, 51 s;
		// 12 s in, both samples are 11 s old or more: purged, the rate
		// starts over.
		{"old samples purged", 1000, []rec{{0, 50000, 40 * time.Second}, {time.Second, 11000, 51 * time.Second}, {12 * time.Second, 0.001, 0}}},
		// 5 windows of 3000 at t=0..4, 15 000 over 10 s: 1500/s, 5 s.
		{"several windows", 1000, []rec{{0, 3000, 0}, {time.Second, 3000, 0}, {2 * time.Second, 3000, 0}, {3 * time.Second, 3000, 2 * time.Second}, {4 * time.Second, 3000, 5 * time.Second}}},
		// 15 s of 2000/s, one record a second: 11 samples, 22 000 over
		// the span from the oldest (t=5 s) to t=15 s, 10 s: 2200/s.
		{"steady over", 1000, func() []rec {
			var rs []rec
			for i := 0; i <= 15; i++ {
				rs = append(rs, rec{time.Duration(i) * time.Second, 2000, -1})
			}
			rs[15].want = 12 * time.Second
			return rs
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w rateWindow
			for i, r := range tc.recs {
				got := w.recordThrottle(quotaT0.Add(r.at), r.bytes, tc.quota)
				if r.want >= 0 {
					require.Equal(t, r.want, got, "record %d", i)
				}
			}
		})
	}
}

// simulateProducer drives a producer that sends batch bytes every gap of
// driven time, and waits out each throttle before its next request, as a
// KIP-219 client (and the muted connection) does. It returns the rate
// measured between warmup and end, in bytes per second, and the
// throttles.
func simulateProducer(quota, batch float64, gap, warmup, end time.Duration) (rate float64, throttled int) {
	var w rateWindow
	now := quotaT0
	var bytes float64
	for now.Sub(quotaT0) < end {
		d := w.recordThrottle(now, batch, quota)
		if now.Sub(quotaT0) >= warmup {
			bytes += batch
		}
		if d > 0 {
			throttled++
		}
		now = now.Add(max(d, gap))
	}
	return bytes / (end - warmup).Seconds(), throttled
}

// TestQuotaProducerOverItsRate: producers sending at 2 to 100 times their
// byte rate are held to within 20% of it (measured over driven time, past
// the first measured span).
func TestQuotaProducerOverItsRate(t *testing.T) {
	for _, tc := range []struct {
		quota, batch float64
		gap          time.Duration
	}{
		{1 << 20, 64 << 10, 10 * time.Millisecond},   // 6.4 MB/s against 1 MiB/s
		{1 << 20, 1 << 20, 500 * time.Millisecond},   // 2 MiB/s
		{10 << 10, 16 << 10, time.Millisecond},       // batches larger than the quota
		{100 << 10, 1 << 10, 100 * time.Microsecond}, // small batches, 100×
	} {
		rate, throttled := simulateProducer(tc.quota, tc.batch, tc.gap, 30*time.Second, 150*time.Second)
		t.Logf("quota %.0f B/s, batch %.0f every %v: measured %.0f B/s (%.1f%% of the quota), %d throttles", tc.quota, tc.batch, tc.gap, rate, 100*rate/tc.quota, throttled)
		require.InDelta(t, tc.quota, rate, 0.2*tc.quota)
		require.Positive(t, throttled)
	}
}

// TestQuotaUnderItsRateNeverThrottled: a producer below its quota is
// never throttled, however long it runs.
func TestQuotaUnderItsRateNeverThrottled(t *testing.T) {
	for _, frac := range []float64{0.1, 0.5, 0.9} {
		quota := float64(1 << 20)
		batch := quota * frac / 100 // 100 batches a second
		rate, throttled := simulateProducer(quota, batch, 10*time.Millisecond, 0, 120*time.Second)
		require.Zero(t, throttled, "%.0f%% of the quota", 100*frac)
		require.InDelta(t, quota*frac, rate, 0.01*quota)
	}
}

// quotaSetBackend is a QuotaBackend holding a fixed set.
type quotaSetBackend struct{ set *log.QuotaSet }

func (b quotaSetBackend) ClientQuotas() *log.QuotaSet { return b.set }
func (quotaSetBackend) AlterClientQuotas(context.Context, []log.QuotaAlteration, bool) ([]error, error) {
	return nil, nil
}

// TestQuotaManagerWindows: a user's quota is shared by all its client ids;
// a default quota applies to each user apart; a client with no quota is
// not measured.
func TestQuotaManagerWindows(t *testing.T) {
	set, _ := (&log.QuotaSet{}).Alter([]log.QuotaAlteration{
		{Entity: log.QuotaEntity{User: log.QuotaNamed("alice")}, Ops: []log.QuotaOp{{Key: log.QuotaProducerByteRate, Value: 1000}}},
		{Entity: log.QuotaEntity{User: log.QuotaDefault()}, Ops: []log.QuotaOp{{Key: log.QuotaProducerByteRate, Value: 1000}}},
	})
	m := newQuotaManager(quotaSetBackend{set}, clocktest.New(quotaT0))
	rec := func(quota, user, clientID string, n int64) time.Duration {
		return m.record(quota, user, clientID, func() int64 { return n }, false)
	}
	// 10 000 bytes over the 10 s least span is the quota: alice's two
	// client ids together reach it, the next byte is over.
	require.Zero(t, rec(log.QuotaProducerByteRate, "alice", "a", 5000))
	require.Zero(t, rec(log.QuotaProducerByteRate, "alice", "b", 5000))
	require.Positive(t, rec(log.QuotaProducerByteRate, "alice", "c", 1000))
	// bob and carol each have the default quota of their own.
	require.Zero(t, rec(log.QuotaProducerByteRate, "bob", "a", 10000))
	require.Zero(t, rec(log.QuotaProducerByteRate, "carol", "a", 10000))
	require.Positive(t, rec(log.QuotaProducerByteRate, "bob", "z", 1000))
	// No consumer quota: fetches are not measured.
	require.Zero(t, rec(log.QuotaConsumerByteRate, "alice", "a", 1<<30))
	require.Len(t, m.windows, 3)
	// Idle windows are forgotten once a whole span has passed.
	clk := m.clock().(*clocktest.Clock)
	clk.Advance(quotaSamples * quotaWindow)
	require.Zero(t, rec(log.QuotaProducerByteRate, "bob", "a", 1))
	require.Len(t, m.windows, 1)
}

// TestQuotaManagerUndo: bytes recorded with undo are taken back when the
// client is throttled (a fetch answered empty), kept when it is not; the
// size is not computed when no quota applies.
func TestQuotaManagerUndo(t *testing.T) {
	set, _ := (&log.QuotaSet{}).Alter([]log.QuotaAlteration{
		{Entity: log.QuotaEntity{User: log.QuotaNamed("alice")}, Ops: []log.QuotaOp{{Key: log.QuotaConsumerByteRate, Value: 1000}}},
	})
	m := newQuotaManager(quotaSetBackend{set}, clocktest.New(quotaT0))
	n := func(v int64) func() int64 { return func() int64 { return v } }
	require.Zero(t, m.record(log.QuotaConsumerByteRate, "alice", "a", n(9000), true), "under: kept")
	require.Positive(t, m.record(log.QuotaConsumerByteRate, "alice", "a", n(5000), true), "over: taken back")
	// Only the 9000 kept count: 1000 more is exactly the quota.
	require.Zero(t, m.record(log.QuotaConsumerByteRate, "alice", "a", n(1000), true))
	require.Positive(t, m.record(log.QuotaConsumerByteRate, "alice", "a", n(1), true))
	max, ok := m.maxWindowBytes(log.QuotaConsumerByteRate, "alice", "a")
	require.True(t, ok)
	require.Equal(t, int64(10000), max)
	_, ok = m.maxWindowBytes(log.QuotaConsumerByteRate, "bob", "a")
	require.False(t, ok)
	require.Zero(t, m.record(log.QuotaConsumerByteRate, "bob", "a", func() int64 { panic("sized without a quota") }, true))
}
