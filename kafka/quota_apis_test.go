package kafka

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func alterQuotasReq(v int16, validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.SetVersion(v)
	req.Entries, req.ValidateOnly = entries, validateOnly
	return req
}

// quotaEntry is an AlterClientQuotas entry: parts are type, name pairs
// (name "" is the default), ops key=value or key=-1 to remove.
func quotaEntry(parts []string, ops map[string]float64) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for i := 0; i+1 < len(parts); i += 2 {
		p := kmsg.NewAlterClientQuotasRequestEntryEntity()
		p.Type = parts[i]
		if parts[i+1] != "" {
			p.Name = kmsg.StringPtr(parts[i+1])
		}
		e.Entity = append(e.Entity, p)
	}
	for k, v := range ops {
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value, op.Remove = k, v, v == -1
		e.Ops = append(e.Ops, op)
	}
	return e
}

func describeQuotasReq(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasRequest {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.SetVersion(1)
	req.Components, req.Strict = comps, strict
	return req
}

func quotaComp(typ string, mt kmsg.QuotasMatchType, match *string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, mt, match
	return c
}

// quotasDescribed is a DescribeClientQuotas answer as "entity: key=value ...".
func quotasDescribed(resp *kmsg.DescribeClientQuotasResponse) []string {
	var out []string
	for _, e := range resp.Entries {
		var parts, vals []string
		for _, p := range e.Entity {
			n := "<default>"
			if p.Name != nil {
				n = *p.Name
			}
			parts = append(parts, p.Type+"="+n)
		}
		for _, v := range e.Values {
			vals = append(vals, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
		}
		out = append(out, strings.Join(parts, ",")+": "+strings.Join(vals, " "))
	}
	return out
}

func TestClientQuotaAPIs(t *testing.T) {
	a := startAuthz(t, Config{})
	bob, admin := a.as("bob"), a.as("admin")
	keys := apiKeys(t, bob)
	require.Equal(t, [2]int16{0, 1}, keys[describeClientQuotasKey])
	require.Equal(t, [2]int16{0, 1}, keys[alterClientQuotasKey])
	rate := map[string]float64{log.QuotaProducerByteRate: 1024}

	// bob may not alter nor describe quotas: nothing changes.
	ar := bob.do(alterQuotasReq(1, false, quotaEntry([]string{"user", "bob"}, rate))).(*kmsg.AlterClientQuotasResponse)
	require.Equal(t, errClusterAuthorizationFailed, ar.Entries[0].ErrorCode)
	require.Equal(t, "bob", *ar.Entries[0].Entity[0].Name)
	require.Zero(t, a.b.ClientQuotas().Len())
	require.Equal(t, errClusterAuthorizationFailed, bob.do(describeQuotasReq(false)).(*kmsg.DescribeClientQuotasResponse).ErrorCode)
	// With AlterConfigs (DescribeConfigs implied) on the cluster he may.
	a.grant(allowTo("bob", acl.OpAlterConfigs, acl.Cluster()))
	require.Equal(t, errNone, bob.do(describeQuotasReq(false)).(*kmsg.DescribeClientQuotasResponse).ErrorCode)

	// Bad entities, keys and values: INVALID_REQUEST each, nothing changes.
	bad := []kmsg.AlterClientQuotasRequestEntry{
		quotaEntry(nil, rate),
		quotaEntry([]string{"group", "g"}, rate),
		quotaEntry([]string{"ip", "10.0.0.1"}, rate),
		quotaEntry([]string{"user", "a", "user", "b"}, rate),
		quotaEntry([]string{"user", "<default>"}, rate),
		quotaEntry([]string{"user", "a"}, map[string]float64{"request_percentage": 50}),
		quotaEntry([]string{"user", "a"}, map[string]float64{"no_such_key": 50}),
		quotaEntry([]string{"user", "a"}, map[string]float64{log.QuotaProducerByteRate: 0}),
		quotaEntry([]string{"user", "a"}, map[string]float64{log.QuotaProducerByteRate: -7}),
		quotaEntry([]string{"user", "a"}, map[string]float64{log.QuotaConsumerByteRate: 1.5}),
		quotaEntry([]string{"user", "a"}, map[string]float64{log.QuotaConsumerByteRate: math.Inf(1)}),
	}
	for _, v := range []int16{0, 1} {
		ar = admin.do(alterQuotasReq(v, false, bad...)).(*kmsg.AlterClientQuotasResponse)
		require.Len(t, ar.Entries, len(bad))
		for i, e := range ar.Entries {
			require.Equal(t, errInvalidRequest, e.ErrorCode, "entry %d", i)
			require.NotNil(t, e.ErrorMessage)
		}
	}
	require.Zero(t, a.b.ClientQuotas().Len())
	// Validate only: answered, not applied.
	ar = admin.do(alterQuotasReq(1, true, quotaEntry([]string{"user", "alice"}, rate))).(*kmsg.AlterClientQuotasResponse)
	require.Equal(t, errNone, ar.Entries[0].ErrorCode)
	require.Zero(t, a.b.ClientQuotas().Len())

	// Good entries apply, the bad one beside them does not.
	ar = admin.do(alterQuotasReq(1, false,
		quotaEntry([]string{"user", "alice", "client-id", "app"}, map[string]float64{log.QuotaProducerByteRate: 1000, log.QuotaConsumerByteRate: 2000}),
		quotaEntry([]string{"user", ""}, map[string]float64{log.QuotaProducerByteRate: 3000}),
		quotaEntry([]string{"client-id", ""}, map[string]float64{log.QuotaConsumerByteRate: 4000}),
		quotaEntry([]string{"client-id", "app"}, map[string]float64{log.QuotaConsumerByteRate: 5000}),
		bad[0],
	)).(*kmsg.AlterClientQuotasResponse)
	for i, code := range []int16{errNone, errNone, errNone, errNone, errInvalidRequest} {
		require.Equal(t, code, ar.Entries[i].ErrorCode, "entry %d", i)
	}
	require.Equal(t, 4, a.b.ClientQuotas().Len())
	q, from, ok := a.b.ClientQuotas().Lookup(log.QuotaProducerByteRate, "alice", "app")
	require.True(t, ok)
	require.Equal(t, 1000.0, q)
	require.Equal(t, "users/alice/clients/app", from.String())

	all := []string{
		"client-id=<default>: consumer_byte_rate=4000",
		"client-id=app: consumer_byte_rate=5000",
		"user=<default>: producer_byte_rate=3000",
		"user=alice,client-id=app: consumer_byte_rate=2000 producer_byte_rate=1000",
	}
	for _, tc := range []struct {
		name   string
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   []string
	}{
		{"everything", false, nil, all},
		{"strict nothing", true, nil, nil},
		{"any user", false, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("user", kmsg.QuotasMatchTypeAny, nil)}, []string{all[2], all[3]}},
		{"user alice", false, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("user", kmsg.QuotasMatchTypeExact, kmsg.StringPtr("alice"))}, []string{all[3]}},
		{"user alice strict", true, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("user", kmsg.QuotasMatchTypeExact, kmsg.StringPtr("alice"))}, nil},
		{"default user", false, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("user", kmsg.QuotasMatchTypeDefault, nil)}, []string{all[2]}},
		{"client app", false, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("client-id", kmsg.QuotasMatchTypeExact, kmsg.StringPtr("app"))}, []string{all[1], all[3]}},
		{"client app strict", true, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("client-id", kmsg.QuotasMatchTypeExact, kmsg.StringPtr("app"))}, []string{all[1]}},
		{"any client strict", true, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("client-id", kmsg.QuotasMatchTypeAny, nil)}, []string{all[0], all[1]}},
		{"ip", false, []kmsg.DescribeClientQuotasRequestComponent{quotaComp("ip", kmsg.QuotasMatchTypeAny, nil)}, nil},
	} {
		resp := bob.do(describeQuotasReq(tc.strict, tc.comps...)).(*kmsg.DescribeClientQuotasResponse)
		require.Equal(t, errNone, resp.ErrorCode, tc.name)
		require.Equal(t, tc.want, quotasDescribed(resp), tc.name)
	}
	for _, comps := range [][]kmsg.DescribeClientQuotasRequestComponent{
		{quotaComp("group", kmsg.QuotasMatchTypeAny, nil)},
		{quotaComp("user", kmsg.QuotasMatchTypeExact, nil)},
		{quotaComp("user", kmsg.QuotasMatchTypeAny, nil), quotaComp("user", kmsg.QuotasMatchTypeAny, nil)},
		{quotaComp("user", 7, nil)},
	} {
		resp := bob.do(describeQuotasReq(false, comps...)).(*kmsg.DescribeClientQuotasResponse)
		require.Equal(t, errInvalidRequest, resp.ErrorCode)
		require.Empty(t, resp.Entries)
	}

	// Removing a key; removing the last key removes the entity.
	ar = admin.do(alterQuotasReq(0, false,
		quotaEntry([]string{"user", "alice", "client-id", "app"}, map[string]float64{log.QuotaConsumerByteRate: -1}),
		quotaEntry([]string{"user", ""}, map[string]float64{log.QuotaProducerByteRate: -1}),
	)).(*kmsg.AlterClientQuotasResponse)
	require.Equal(t, errNone, ar.Entries[0].ErrorCode)
	require.Equal(t, errNone, ar.Entries[1].ErrorCode)
	require.Equal(t, []string{all[0], all[1], "user=alice,client-id=app: producer_byte_rate=1000"},
		quotasDescribed(admin.do(describeQuotasReq(false)).(*kmsg.DescribeClientQuotasResponse)))
}

