package replica

import (
	"sync"
	"time"
)

// Replication throttles (Kafka's leader.replication.throttled.rate and
// follower.replication.throttled.rate, ReplicationQuotaManager): a cap,
// in bytes per second, on what a leader sends to, and what a follower
// fetches for, the replicas that are catching up — out of the ISR, as a
// partition's new replicas are while a reassignment copies it — so that
// a move does not take the bandwidth the clients and the in-sync
// followers need. In-sync replicas are never throttled (Kafka's
// shouldLeaderThrottle and shouldFollowerThrottle). Kafka throttles only
// the replicas its topics list in leader/follower.replication.throttled.
// replicas; a member throttles every replica out of the ISR, as with "*"
// on every topic.
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
	rate   int64 // bytes per second; 0: unlimited
	window time.Duration

	mu      sync.Mutex
	samples [quotaSamples]quotaSample
	cur     int
}

type quotaSample struct {
	start time.Time // zero: unused
	bytes int64
}

func newReplicationQuota(rate int64, window time.Duration) *replicationQuota {
	return &replicationQuota{rate: rate, window: window}
}

// enabled reports whether the quota limits anything.
func (q *replicationQuota) enabled() bool { return q != nil && q.rate > 0 }

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
	return q.measured(now) > float64(q.rate)
}
