package kafka

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// QuotaBackend keeps the client quotas (KIP-13, KIP-55) the server
// enforces and serves DescribeClientQuotas and AlterClientQuotas.
// *log.Broker keeps them in a file of its data dir.
type QuotaBackend interface {
	// ClientQuotas is the set enforced now; it is read on every produce
	// and fetch, so it must be cheap.
	ClientQuotas() *log.QuotaSet
	// AlterClientQuotas applies alterations, durably before it returns
	// unless validateOnly: one error per alteration (log.ErrInvalidQuota
	// for an invalid one, which changes nothing), or an error if none
	// could be applied.
	AlterClientQuotas(ctx context.Context, as []log.QuotaAlteration, validateOnly bool) ([]error, error)
}

// quotaKey is the window a client's bytes are measured in: the entity
// whose quota applies, with its default parts taken as the client's own
// names, so that a default quota applies to each user (client id) apart,
// and a user's quota to all of that user's client ids together (Kafka's
// quota metric tags).
type quotaKey struct {
	quota        string // log.QuotaProducerByteRate or log.QuotaConsumerByteRate
	user, client string
	hasUser      bool
	hasClient    bool
}

// quotaManager is the driver of the rate windows: one per quota key,
// timed by clock, forgotten once idle a whole measured span.
type quotaManager struct {
	b   QuotaBackend
	clk atomic.Value // clock.Clock; tests replace it (setClock)

	mu      sync.Mutex
	windows map[quotaKey]*rateWindow
	swept   time.Time
}

func newQuotaManager(b QuotaBackend, c clock.Clock) *quotaManager {
	m := &quotaManager{b: b, windows: map[quotaKey]*rateWindow{}}
	m.setClock(c)
	return m
}

func (m *quotaManager) clock() clock.Clock     { return *m.clk.Load().(*clock.Clock) }
func (m *quotaManager) setClock(c clock.Clock) { m.clk.Store(&c) }

// quotaUser is the user a principal's quotas are of: its name
// ("User:alice" is alice; an unauthenticated client is ANONYMOUS).
func quotaUser(principal string) string {
	return strings.TrimPrefix(principal, acl.User(""))
}

// record records bytes of the quota (a byte-rate key) of user and
// clientID and returns how long to throttle the client: zero if no quota
// applies or it is kept.
func (m *quotaManager) record(quota, user, clientID string, bytes int64) time.Duration {
	q, from, ok := m.b.ClientQuotas().Lookup(quota, user, clientID)
	if !ok || bytes <= 0 {
		return 0
	}
	k := quotaKey{quota: quota, hasUser: from.User.In, hasClient: from.ClientID.In}
	if k.hasUser {
		k.user = user
	}
	if k.hasClient {
		k.client = clientID
	}
	now := m.clock().Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now.Sub(m.swept) >= quotaSamples*quotaWindow {
		for k, w := range m.windows {
			if w.idle(now) {
				delete(m.windows, k)
			}
		}
		m.swept = now
	}
	w := m.windows[k]
	if w == nil {
		w = &rateWindow{}
		m.windows[k] = w
	}
	return w.recordThrottle(now, float64(bytes), q)
}

// throttle records the bytes of a produce request or fetch response
// against its client's quota, sets the response's throttle_time_ms and
// returns how long the connection is to be muted once it is sent
// (KIP-219). A produce is counted by its record batches (Kafka counts the
// whole request), a fetch by the records it returns.
func (c *conn) throttle(h *header, rep *reply) time.Duration {
	m := c.s.caps.quotas
	if m == nil || m.b.ClientQuotas().Len() == 0 {
		return 0 // the common case: no quotas, nothing measured
	}
	clientID := ""
	if h.clientID != nil {
		clientID = *h.clientID
	}
	var d time.Duration
	switch resp := rep.resp.(type) {
	case *kmsg.ProduceResponse:
		d = m.record(log.QuotaProducerByteRate, quotaUser(c.principal()), clientID, rep.quotaBytes)
		resp.ThrottleMillis = int32(d / time.Millisecond)
	case *kmsg.FetchResponse:
		var n int64
		if rep.records != nil {
			for i := range rep.records {
				n += rep.records[i].len()
			}
		} else {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					n += int64(len(p.RecordBatches))
				}
			}
		}
		d = m.record(log.QuotaConsumerByteRate, quotaUser(c.principal()), clientID, n)
		resp.ThrottleMillis = int32(d / time.Millisecond)
	default:
		if rep.none && rep.quotaBytes > 0 { // acks=0: muted without an answer
			d = m.record(log.QuotaProducerByteRate, quotaUser(c.principal()), clientID, rep.quotaBytes)
		}
	}
	return d
}

// mute keeps the reader from handling another request for d from now,
// once a throttled response is sent. Writer only.
func (c *conn) mute(d time.Duration) {
	c.mutedUntil.Store(c.s.caps.quotas.clock().Now().Add(d).UnixNano())
}

// waitMuted waits, before a request read is handled, until the mute of a
// throttled response has passed; false if the connection stops meanwhile.
// Reader only.
func (c *conn) waitMuted() bool {
	until := c.mutedUntil.Load()
	if until == 0 {
		return true
	}
	clk := c.s.caps.quotas.clock()
	for {
		d := time.Unix(0, until).Sub(clk.Now())
		if d <= 0 {
			return true
		}
		t := clk.NewTimer(d)
		select {
		case <-t.C():
		case <-c.ctx.Done():
			t.Stop()
			return false
		}
		until = c.mutedUntil.Load() // a later response may have extended it
	}
}