// armClock is a driven clock that tells when a timer is armed.
type armClock struct {
	*clocktest.Clock
	armed chan time.Duration
}

func (c armClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Clock.NewTimer(d)
	c.armed <- d
	return t
}

// startQuotas is a server on a broker with topic t, its quotas timed by a
// driven clock.
func startQuotas(t *testing.T, quotas ...log.QuotaAlteration) (*Server, *log.Broker, armClock) {
	t.Helper()
	s, b, _ := start(t, Config{})
	_, err := b.CreateTopic("t", log.TopicConfig{Partitions: 1})
	require.NoError(t, err)
	errs, err := b.AlterClientQuotas(context.Background(), quotas, false)
	require.NoError(t, err)
	for _, err := range errs {
		require.NoError(t, err)
	}
	clk := armClock{clocktest.New(quotaT0), make(chan time.Duration, 16)}
	s.caps.quotas.setClock(clk)
	return s, b, clk
}

func byteRate(e log.QuotaEntity, key string, v float64) log.QuotaAlteration {
	return log.QuotaAlteration{Entity: e, Ops: []log.QuotaOp{{Key: key, Value: v}}}
}

// requestSize is the size of req as the server reads it (the frame after
// its length), which a producer's quota counts, as Kafka does.
func requestSize(c *testClient, req kmsg.Request) int {
	return len(c.f.AppendRequest(nil, req, c.corr+1)) - 4
}

