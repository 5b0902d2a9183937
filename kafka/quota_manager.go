package kafka

import (
	"context"
	"math"
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
// applies or it is kept. With undo, a throttled client's bytes are taken
// back out (Kafka's unrecord: a throttled fetch is answered empty, so
// nothing was sent). bytes is called only when a quota applies.
func (m *quotaManager) record(quota, user, clientID string, bytes func() int64, undo bool) time.Duration {
	q, from, ok := m.b.ClientQuotas().Lookup(quota, user, clientID)
	if !ok {
		return 0
	}
	n := bytes()
	if n <= 0 {
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
	d := w.recordThrottle(now, float64(n), q)
	if d > 0 && undo {
		w.record(now, -float64(n))
	}
	return d
}

// maxWindowBytes is the most bytes the quota of user and clientID lets
// through in a measured span (Kafka's getMaxValueInQuotaWindow: the quota
// × (samples-1) windows); false if no quota applies.
func (m *quotaManager) maxWindowBytes(quota, user, clientID string) (int64, bool) {
	q, _, ok := m.b.ClientQuotas().Lookup(quota, user, clientID)
	if !ok {
		return 0, false
	}
	return int64(min(q*(quotaSamples-1)*quotaWindow.Seconds(), math.MaxInt32)), true
}

// headerClientID is the client id of a request, "" if null.
func headerClientID(h *header) string {
	if h.clientID != nil {
		return *h.clientID
	}
	return ""
}

// boundFetchToQuota lowers a consumer's fetch max bytes to what its quota
// lets through in a measured span, as Kafka does, so that a response is
// never more than the quota could ever let through. Followers' fetches
// are not client fetches. Before the handler; with quotas only.
func (c *conn) boundFetchToQuota(h *header, r kmsg.Request) {
	req, ok := r.(*kmsg.FetchRequest)
	if !ok || req.ReplicaID >= 0 || req.Version < 3 || req.MaxBytes <= 0 || c.s.caps.quotas.b.ClientQuotas().Len() == 0 {
		return
	}
	if n, ok := c.s.caps.quotas.maxWindowBytes(log.QuotaConsumerByteRate, quotaUser(c.principal()), headerClientID(h)); ok {
		req.MaxBytes = int32(min(int64(req.MaxBytes), max(n, 1)))
	}
}

// throttle records the bytes of a produce request or fetch response
// against its client's quota, sets the response's throttle_time_ms and
// returns how long the connection is to be muted once it is sent
// (KIP-219). The bytes are those Kafka counts: a produce's whole request
// as read (header included), a fetch's whole response as encoded. A
// fetch over the quota is answered empty, as Kafka's KIP-219 broker does:
// its bytes are not counted, its records are released and the consumer
// fetches them again once its throttle has passed. Followers' fetches
// are not measured (client quotas are not replication quotas).
func (c *conn) throttle(p *pending, req kmsg.Request, rep *reply) time.Duration {
	m := c.s.caps.quotas
	if m == nil || m.b.ClientQuotas().Len() == 0 {
		return 0 // the common case: no quotas, nothing measured
	}
	user, clientID := quotaUser(c.principal()), headerClientID(&p.h)
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if _, ok := rep.resp.(*kmsg.ProduceResponse); !ok && !rep.none {
			return 0
		}
		d := m.record(log.QuotaProducerByteRate, user, clientID, func() int64 { return p.reqBytes }, false)
		if resp, ok := rep.resp.(*kmsg.ProduceResponse); ok {
			resp.ThrottleMillis = int32(d / time.Millisecond)
		} // else acks=0: muted without an answer
		return d
	case *kmsg.FetchRequest:
		resp, ok := rep.resp.(*kmsg.FetchResponse)
		if !ok || r.ReplicaID >= 0 {
			return 0
		}
		size := func() int64 { return fetchResponseSize(p.h, resp, rep.records) }
		d := m.record(log.QuotaConsumerByteRate, user, clientID, size, true)
		if d > 0 {
			c.dropFetched(rep.records)
			empty := r.ResponseKind().(*kmsg.FetchResponse)
			empty.SessionID = resp.SessionID
			rep.resp, rep.records = empty, nil
			resp = empty
		}
		resp.ThrottleMillis = int32(d / time.Millisecond)
		return d
	}
	return 0
}

// fetchResponseSize is the size of a fetch response frame: encoded, and
// the records spliced into it.
func fetchResponseSize(h header, resp *kmsg.FetchResponse, records []fetched) int64 {
	resp.SetVersion(h.version)
	n := int64(len(appendResponse(nil, h, resp)))
	for i := range records {
		n += records[i].len()
	}
	return n
}

// dropFetched releases the records of a fetch response that will not be
// sent.
func (c *conn) dropFetched(records []fetched) {
	for i := range records {
		records[i].b.Release()
		c.copied.Add(-records[i].copied)
	}
}

// mute keeps the reader from handling another request for d from now,
// once a throttled response is sent. Writer only.
func (c *conn) mute(d time.Duration) {
	c.mutedUntil.Store(c.s.caps.quotas.clock().Now().Add(d).UnixNano())
}

// waitMuted waits, before a request read is handled, until the mute of a
// throttled response has passed; false if the connection stops meanwhile.
// A connection throttled once handles one request at a time from then on,
// as Kafka handles every connection: the next request waits for the
// responses before it to be written, so that it never slips in ahead of
// the mute of a throttled one (a client with several requests in flight
// would otherwise have them all handled before the first throttle is
// known). Reader only.
func (c *conn) waitMuted() bool {
	until := c.mutedUntil.Load()
	if until == 0 {
		return true
	}
	for c.inFlight.Load() > 0 { // each written response frees its request: c.freed
		select {
		case <-c.freed:
		case <-c.ctx.Done():
			return false
		}
	}
	until = c.mutedUntil.Load()
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
