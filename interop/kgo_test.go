package interop

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// kgoRecords converts recs to kgo records of topic.
func kgoRecords(topic string, rs []rec) []*kgo.Record {
	out := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		kr := &kgo.Record{Topic: topic, Key: r.key, Value: r.value, Timestamp: r.ts}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		out[i] = kr
	}
	return out
}

// kgoProduce produces rs to topic with a new kgo client made with opts, all
// at once (asynchronously) and waits for every result.
func kgoProduce(ctx context.Context, t *testing.T, seed, topic string, rs []rec, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgoRecords(topic, rs)...).FirstErr(); err != nil {
		t.Fatalf("kgo produce: %v", err)
	}
}

// kgoConsume reads n records of topic from the start of every partition
// with a kgo consumer (no group).
func kgoConsume(ctx context.Context, t *testing.T, seed, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("kgo consume after %d records of %d: %v", len(got), n, err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("kgo consumed %d records, want %d", len(got), n)
	}
	return got
}

// checkKgoConsumed checks that what kgo consumed is what Strata stored.
func checkKgoConsumed(t *testing.T, c *kafkatest.Cluster, topic string, got []*kgo.Record) {
	t.Helper()
	parts := stored(t, c, topic)
	for _, r := range got {
		if int(r.Partition) >= len(parts) || r.Offset >= int64(len(parts[r.Partition])) {
			t.Fatalf("kgo consumed %d/%d, not stored", r.Partition, r.Offset)
		}
		s := parts[r.Partition][r.Offset]
		hs := make([]log.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = log.Header{Key: h.Key, Value: h.Value}
		}
		if !bytes.Equal(s.Key, r.Key) || !bytes.Equal(s.Value, r.Value) || !s.Timestamp.Equal(r.Timestamp) || !sameHeaders(s.Headers, hs) {
			t.Fatalf("kgo consumed %d/%d key %q value %.30q ts %d headers %v; stored key %q value %.30q ts %d headers %v",
				r.Partition, r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), hs, s.Key, s.Value, s.Timestamp.UnixMilli(), s.Headers)
		}
	}
}

// serves reports whether the server advertises the API key in ApiVersions.
func serves(ctx context.Context, t *testing.T, seed string, key int16) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// TestKgoDefaults: a kgo client with nothing but its seed — idempotent
// (when the server gives it a producer id), snappy, Kafka's murmur2
// partitioner for keys — produces records that Strata stores as sent and
// serves back to a kgo consumer.
func TestKgoDefaults(t *testing.T) {
	const topic = "orders"
	c := kafkatest.New(t, kafkatest.Topic(topic, 5))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("kgo", 200)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	checkStored(t, c, topic, want, javaPartitioner)

	got := kgoConsume(ctx, t, c.Addr(), topic, len(want))
	checkKgoConsumed(t, c, topic, got)
	idempotent := serves(ctx, t, c.Addr(), 22) // InitProducerId
	for _, r := range got {
		if ct := r.Attrs.CompressionType(); ct != 2 {
			t.Fatalf("record %d/%d: codec %d, want snappy (2), as kgo sent it", r.Partition, r.Offset, ct)
		}
		if idempotent != (r.ProducerID >= 0) {
			t.Fatalf("record %d/%d: producer id %d with InitProducerId served: %v", r.Partition, r.Offset, r.ProducerID, idempotent)
		}
	}
	if !idempotent {
		t.Log("InitProducerId is not served: kgo produced without idempotence")
	}
}

// TestKgoCodecs: kgo with each codec, its batches stored as sent and read
// back, by Strata and by a kgo consumer.
func TestKgoCodecs(t *testing.T) {
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
		id    int8
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	} {
		t.Run(codec.name, func(t *testing.T) {
			const topic = "codec"
			c := kafkatest.New(t, kafkatest.Topic(topic, 3))
			ctx := testCtx(t, 15*time.Second)
			want := makeRecs("kgo-"+codec.name, 100)
			kgoProduce(ctx, t, c.Addr(), topic, want, kgo.ProducerBatchCompression(codec.codec),
				kgo.ProducerLinger(10*time.Millisecond))
			checkStored(t, c, topic, want, javaPartitioner)
			got := kgoConsume(ctx, t, c.Addr(), topic, len(want))
			checkKgoConsumed(t, c, topic, got)
			for _, r := range got {
				if ct := r.Attrs.CompressionType(); ct != uint8(codec.id) {
					t.Fatalf("record %d/%d: codec %d, want %d", r.Partition, r.Offset, ct, codec.id)
				}
			}
		})
	}
}