// TestQuotaThrottlesAndMutes: a produce over the quota is answered at
// once with throttle_time_ms as Kafka computes it from the size of the
// whole request, and the connection reads nothing more until that time
// has passed on the clock.
func TestQuotaThrottlesAndMutes(t *testing.T) {
	const quota = 10 << 10
	s, b, clk := startQuotas(t, byteRate(log.QuotaEntity{ClientID: log.QuotaNamed("test")}, log.QuotaProducerByteRate, quota))
	c := dial(t, s.Addr())
	big := records(strings.Repeat("x", 200<<10))
	req := produceReq(9, -1, "t", 0, big)
	size := requestSize(c, req)
	require.Greater(t, size, len(big))
	resp := c.do(req).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	// The request's bytes over the least span of 10 s.
	want := math.Round((float64(size)/10 - quota) / quota * 10000)
	require.Equal(t, int32(want), resp.ThrottleMillis)

	corr := c.send(produceReq(9, -1, "t", 0, records("small")))
	// The reader waits out the mute before it handles the request.
	select {
	case d := <-clk.armed:
		require.Equal(t, time.Duration(want)*time.Millisecond, d)
	case <-time.After(time.Minute): // generous: the reader is only scheduled
		t.Fatal("the connection was not muted")
	}
	end, err := b.ListOffset(context.Background(), log.TopicPartition{Topic: "t"}, log.LatestOffset)
	require.NoError(t, err)
	require.Equal(t, int64(1), end, "a request handled while muted")
	clk.Advance(time.Duration(want) * time.Millisecond)
	resp = c.recv(produceReq(9, -1, "t", 0, nil), corr).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	require.Positive(t, resp.ThrottleMillis, "still over the quota")

	// Another client id has no quota: never throttled.
	other := dial(t, s.Addr())
	other.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID("other"))
	resp = other.do(produceReq(9, -1, "t", 0, big)).(*kmsg.ProduceResponse)
	require.Zero(t, resp.ThrottleMillis)
}

