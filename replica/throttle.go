package replica

import (
	"sync"
	"sync/atomic"
	"time"
)

// Replication throttles (Kafka's leader.replication.throttled.rate and
// follower.replication.throttled.rate, ReplicationQuotaManager): a cap,
// in bytes per second, on what a leader sends to, and what a follower
// fetches for, the replicas that are catching up — out of the ISR, as a
// partition's new replicas are while a reassignment copies it — so that
// a move does not take the bandwidth the clients and the in-sync
// followers need. In-sync replicas are never throttled (Kafka's
// shouldLeaderThrottle and shouldFollowerThrottle).
//
// The rates are the dynamic broker configs (Kafka's, in the metadata:
// throttle_config.go) — the broker's own, else the cluster's default —
// or, when neither is set, Config's static ones. Which replicas are
// throttled, the topics say, as Kafka's leader/follower.replication.
// throttled.replicas do ("*" or partition:broker lists naming this
// member); a topic that sets neither list is throttled on every replica
// out of the ISR while the rate in effect is the static one (what a
// member did before the lists existed), and not at all under a dynamic
// rate, as in Kafka.
//
// The rate is measured as Kafka's quotas measure it: bytes over the last
// quotaSamples windows of quotaWindow, divided by their span, at least
// quotaSamples-1 windows (so a quota that has seen little traffic lets a
// burst of that many windows' worth through). While the rate is above
// the quota, throttled partitions get no records: a leader answers them
// with none, a follower leaves them out of its fetch.

const (
	quotaSamples = 11          // replication.quota.window.num
	quotaWindow  = time.Second // replication.quota.window.size.seconds
)

// replicationQuota is one direction's byte rate quota. Its zero rate is
// no quota. Safe for concurrent use.
type replicationQuota struct {
	static int64        // Config's rate; 0: unlimited
	rate   atomic.Int64 // the rate in effect, bytes per second; 0: unlimited
	// dynamic: rate is a dynamic broker config's, not static.
	dynamic atomic.Bool
	window  time.Duration

	mu      sync.Mutex
	samples [quotaSamples]quotaSample
	cur     int
}

type quotaSample struct {
	start time.Time // zero: unused
	bytes int64
}

func newReplicationQuota(rate int64, window time.Duration) *replicationQuota {
	q := &replicationQuota{static: rate, window: window}
	q.rate.Store(rate)
	return q
}

// setDynamic makes a dynamic rate the one in effect (set false: the
// static rate again).
func (q *replicationQuota) setDynamic(rate int64, set bool) {
	if !set {
		rate = q.static
	}
	q.rate.Store(rate)
	q.dynamic.Store(set)
}

// enabled reports whether the quota limits anything.
func (q *replicationQuota) enabled() bool { return q != nil && q.rate.Load() > 0 }

// sample returns the current sample at now, starting a new one (and
// dropping the oldest) when the current one is a window old. q.mu is held.
func (q *replicationQuota) sample(now time.Time) *quotaSample {
	s := &q.samples[q.cur]
	if s.start.IsZero() {
		s.start = now
		return s
	}
	if now.Sub(s.start) >= q.window {
		q.cur = (q.cur + 1) % quotaSamples
		s = &q.samples[q.cur]
		*s = quotaSample{start: now}
	}
	return s
}

// record counts n bytes sent (leader) or fetched (follower) at now.
func (q *replicationQuota) record(now time.Time, n int64) {
	if !q.enabled() || n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sample(now).bytes += n
}

// measured returns the rate at now, in bytes per second, as Kafka's Rate
// measures it. q.mu is held.
func (q *replicationQuota) measured(now time.Time) float64 {
	var total int64
	oldest := now
	for _, s := range q.samples {
		if s.start.IsZero() || now.Sub(s.start) >= quotaSamples*q.window {
			continue
		}
		total += s.bytes
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	span := max(now.Sub(oldest), (quotaSamples-1)*q.window)
	return float64(total) / span.Seconds()
}

// exceeded reports whether the rate at now is above the quota.
func (q *replicationQuota) exceeded(now time.Time) bool {
	if !q.enabled() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.measured(now) > float64(q.rate.Load())
}
