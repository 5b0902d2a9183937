package kafka

import (
	"math"
	"time"
)

// Quota enforcement (KIP-13, KIP-219) is in two parts: rateWindow, a pure
// state machine that measures a client's byte rate as Kafka's sampled Rate
// does and answers how long to throttle it, as Kafka's ClientQuotaManager
// does; and quotaManager (quota_manager.go), the thin driver that keeps one
// window per quota entity, reads the time from a clock.Clock and the
// quotas from the backend.
//
// Kafka's defaults: quota.window.num 11 samples of quota.window.size.seconds
// 1 second each.
const (
	quotaSamples = 11
	quotaWindow  = time.Second
)

// maxThrottle bounds a throttle time only so that it fits
// throttle_time_ms: Kafka does not bound the throttle of a byte rate (only
// of a request-time quota).
const maxThrottle = math.MaxInt32 * time.Millisecond

// rateSample is the bytes recorded in one window, which began at start.
type rateSample struct {
	start time.Time
	bytes float64
}

// rateWindow is the samples of one quota entity: a ring of at most
// quotaSamples windows of quotaWindow each, as Kafka's SampledStat.
type rateWindow struct {
	samples []rateSample
	current int
}

// purge resets the samples that began a whole measured span ago or more.
func (w *rateWindow) purge(now time.Time) {
	for i := range w.samples {
		if now.Sub(w.samples[i].start) >= quotaSamples*quotaWindow {
			w.samples[i] = rateSample{start: now}
		}
	}
}

// record adds bytes at now, in the current window or a new one once the
// current one is a window old.
func (w *rateWindow) record(now time.Time, bytes float64) {
	if len(w.samples) == 0 {
		w.samples = append(w.samples, rateSample{start: now})
		w.current = 0
	}
	if now.Sub(w.samples[w.current].start) >= quotaWindow {
		w.current = (w.current + 1) % quotaSamples
		if w.current >= len(w.samples) {
			w.samples = append(w.samples, rateSample{start: now})
		} else {
			w.samples[w.current] = rateSample{start: now}
		}
	}
	w.samples[w.current].bytes += bytes
}

// span is the time the rate is measured over at now (Kafka's
// Rate.windowSize): from the oldest sample's start, and at least
// quotaSamples-1 whole windows, so that a client's first burst is not
// measured over a few milliseconds. purge first.
func (w *rateWindow) span(now time.Time) time.Duration {
	oldest := now
	for _, s := range w.samples {
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	if full, least := int(elapsed/quotaWindow), quotaSamples-1; full < least {
		elapsed += time.Duration(least-full) * quotaWindow
	}
	return elapsed
}

// rate is the measured rate at now, in bytes per second. purge first.
func (w *rateWindow) rate(now time.Time) float64 {
	var total float64
	for _, s := range w.samples {
		total += s.bytes
	}
	return total / w.span(now).Seconds()
}

// recordThrottle records bytes at now against quota (bytes per second) and
// returns how long the client is to be throttled: zero while the measured
// rate is within the quota, else the time it takes the rate, measured over
// the same span, to come back down to the quota (Kafka's QuotaUtils:
// (rate-quota)/quota × span, in whole milliseconds).
func (w *rateWindow) recordThrottle(now time.Time, bytes, quota float64) time.Duration {
	w.purge(now)
	w.record(now, bytes)
	r := w.rate(now)
	if r <= quota {
		return 0
	}
	ms := math.Round((r - quota) / quota * float64(w.span(now)/time.Millisecond))
	return time.Duration(min(ms, float64(maxThrottle/time.Millisecond))) * time.Millisecond
}

// idle reports whether nothing was recorded within the measured span
// before now: the window can be forgotten.
func (w *rateWindow) idle(now time.Time) bool {
	for _, s := range w.samples {
		if now.Sub(s.start) < quotaSamples*quotaWindow {
			return false
		}
	}
	return true
}