// TestQuotaProducerThrottledToItsRate drives a producer over the wire at
// 6 times its byte rate for 150 s of clock time, waiting out each
// throttle_time_ms as a KIP-219 client does: the bytes it sends past the
// first 30 s (the requests, which the quota counts) are within 20% of the
// rate, and so are the record bytes appended. A producer under its rate
// is never throttled.
func TestQuotaProducerThrottledToItsRate(t *testing.T) {
	const quota = 64 << 10
	s, b, clk := startQuotas(t,
		byteRate(log.QuotaEntity{ClientID: log.QuotaNamed("fast")}, log.QuotaProducerByteRate, quota),
		byteRate(log.QuotaEntity{ClientID: log.QuotaNamed("slow")}, log.QuotaProducerByteRate, quota))
	batch := records(strings.Repeat("y", 4<<10))
	var sent int // request bytes past the warmup, of the last run
	run := func(c *testClient, gap, warmup, end time.Duration) (rate float64, throttled int) {
		start := clk.Now()
		var bytes int
		sent = 0
		for clk.Now().Sub(start) < end {
			req := produceReq(9, 1, "t", 0, batch)
			size := requestSize(c, req)
			resp := c.do(req).(*kmsg.ProduceResponse)
			require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
			if clk.Now().Sub(start) >= warmup {
				bytes += len(batch)
				sent += size
			}
			d := time.Duration(resp.ThrottleMillis) * time.Millisecond
			if d > 0 {
				throttled++
			}
			clk.Advance(max(d, gap))
		}
		return float64(bytes) / (end - warmup).Seconds(), throttled
	}
	fast := dial(t, s.Addr())
	fast.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID("fast"))
	rate, throttled := run(fast, 10*time.Millisecond, 30*time.Second, 150*time.Second)
	sentRate := float64(sent) / 120
	t.Logf("quota %d B/s, offered %d B/s: sent %.0f B/s (%.1f%% of the quota), appended %.0f B/s of records, %d throttles", quota, len(batch)*100, sentRate, 100*sentRate/quota, rate, throttled)
	require.InDelta(t, quota, sentRate, 0.2*quota)
	require.InDelta(t, quota, rate, 0.2*quota)
	require.Less(t, rate, sentRate, "the requests are counted, not only their records")
	require.Positive(t, throttled)
	select {
	case d := <-clk.armed:
		t.Fatalf("a client that waited out its throttle was muted %v more", d)
	default:
	}
	end, err := b.ListOffset(context.Background(), log.TopicPartition{Topic: "t"}, log.LatestOffset)
	require.NoError(t, err)
	require.Positive(t, end)

	// Under the rate.
	slow := dial(t, s.Addr())
	slow.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID("slow"))
	rate, throttled = run(slow, 100*time.Millisecond, 0, 60*time.Second)
	require.Zero(t, throttled)
	require.InDelta(t, float64(len(batch))*10, rate, 0.01*quota)
}