// TestKgoAcks: kgo with acks=0 and acks=1 (idempotence needs acks=all).
func TestKgoAcks(t *testing.T) {
	for _, acks := range []struct {
		name string
		acks kgo.Acks
	}{{"none", kgo.NoAck()}, {"leader", kgo.LeaderAck()}} {
		t.Run(acks.name, func(t *testing.T) {
			const topic = "acks"
			c := kafkatest.New(t, kafkatest.Topic(topic, 2))
			ctx := testCtx(t, 15*time.Second)
			want := makeRecs("acks-"+acks.name, 50)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.RequiredAcks(acks.acks), kgo.DisableIdempotentWrite())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, kgoRecords(topic, want)...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if acks.name == "none" {
				// Nothing answers an acks=0 produce: wait for the
				// records to be stored, the connection still open.
				awaitStored(ctx, t, c, topic, len(want))
			}
			checkStored(t, c, topic, want, javaPartitioner)
		})
	}
}

// awaitStored polls, bounded by ctx, until topic holds n records: for
// producers that give nothing to await (acks=0).
func awaitStored(ctx context.Context, t *testing.T, c *kafkatest.Cluster, topic string, n int) {
	t.Helper()
	tp, err := c.Broker().Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var sum int64
		for i := range tp.Partitions() {
			p, err := tp.Partition(i)
			if err != nil {
				t.Fatal(err)
			}
			sum += p.EndOffset() - p.StartOffset()
		}
		if sum >= int64(n) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s holds %d records of %d: %v", topic, sum, n, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestKgoReadCommitted: a kgo consumer with read_committed isolation (a
// transactional application's setting) reads what non-transactional
// producers wrote: the last stable offset is the high watermark.
func TestKgoReadCommitted(t *testing.T) {
	const topic = "rc"
	c := kafkatest.New(t, kafkatest.Topic(topic, 2))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("rc", 40)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("read_committed after %d records of %d: %v", len(got), len(want), err)
		}
		got = append(got, fs.Records()...)
	}
	checkKgoConsumed(t, c, topic, got)
}

