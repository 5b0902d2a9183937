package kafka

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logBuf collects a server's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start serves an in-memory broker with the topics opts create.
func start(t *testing.T, cfg Config, opts ...logtest.Option) (*Server, *log.Broker, *logBuf) {
	t.Helper()
	b := logtest.New(t, append([]logtest.Option{logtest.InMemory()}, opts...)...)
	lb := &logBuf{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := Listen("127.0.0.1:0", b, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, b, lb
}

// records encodes values as one record batch, as a producer would.
func records(values ...string) []byte {
	var bd batch.Builder
	ts := time.Now().UnixMilli()
	bd.Reset(ts)
	for _, v := range values {
		bd.Append(ts, nil, []byte(v), nil)
	}
	return slices.Clone(bd.Bytes())
}

func values(t *testing.T, raw []byte) []string {
	t.Helper()
	recs, err := log.DecodeRecords(raw)
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

func TestApiVersions(t *testing.T) {
	leaktest.Check(t)
	s, _, _ := start(t, Config{})
	c := dial(t, s.Addr())
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := c.do(req).(*kmsg.ApiVersionsResponse)
		require.Equal(t, errNone, resp.ErrorCode, "v%d", v)
		keys := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		require.Equal(t, [2]int16{0, 3}, keys[apiVersionsKey])
		require.Equal(t, [2]int16{0, 12}, keys[metadataKey])
		require.Contains(t, keys, produceKey)
		require.Contains(t, keys, fetchKey)
		require.Equal(t, [2]int16{0, 3}, keys[createPartitionsKey], "CreatePartitions is served: log.Broker is a PartitionCreator")
		require.Equal(t, [2]int16{0, 5}, keys[initProducerIDKey], "InitProducerId is served: the broker hands out producer ids")
		require.Equal(t, [2]int16{0, 5}, keys[endTxnKey], "the transaction APIs are served: log.Broker is a TxnBackend")
		require.NotContains(t, keys, saslHandshakeKey, "no SASL configured")
	}
}

// KIP-511: a version the server does not know gets UNSUPPORTED_VERSION and
// the versions served, in v0, whatever the body.
func TestApiVersionsUnknownVersion(t *testing.T) {
	s, _, _ := start(t, Config{})
	for _, v := range []int16{4, 5, 99, 32767} {
		c := dial(t, s.Addr())
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v) // kmsg encodes v4+ bodies as v3 and beyond
		frame := c.f.AppendRequest(nil, req, 7)
		frame = append(frame, "trailing junk of a future version"...)
		frame[0], frame[1], frame[2], frame[3] = 0, 0, 0, 0
		putSize(frame)
		c.write(frame)
		v0 := kmsg.NewPtrApiVersionsRequest() // the response is read as v0
		resp := c.recv(v0, 7).(*kmsg.ApiVersionsResponse)
		require.Equal(t, errUnsupportedVersion, resp.ErrorCode)
		require.NotEmpty(t, resp.ApiKeys)
		// The connection goes on.
		ok := kmsg.NewPtrApiVersionsRequest()
		ok.SetVersion(3)
		require.Equal(t, errNone, c.do(ok).(*kmsg.ApiVersionsResponse).ErrorCode)
	}
}

func putSize(frame []byte) {
	n := uint32(len(frame) - 4)
	frame[0], frame[1], frame[2], frame[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

func TestMetadataEveryVersion(t *testing.T) {
	s, _, _ := start(t, Config{NodeID: 7}, logtest.Topic("orders", 3), logtest.Topic("events", 1))
	c := dial(t, s.Addr())
	host, port := s.advertised()
	for v := int16(0); v <= 12; v++ {
		// All topics.
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		resp := c.do(req).(*kmsg.MetadataResponse)
		require.Len(t, resp.Brokers, 1, "v%d", v)
		require.Equal(t, int32(7), resp.Brokers[0].NodeID)
		require.Equal(t, host, resp.Brokers[0].Host)
		require.Equal(t, port, resp.Brokers[0].Port)
		if v >= 1 {
			require.Equal(t, int32(7), resp.ControllerID)
		}
		require.Len(t, resp.Topics, 2, "v%d", v)
		for _, tp := range resp.Topics {
			require.Equal(t, errNone, tp.ErrorCode)
			want := map[string]int{"orders": 3, "events": 1}[*tp.Topic]
			require.Len(t, tp.Partitions, want, *tp.Topic)
			for i, p := range tp.Partitions {
				require.Equal(t, int32(i), p.Partition)
				require.Equal(t, int32(7), p.Leader)
				require.Equal(t, []int32{7}, p.Replicas)
				require.Equal(t, []int32{7}, p.ISR)
			}
			if v >= 10 {
				require.Equal(t, topicID(*tp.Topic), tp.TopicID)
			}
		}
		// Named topics: one unknown, one invalid.
		req = kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		for _, name := range []string{"orders", "nope", "bad/name"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp = c.do(req).(*kmsg.MetadataResponse)
		require.Len(t, resp.Topics, 3)
		require.Equal(t, errNone, resp.Topics[0].ErrorCode)
		require.Equal(t, errUnknownTopicOrPartition, resp.Topics[1].ErrorCode)
		require.Equal(t, errInvalidTopicException, resp.Topics[2].ErrorCode)
	}
	// v12: by topic id.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, id := range [][16]byte{topicID("events"), {9, 9}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.MetadataResponse)
	require.Equal(t, "events", *resp.Topics[0].Topic)
	require.Len(t, resp.Topics[0].Partitions, 1)
	require.Equal(t, errUnknownTopicID, resp.Topics[1].ErrorCode)
}

// produceReq is a produce of one batch to one partition.
func produceReq(v int16, acks int16, topic string, partition int32, recs []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(v)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(topic)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, recs
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchReq(v int16, topic string, partition int32, offset int64, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait.Milliseconds()), 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(topic)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestProduceFetchEveryVersion(t *testing.T) {
	leaktest.Check(t)
	s, b, _ := start(t, Config{}, logtest.Topic("orders", 2))
	c := dial(t, s.Addr())
	next := int64(0)
	for v := int16(3); v <= 13; v++ {
		for _, acks := range []int16{-1, 1} {
			val := []string{"a" + string(rune('a'+v)), "b", "c"}
			resp := c.do(produceReq(v, acks, "orders", 1, records(val...))).(*kmsg.ProduceResponse)
			require.Len(t, resp.Topics, 1)
			p := resp.Topics[0].Partitions[0]
			require.Equal(t, errNone, p.ErrorCode, "produce v%d", v)
			require.Equal(t, next, p.BaseOffset, "produce v%d", v)
			if v >= 5 {
				require.Equal(t, int64(0), p.LogStartOffset)
			}
			next += 3
		}
	}
	part, err := b.Partition("orders", 1)
	require.NoError(t, err)
	require.Equal(t, next, part.EndOffset())
	for v := int16(4); v <= 16; v++ {
		resp := c.do(fetchReq(v, "orders", 1, 6, time.Second)).(*kmsg.FetchResponse)
		require.Len(t, resp.Topics, 1, "fetch v%d", v)
		p := resp.Topics[0].Partitions[0]
		require.Equal(t, errNone, p.ErrorCode, "fetch v%d", v)
		require.Equal(t, next, p.HighWatermark)
		got := values(t, p.RecordBatches)
		require.GreaterOrEqual(t, len(got), 3)
		require.Equal(t, "b", got[1])
		if v >= 7 {
			require.Equal(t, int32(0), resp.SessionID, "sessions are declined")
		}
	}
}

func TestFetchSeveralPartitions(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("a", 3), logtest.Topic("b", 1))
	for i := range 3 {
		p, _ := b.Partition("a", i)
		for j := range i + 1 {
			_, err := p.Append(log.Record{Value: []byte{byte('0' + i), byte('0' + j)}})
			require.NoError(t, err)
		}
	}
	c := dial(t, s.Addr())
	for _, v := range []int16{4, 11, 12, 13, 16} {
		req := fetchReq(v, "a", 0, 0, 0)
		req.MinBytes = 0
		for _, i := range []int32{1, 2, 7} {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = i, 1<<20
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		for _, name := range []string{"b", "missing"} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = name, topicID(name)
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp := c.do(req).(*kmsg.FetchResponse)
		require.Len(t, resp.Topics, 3, "v%d", v)
		ps := resp.Topics[0].Partitions
		require.Len(t, ps, 4)
		for i := range 3 {
			require.Equal(t, errNone, ps[i].ErrorCode)
			require.Equal(t, int32(i), ps[i].Partition)
			require.Len(t, values(t, ps[i].RecordBatches), i+1, "v%d partition %d", v, i)
			require.Equal(t, int64(i+1), ps[i].HighWatermark)
		}
		require.Equal(t, errUnknownTopicOrPartition, ps[3].ErrorCode)
		require.Equal(t, errNone, resp.Topics[1].Partitions[0].ErrorCode)
		require.Empty(t, resp.Topics[1].Partitions[0].RecordBatches)
		want := errUnknownTopicOrPartition
		if v >= 13 {
			want = errUnknownTopicID
		}
		require.Equal(t, want, resp.Topics[2].Partitions[0].ErrorCode)
	}
}

func TestFetchOffsetOutOfRange(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("t", 1), logtest.Seed("t", log.Record{Value: []byte("x")}))
	c := dial(t, s.Addr())
	resp := c.do(fetchReq(11, "t", 0, 5, 0)).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, errOffsetOutOfRange, p.ErrorCode)
	require.Equal(t, int64(1), p.HighWatermark)
	require.Equal(t, int64(0), p.LogStartOffset)
}

// A fetch parked in the purgatory is answered by the next append, well
// before its MaxWait, and the responses of a connection keep their order:
// a request sent after the parked fetch is answered after it.
func TestLongPollAndResponseOrder(t *testing.T) {
	leaktest.Check(t)
	s, _, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	fetch := fetchReq(12, "t", 0, 0, 30*time.Second)
	fc := c.send(fetch)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	mc := c.send(meta)

	// The metadata is handled at once but waits for the fetch's response.
	p := dial(t, s.Addr())
	began := time.Now()
	pr := p.do(produceReq(9, -1, "t", 0, records("wake"))).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, pr.Topics[0].Partitions[0].ErrorCode)

	fr := c.recv(fetch, fc).(*kmsg.FetchResponse)
	require.Less(t, time.Since(began), 10*time.Second, "the append woke the fetch")
	require.Equal(t, []string{"wake"}, values(t, fr.Topics[0].Partitions[0].RecordBatches))
	mr := c.recv(meta, mc).(*kmsg.MetadataResponse)
	require.Len(t, mr.Topics, 1)
}

func TestFetchMaxWaitExpires(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	began := time.Now()
	resp := c.do(fetchReq(12, "t", 0, 0, 50*time.Millisecond)).(*kmsg.FetchResponse)
	require.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond)
	p := resp.Topics[0].Partitions[0]
	require.Equal(t, errNone, p.ErrorCode)
	require.Empty(t, p.RecordBatches)
	require.Equal(t, int64(0), p.HighWatermark)
}

func TestProduceErrors(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1, MaxMessageBytes: 200}),
		dataDirWithMinInSync(t, "isr", 2))
	c := dial(t, s.Addr())
	badCRC := records("x")
	badCRC[len(badCRC)-1] ^= 1
	truncated := records("hello")[:70]
	two := append(records("1"), records("2")...)
	cases := []struct {
		name  string
		req   *kmsg.ProduceRequest
		code  int16
		v     int16
		acks  int16
		topic string
	}{
		{"unknown topic", produceReq(9, -1, "nope", 0, records("x")), errUnknownTopicOrPartition, 0, 0, ""},
		{"unknown partition", produceReq(9, -1, "t", 3, records("x")), errUnknownTopicOrPartition, 0, 0, ""},
		{"negative partition", produceReq(9, -1, "t", -1, records("x")), errUnknownTopicOrPartition, 0, 0, ""},
		{"invalid topic", produceReq(9, -1, "../etc", 0, records("x")), errInvalidTopicException, 0, 0, ""},
		{"bad crc", produceReq(9, -1, "t", 0, badCRC), errCorruptMessage, 0, 0, ""},
		{"truncated batch", produceReq(9, -1, "t", 0, truncated), errCorruptMessage, 0, 0, ""},
		{"two batches", produceReq(9, -1, "t", 0, two), errCorruptMessage, 0, 0, ""},
		{"garbage", produceReq(9, -1, "t", 0, []byte("garbage garbage garbage garbage garbage garbage garbage garbage!")), errCorruptMessage, 0, 0, ""},
		{"no records", produceReq(9, -1, "t", 0, nil), errCorruptMessage, 0, 0, ""},
		{"too large", produceReq(9, -1, "t", 0, records(strings.Repeat("x", 300))), errMessageTooLarge, 0, 0, ""},
		{"bad acks", produceReq(9, 2, "t", 0, records("x")), errInvalidRequiredAcks, 0, 0, ""},
		{"not enough replicas", produceReq(9, -1, "isr", 0, records("x")), errNotEnoughReplicas, 0, 0, ""},
		{"unknown topic id", produceReq(13, -1, "nope", 0, records("x")), errUnknownTopicID, 0, 0, ""},
	}
	for _, tc := range cases {
		resp := c.do(tc.req).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		require.Equal(t, tc.code, p.ErrorCode, tc.name)
		require.Equal(t, int64(-1), p.BaseOffset, tc.name)
		require.NotNil(t, p.ErrorMessage, tc.name)
	}
	part, _ := b.Partition("t", 0)
	require.Equal(t, int64(0), part.EndOffset(), "no bad batch was appended")
	// And a good one still is.
	resp := c.do(produceReq(9, 1, "t", 0, records("ok"))).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(1), part.EndOffset())
}