// TestQuotaThrottlesFetch: a consumer's fetch max bytes is lowered to
// what its quota lets through in a measured span; a fetch response over
// the consumer's byte rate, counted as the whole response, is answered
// empty with throttle_time_ms (KIP-219) and not counted; once the
// throttle has passed on the clock, the same offset is fetched whole.
func TestQuotaThrottlesFetch(t *testing.T) {
	const quota = 10 << 10
	s, _, clk := startQuotas(t, byteRate(log.QuotaEntity{User: log.QuotaDefault(), ClientID: log.QuotaDefault()}, log.QuotaConsumerByteRate, quota))
	c := dial(t, s.Addr())
	var total int
	for i := range 20 { // 20 batches of 8 KiB: 160 KiB
		b := records(strings.Repeat(string(rune('a'+i)), 8<<10))
		total += len(b)
		resp := c.do(produceReq(9, -1, "t", 0, b)).(*kmsg.ProduceResponse)
		require.Zero(t, resp.ThrottleMillis, "no producer quota")
	}
	fetch := func(offset int64) *kmsg.FetchResponse {
		req := fetchReq(12, "t", 0, offset, 0)
		req.MaxBytes = 1 << 30
		return c.do(req).(*kmsg.FetchResponse)
	}
	// The quota lets 10 × 10 KiB through in a span: at most 100 KiB.
	fr := fetch(0)
	require.Zero(t, fr.ThrottleMillis)
	got := len(fr.Topics[0].Partitions[0].RecordBatches)
	require.Positive(t, got)
	require.LessOrEqual(t, got, 100<<10)
	next := int64(got / len(records(strings.Repeat("a", 8<<10))))

	// The rest is over the rate: an empty answer, and the connection muted.
	fr = fetch(next)
	require.Positive(t, fr.ThrottleMillis)
	require.Empty(t, fr.Topics, "a throttled fetch is answered empty")
	d := time.Duration(fr.ThrottleMillis) * time.Millisecond
	select {
	case <-clk.armed:
		t.Fatal("muted before a request was read")
	default:
	}
	// Fetched again as a KIP-219 consumer does, waiting out each throttle
	// (the connection is muted that long): once the rate is back within
	// the quota (Kafka's Rate: the span grows past the least 10 s, old
	// samples go), the rest comes whole; the empty answers counted nothing.
	for tries := 0; ; tries++ {
		require.Less(t, tries, 10, "never served")
		corr := c.send(fetchReq(12, "t", 0, next, 0))
		select {
		case armed := <-clk.armed:
			require.Equal(t, d, armed)
		case <-time.After(time.Minute): // generous: the reader is only scheduled
			t.Fatal("the connection was not muted")
		}
		clk.Advance(d)
		fr = c.recv(fetchReq(12, "t", 0, next, 0), corr).(*kmsg.FetchResponse)
		if fr.ThrottleMillis == 0 {
			break
		}
		require.Empty(t, fr.Topics)
		d = time.Duration(fr.ThrottleMillis) * time.Millisecond
	}
	require.Equal(t, total-got, len(fr.Topics[0].Partitions[0].RecordBatches), "the records skipped are fetched again")
}

