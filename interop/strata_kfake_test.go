package interop

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// dialKfake starts a kfake cluster of brokers with topic and dials it with
// Strata's Kafka client.
func dialKfake(ctx context.Context, t *testing.T, brokers int, topic string, partitions int) (*kfake.Cluster, *kafka.Client) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(int32(partitions), topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: kc.ListenAddrs()[:1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("close client: %v", err)
		}
	})
	return kc, cl
}

func logRecords(topic string, rs []rec) []log.Record {
	out := make([]log.Record, len(rs))
	for i, r := range rs {
		out[i] = log.Record{Topic: topic, Key: r.key, Value: r.value, Headers: r.headers, Timestamp: r.ts}
	}
	return out
}

// sendAll sends rs with p, asynchronously, and returns them as the broker
// acknowledged them (partition and offset set).
func sendAll(ctx context.Context, t *testing.T, p *log.Producer, topic string, rs []rec) []log.Record {
	t.Helper()
	out := make([]log.Record, len(rs))
	errs := make(chan error, len(rs))
	for i, r := range logRecords(topic, rs) {
		p.SendAsync(r, func(r log.Record, err error) {
			out[i] = r
			errs <- err
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestStrataClientKfake: Strata's Producer, with each codec, over Strata's
// Kafka client to a three-broker kfake cluster (leaders spread over the
// brokers): every record lands at the partition Kafka's partitioner gives
// its key and at the offset the producer reported, as kgo reads it back;
// Strata's Consumer over the same client reads them all.
func TestStrataClientKfake(t *testing.T) {
	for _, codec := range []struct {
		name string
		c    log.Compression
	}{
		{"none", log.CompressionNone}, {"gzip", log.CompressionGzip}, {"snappy", log.CompressionSnappy},
		{"lz4", log.CompressionLz4}, {"zstd", log.CompressionZstd},
	} {
		t.Run(codec.name, func(t *testing.T) {
			const topic = "strata"
			ctx := testCtx(t, 20*time.Second)
			kc, cl := dialKfake(ctx, t, 3, topic, 6)
			p, err := log.NewProducer(cl, log.ProducerConfig{Compression: codec.c, Linger: 2 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			want := makeRecs("strata-"+codec.name, 150)
			sent := sendAll(ctx, t, p, topic, want)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			bySpot := map[[2]int64]int{}
			for i, r := range sent {
				if want[i].key != nil && r.Partition != log.KeyPartition(want[i].key, 6) {
					t.Fatalf("record %d: sent to partition %d, Kafka's partitioner says %d", i, r.Partition, log.KeyPartition(want[i].key, 6))
				}
				bySpot[[2]int64{int64(r.Partition), r.Offset}] = i
			}

			// kgo reads what kfake holds.
			got := kgoConsume(ctx, t, kc.ListenAddrs()[0], topic, len(want))
			for _, r := range got {
				i, ok := bySpot[[2]int64{int64(r.Partition), r.Offset}]
				if !ok {
					t.Fatalf("kgo read %d/%d, which the producer did not report", r.Partition, r.Offset)
				}
				w := want[i]
				hs := make([]log.Header, len(r.Headers))
				for j, h := range r.Headers {
					hs[j] = log.Header{Key: h.Key, Value: h.Value}
				}
				if !bytes.Equal(r.Key, w.key) || !bytes.Equal(r.Value, w.value) || !r.Timestamp.Equal(w.ts) || !sameHeaders(hs, w.headers) {
					t.Fatalf("kgo read %d/%d key %q value %.30q ts %d headers %v; sent key %q value %.30q ts %d headers %v",
						r.Partition, r.Offset, r.Key, r.Value, r.Timestamp.UnixMilli(), hs, w.key, w.value, w.ts.UnixMilli(), w.headers)
				}
				if ct := r.Attrs.CompressionType(); ct != uint8(codec.c) {
					t.Fatalf("kgo read %d/%d with codec %d, want %d", r.Partition, r.Offset, ct, codec.c)
				}
			}

			// Strata's Consumer reads them too, over the Kafka client.
			cons, err := log.NewConsumer(cl, log.ConsumerConfig{Topics: []string{topic}, MaxWait: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			seen := map[[2]int64]bool{}
			for len(seen) < len(want) {
				rs, err := cons.Poll(ctx)
				if err != nil {
					t.Fatalf("poll after %d records: %v", len(seen), err)
				}
				for _, r := range rs {
					spot := [2]int64{int64(r.Partition), r.Offset}
					i, ok := bySpot[spot]
					if !ok || seen[spot] {
						t.Fatalf("consumer read %d/%d: unknown or twice", r.Partition, r.Offset)
					}
					seen[spot] = true
					w := want[i]
					if !bytes.Equal(r.Key, w.key) || !bytes.Equal(r.Value, w.value) || !r.Timestamp.Equal(w.ts) || !sameHeaders(r.Headers, w.headers) {
						t.Fatalf("consumer read %d/%d key %q ts %d; sent key %q ts %d", r.Partition, r.Offset, r.Key, r.Timestamp.UnixMilli(), w.key, w.ts.UnixMilli())
					}
				}
			}
		})
	}
}

// TestStrataClientKfakeOffsets: ListOffset through Strata's client against
// kfake: earliest, latest and by timestamp.
func TestStrataClientKfakeOffsets(t *testing.T) {
	const topic = "offsets"
	ctx := testCtx(t, 15*time.Second)
	kc, cl := dialKfake(ctx, t, 1, topic, 1)
	want := makeRecs("off", 20)
	kgoProduce(ctx, t, kc.ListenAddrs()[0], topic, want, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	tp := log.TopicPartition{Topic: topic, Partition: 0}
	for _, c := range []struct {
		at   int64
		want int64
	}{
		{log.EarliestOffset, 0},
		{log.LatestOffset, 20},
		{want[7].ts.UnixMilli(), 7},
		{want[19].ts.UnixMilli() + 1, 20}, // none that recent: the end offset, as log.Broker answers
	} {
		got, err := cl.ListOffset(context.Background(), tp, c.at)
		if err != nil || got != c.want {
			t.Errorf("ListOffset(%d) = %d, %v; want %d", c.at, got, err, c.want)
		}
	}
	if n, err := cl.Partitions(context.Background(), topic); err != nil || n != 1 {
		t.Errorf("Partitions = %d, %v", n, err)
	}
}

// TestStrataClientKfakeErrors: Kafka's error codes from kfake come back
// from Strata's client as log's sentinels.
func TestStrataClientKfakeErrors(t *testing.T) {
	const topic = "errs"
	ctx := testCtx(t, 15*time.Second)
	kc, cl := dialKfake(ctx, t, 1, topic, 1)
	kgoProduce(ctx, t, kc.ListenAddrs()[0], topic, makeRecs("e", 5), kgo.RecordPartitioner(kgo.ManualPartitioner()))

	if _, err := cl.Partitions(context.Background(), "nope"); !errors.Is(err, log.ErrUnknownTopic) {
		t.Errorf("Partitions of an unknown topic: %v, want ErrUnknownTopic", err)
	}
	p, err := log.NewProducer(cl, log.ProducerConfig{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Send(ctx, log.Record{Topic: "nope", Value: []byte("x")}); !errors.Is(err, log.ErrUnknownTopic) {
		t.Errorf("Send to an unknown topic: %v, want ErrUnknownTopic", err)
	}
	resp, err := cl.Fetch(ctx, log.FetchRequest{MaxWait: 10 * time.Millisecond, Partitions: []log.FetchPartition{
		{TopicPartition: log.TopicPartition{Topic: topic, Partition: 0}, Offset: 1000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Release()
	if len(resp.Partitions) != 1 || !errors.Is(resp.Partitions[0].Err, log.ErrOffsetOutOfRange) {
		t.Errorf("fetch past the end: %+v, want ErrOffsetOutOfRange", resp.Partitions)
	}
	// kfake answers GROUP_ID_NOT_FOUND where Kafka's classic coordinator
	// answers UNKNOWN_MEMBER_ID: either is a sentinel of Strata's.
	if err := cl.Heartbeat(ctx, "nogroup", "nomember", 1); !errors.Is(err, group.ErrGroupNotFound) && !errors.Is(err, log.ErrUnknownMember) {
		t.Errorf("heartbeat of a member of no group: %v", err)
	}
}

// TestStrataClientKfakeAcks: Strata's Producer with AcksLeader and
// AcksNone (produce requests with acks 1 and 0) to kfake; a kgo consumer
// reads every record.
func TestStrataClientKfakeAcks(t *testing.T) {
	for _, acks := range []struct {
		name string
		acks log.Acks
	}{{"leader", log.AcksLeader}, {"none", log.AcksNone}} {
		t.Run(acks.name, func(t *testing.T) {
			const topic = "acks"
			ctx := testCtx(t, 15*time.Second)
			kc, cl := dialKfake(ctx, t, 1, topic, 3)
			p, err := log.NewProducer(cl, log.ProducerConfig{Acks: acks.acks})
			if err != nil {
				t.Fatal(err)
			}
			want := makeRecs("acks-"+acks.name, 60)
			sendAll(ctx, t, p, topic, want)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			got := kgoConsume(ctx, t, kc.ListenAddrs()[0], topic, len(want))
			byValue := map[string]rec{}
			for _, w := range want {
				byValue[string(w.value)] = w
			}
			for _, r := range got {
				w, ok := byValue[string(r.Value)]
				if !ok || !bytes.Equal(r.Key, w.key) || !r.Timestamp.Equal(w.ts) {
					t.Fatalf("kgo read %d/%d %.30q: not sent", r.Partition, r.Offset, r.Value)
				}
				if w.key != nil && int(r.Partition) != log.KeyPartition(w.key, 3) {
					t.Fatalf("key %q in partition %d, want %d", w.key, r.Partition, log.KeyPartition(w.key, 3))
				}
				delete(byValue, string(r.Value))
			}
		})
	}
}