// acks=0 gets no response: the next request's response is the next one
// read. A failed acks=0 produce closes the connection, as Kafka does.
func TestProduceAcksZero(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	for range 3 {
		c.send(produceReq(9, 0, "t", 0, records("fire", "forget")))
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	c.do(meta) // fails unless its response is the next frame
	part, _ := b.Partition("t", 0)
	require.Equal(t, int64(6), part.EndOffset(), "the produces were handled before the metadata was answered")

	c.send(produceReq(9, 0, "nope", 0, records("x")))
	c.closed()
}

func TestListOffsets(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	part, _ := b.Partition("t", 0)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 5 {
		_, err := part.Append(log.Record{Timestamp: base.Add(time.Duration(i) * time.Minute), Value: []byte("v")})
		require.NoError(t, err)
	}
	c := dial(t, s.Addr())
	for v := int16(1); v <= 6; v++ {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(v)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		for _, ts := range []int64{-2, -1, base.Add(2*time.Minute + time.Second).UnixMilli(), base.Add(time.Hour).UnixMilli(), -7} {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 4, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.ListOffsetsResponse)
		ps := resp.Topics[0].Partitions
		require.Len(t, ps, 6)
		want := []struct {
			code int16
			off  int64
		}{{0, 0}, {0, 5}, {0, 3}, {0, -1}, {errInvalidRequest, -1}, {errUnknownTopicOrPartition, -1}}
		for i, w := range want {
			require.Equal(t, w.code, ps[i].ErrorCode, "v%d #%d", v, i)
			require.Equal(t, w.off, ps[i].Offset, "v%d #%d", v, i)
		}
	}
}

// One produce request for several partitions: each gets its own result;
// a partition named twice appends in the request's order.
func TestProduceManyPartitions(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 3))
	c := dial(t, s.Addr())
	req := produceReq(9, -1, "t", 0, records("p0"))
	for _, part := range []int32{1, 2, 7} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = part, records(fmt.Sprint("p", part))
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	resp := c.do(req).(*kmsg.ProduceResponse)
	ps := resp.Topics[0].Partitions
	require.Len(t, ps, 4)
	for i, want := range []int16{0, 0, 0, errUnknownTopicOrPartition} {
		require.Equal(t, want, ps[i].ErrorCode, "partition %d", ps[i].Partition)
	}
	for part := range 3 {
		p, _ := b.Partition("t", part)
		recs, err := p.Read(0, 1<<20)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("p", part), string(recs[0].Value))
	}
	// Twice the same partition.
	req = produceReq(9, -1, "t", 1, records("first"))
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 1, records("second")
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	ps = c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions
	require.Equal(t, []int64{1, 2}, []int64{ps[0].BaseOffset, ps[1].BaseOffset})
}

// TestAPITablesKmsg: kmsg encodes every version the tables serve, and no
// key is in two tables.
func TestAPITablesKmsg(t *testing.T) {
	seen := map[int16]bool{}
	for _, table := range [][]api{dataAPIs, groupAPIs, idempotenceAPIs, saslAPIs} {
		for _, a := range table {
			r := kmsg.RequestForKey(a.key)
			require.NotNil(t, r, "key %d", a.key)
			require.GreaterOrEqual(t, r.MaxVersion(), a.max, "%s", kmsg.NameForKey(a.key))
			require.LessOrEqual(t, a.min, a.max)
			require.LessOrEqual(t, a.key, maxAPIKey)
			require.False(t, seen[a.key], "%s twice", kmsg.NameForKey(a.key))
			seen[a.key] = true
		}
	}
}