// TestKgoEdgeRecords: the records Kafka's format can tell apart — an empty
// key and a null one, an empty value and a null one (a tombstone), a null
// header value, a header key of many bytes, a 900 KiB value, timestamps
// before 1970 — survive kgo → Strata → kgo.
func TestKgoEdgeRecords(t *testing.T) {
	const topic = "edge"
	c := kafkatest.New(t, kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 15*time.Second)
	big := bytes.Repeat([]byte("0123456789abcdef"), 900<<10/16)
	want := []rec{
		{key: []byte{}, value: []byte("empty key"), ts: tsBase},
		{key: nil, value: []byte("null key"), ts: tsBase},
		{key: []byte("k"), value: []byte{}, ts: tsBase.Add(time.Millisecond)},
		{key: []byte("tombstone"), value: nil, ts: tsBase.Add(2 * time.Millisecond)},
		{key: []byte("h"), value: []byte("null header"), headers: []log.Header{{Key: "n", Value: nil}, {Key: "ключ-🔑", Value: []byte("v")}}, ts: tsBase},
		{key: []byte("old"), value: []byte("1969"), ts: time.UnixMilli(-1000)},
		{key: []byte("big"), value: big, ts: tsBase.Add(3 * time.Millisecond)},
	}
	kgoProduce(ctx, t, c.Addr(), topic, want, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(4<<20))
	rs := stored(t, c, topic)[0]
	if len(rs) != len(want) {
		t.Fatalf("%d records stored, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		w := want[i]
		if !bytes.Equal(r.Key, w.key) || (r.Key == nil) != (w.key == nil) || !bytes.Equal(r.Value, w.value) ||
			(r.Value == nil) != (w.value == nil) || !r.Timestamp.Equal(w.ts) || len(r.Headers) != len(w.headers) {
			t.Fatalf("record %d: key %q (nil %v) value %.20q (nil %v) ts %d headers %v; want key %q (nil %v) value %.20q (nil %v) ts %d headers %v",
				i, r.Key, r.Key == nil, r.Value, r.Value == nil, r.Timestamp.UnixMilli(), r.Headers, w.key, w.key == nil, w.value, w.value == nil, w.ts.UnixMilli(), w.headers)
		}
		for j, h := range r.Headers {
			if h.Key != w.headers[j].Key || !bytes.Equal(h.Value, w.headers[j].Value) || (h.Value == nil) != (w.headers[j].Value == nil) {
				t.Fatalf("record %d header %d: %q=%q (nil %v), want %q=%q", i, j, h.Key, h.Value, h.Value == nil, w.headers[j].Key, w.headers[j].Value)
			}
		}
	}
	got := kgoConsume(ctx, t, c.Addr(), topic, len(want))
	for i, r := range got {
		w := want[i]
		if (r.Key == nil) != (w.key == nil) || (r.Value == nil) != (w.value == nil) || !bytes.Equal(r.Value, w.value) || !r.Timestamp.Equal(w.ts) {
			t.Fatalf("kgo read record %d: key nil %v value nil %v ts %d; want key nil %v value nil %v ts %d",
				i, r.Key == nil, r.Value == nil, r.Timestamp.UnixMilli(), w.key == nil, w.value == nil, w.ts.UnixMilli())
		}
	}
}

// TestKgoVolume: 20 000 records from one kgo client (not idempotent, so
// that it may pipeline 5 produce requests on its connection): each
// partition holds its records in the order they were produced.
func TestKgoVolume(t *testing.T) {
	const topic = "volume"
	c := kafkatest.New(t, kafkatest.Topic(topic, 8))
	ctx := testCtx(t, 30*time.Second)
	want := makeRecs("vol", 20000)
	kgoProduce(ctx, t, c.Addr(), topic, want, kgo.ProducerBatchMaxBytes(8<<10),
		kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	checkStored(t, c, topic, want, javaPartitioner)
}

// TestKgoTinyFetches: a kgo consumer asking for 1 byte a fetch and a
// partition still moves on: each fetch answers at least its first whole
// batch (KIP-74), as Kafka does.
func TestKgoTinyFetches(t *testing.T) {
	const topic = "tiny"
	c := kafkatest.New(t, kafkatest.Topic(topic, 2))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("tiny", 100)
	kgoProduce(ctx, t, c.Addr(), topic, want, kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(512))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		got = append(got, fs.Records()...)
	}
	checkKgoConsumed(t, c, topic, got)
}

// TestKgoResetByTime: a kgo consumer starting at a time (ListOffsets by
// timestamp, through Strata's time index) reads exactly the records at or
// after it; one starting at the end reads only what comes next.
func TestKgoResetByTime(t *testing.T) {
	const topic = "bytime"
	c := kafkatest.New(t, kafkatest.Topic(topic, 3))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("bytime", 90)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	cut := want[60].ts
	n := 0
	for _, rs := range stored(t, c, topic) {
		for _, r := range rs {
			if !r.Timestamp.Before(cut) {
				n++
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(cut.UnixMilli())))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	for _, r := range got {
		if r.Timestamp.Before(cut) {
			t.Fatalf("record %d/%d at %d, before %d", r.Partition, r.Offset, r.Timestamp.UnixMilli(), cut.UnixMilli())
		}
	}
	checkKgoConsumed(t, c, topic, got)

	end, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer end.Close()
	// Until kgo has found the end it reads nothing; once it has, it reads
	// the records that come next, and never an old one.
	fresh := map[string]bool{}
	for i := 0; ; i++ {
		next := makeRecs(fmt.Sprintf("next%d", i), 1)
		fresh[string(next[0].value)] = true
		kgoProduce(ctx, t, c.Addr(), topic, next)
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := end.PollFetches(pctx)
		cancel()
		for _, r := range fs.Records() {
			if !fresh[string(r.Value)] {
				t.Fatalf("a consumer at the end read an old record: %d/%d %.30q", r.Partition, r.Offset, r.Value)
			}
		}
		if len(fs.Records()) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("a consumer at the end read none of the new records")
		}
	}
}