// TestQuotaConsumerThrottledToItsRate drives a consumer over the wire for
// 150 s of clock time, fetching as fast as it can and waiting out each
// throttle_time_ms (its empty answers included) as a KIP-219 client does:
// the response bytes it gets past the first 30 s are within 20% of its
// byte rate, and every record comes in order, none skipped.
func TestQuotaConsumerThrottledToItsRate(t *testing.T) {
	const quota = 64 << 10
	s, _, clk := startQuotas(t, byteRate(log.QuotaEntity{ClientID: log.QuotaNamed("reader")}, log.QuotaConsumerByteRate, quota))
	w := dial(t, s.Addr())
	batch := records(strings.Repeat("r", 4<<10))
	for range 12 << 20 / len(batch) { // 12 MiB: more than 150 s at the quota
		resp := w.do(produceReq(9, 1, "t", 0, batch)).(*kmsg.ProduceResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	}
	c := dial(t, s.Addr())
	c.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID("reader"))
	var next int64
	var bytes, throttled, empty int
	var d time.Duration // the last throttle, which the next request waits out
	const warmup, end = 30 * time.Second, 150 * time.Second
	start := clk.Now()
	for clk.Now().Sub(start) < end {
		req := fetchReq(12, "t", 0, next, 0)
		// A tenth of what the quota lets through in a span, as a
		// consumer's max.partition.fetch.bytes (1 MiB) is of a quota of
		// 1 MB/s: responses of the whole span's worth are let through
		// one span in two (the first counts until it is purged, 11 s
		// on), in Kafka as here.
		req.Topics[0].Partitions[0].PartitionMaxBytes = 64 << 10
		corr := c.send(req)
		if d > 0 {
			select {
			case <-clk.armed:
			case <-time.After(time.Minute): // generous: the reader is only scheduled
				t.Fatal("the connection was not muted")
			}
			clk.Advance(d)
		}
		fr := c.recv(req, corr).(*kmsg.FetchResponse)
		d = time.Duration(fr.ThrottleMillis) * time.Millisecond
		if d > 0 {
			throttled++
		}
		if len(fr.Topics) == 0 {
			empty++
			require.Positive(t, d, "only a throttled fetch is answered empty")
			continue
		}
		got := fr.Topics[0].Partitions[0].RecordBatches
		require.Zero(t, len(got)%len(batch))
		next += int64(len(got) / len(batch))
		if clk.Now().Sub(start) >= warmup {
			bytes += len(got)
		}
		if d == 0 {
			clk.Advance(10 * time.Millisecond)
		}
	}
	rate := float64(bytes) / (end - warmup).Seconds()
	t.Logf("quota %d B/s: fetched %.0f B/s of records (%.1f%% of the quota), %d throttles, %d answered empty", quota, rate, 100*rate/quota, throttled, empty)
	require.InDelta(t, quota, rate, 0.2*quota)
	require.Positive(t, empty)
	require.Less(t, next, int64(12<<20/len(batch)), "the consumer was held back")
}

// TestQuotaThrottledConnectionOneAtATime: once throttled, a connection
// handles one request at a time, as Kafka handles every connection, so
// that requests a client pipelines do not slip past the mute: each waits
// for the one before to be answered and for the mute it brings.
func TestQuotaThrottledConnectionOneAtATime(t *testing.T) {
	const quota = 10 << 10
	s, b, clk := startQuotas(t, byteRate(log.QuotaEntity{ClientID: log.QuotaNamed("test")}, log.QuotaProducerByteRate, quota))
	c := dial(t, s.Addr())
	big := records(strings.Repeat("x", 200<<10))
	resp := c.do(produceReq(9, -1, "t", 0, big)).(*kmsg.ProduceResponse)
	first := time.Duration(resp.ThrottleMillis) * time.Millisecond
	require.Positive(t, first)
	end := func() int64 {
		t.Helper()
		n, err := b.ListOffset(context.Background(), log.TopicPartition{Topic: "t"}, log.LatestOffset)
		require.NoError(t, err)
		return n
	}
	// Three produces pipelined: the first waits out the mute.
	var corrs []int32
	for range 3 {
		corrs = append(corrs, c.send(produceReq(9, -1, "t", 0, big)))
	}
	armed := func(want time.Duration) {
		t.Helper()
		select {
		case d := <-clk.armed:
			require.Equal(t, want, d)
		case <-time.After(time.Minute): // generous: the reader is only scheduled
			t.Fatal("the connection was not muted")
		}
	}
	armed(first)
	require.Equal(t, int64(1), end())
	clk.Advance(first)
	resp = c.recv(produceReq(9, -1, "t", 0, nil), corrs[0]).(*kmsg.ProduceResponse)
	second := time.Duration(resp.ThrottleMillis) * time.Millisecond
	require.Greater(t, second, first, "further over the quota")
	// The second waited for the first's answer and now for its mute.
	armed(second)
	require.Equal(t, int64(2), end(), "a pipelined request handled ahead of the mute")
	clk.Advance(second)
	resp = c.recv(produceReq(9, -1, "t", 0, nil), corrs[1]).(*kmsg.ProduceResponse)
	third := time.Duration(resp.ThrottleMillis) * time.Millisecond
	armed(third)
	require.Equal(t, int64(3), end())
	clk.Advance(third)
	c.recv(produceReq(9, -1, "t", 0, nil), corrs[2])
	require.Equal(t, int64(4), end())
}
