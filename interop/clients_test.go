package interop

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestClientsOnDisk: a broker on disk, its segments small so that fetches
// cross segment files, serves fetches with sendfile from the files (each
// client asks for 20 KiB a partition, above the 16 KiB under which the
// server copies); kgo, sarama and kafka-go read every record, in order, as
// Strata stored it.
func TestClientsOnDisk(t *testing.T) {
	const topic, parts = "disk", 3
	b, err := log.Open(t.TempDir(), log.Config{DefaultTopic: log.TopicConfig{SegmentBytes: 32 << 10, MaxIndexBytes: 4 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(topic, log.TopicConfig{Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := testCtx(t, 30*time.Second)
	want := makeRecs("disk", 3000)
	// Several produce calls: many batches, several segments per partition.
	for i := 0; i < len(want); i += 500 {
		kgoProduce(ctx, t, srv.Addr(), topic, want[i:i+500], kgo.ProducerBatchMaxBytes(16<<10))
	}
	have := storedIn(t, b, topic)
	for p, rs := range have {
		if len(rs) < 500 {
			t.Fatalf("partition %d: %d records", p, len(rs))
		}
	}
	same := func(who string, p int, off int64, key, value []byte, ts time.Time) {
		t.Helper()
		if p >= parts || off >= int64(len(have[p])) {
			t.Fatalf("%s read %d/%d: not stored", who, p, off)
		}
		s := have[p][off]
		if !bytes.Equal(s.Key, key) || !bytes.Equal(s.Value, value) || !s.Timestamp.Equal(ts) {
			t.Fatalf("%s read %d/%d key %q ts %d; stored key %q ts %d", who, p, off, key, ts.UnixMilli(), s.Key, s.Timestamp.UnixMilli())
		}
	}

	t.Run("kgo", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr()), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(20<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		next := make([]int64, parts)
		for n := 0; n < len(want); {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			for _, r := range fs.Records() {
				if r.Offset != next[r.Partition] {
					t.Fatalf("kgo read %d/%d, want offset %d next", r.Partition, r.Offset, next[r.Partition])
				}
				next[r.Partition]++
				same("kgo", int(r.Partition), r.Offset, r.Key, r.Value, r.Timestamp)
				n++
			}
		}
	})
	t.Run("sarama", func(t *testing.T) {
		cfg := saramaConfig()
		cfg.Consumer.Return.Errors = true
		cfg.Consumer.Fetch.Default = 20 << 10
		cfg.Consumer.MaxWaitTime = 50 * time.Millisecond // closing waits for the parked fetch
		cons, err := sarama.NewConsumer([]string{srv.Addr()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		for p := range parts {
			pc, err := cons.ConsumePartition(topic, int32(p), sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			for off := range int64(len(have[p])) {
				select {
				case m := <-pc.Messages():
					if m.Offset != off {
						t.Fatalf("sarama read %d/%d, want %d", p, m.Offset, off)
					}
					same("sarama", p, m.Offset, m.Key, m.Value, m.Timestamp)
				case err := <-pc.Errors():
					t.Fatal(err)
				case <-ctx.Done():
					t.Fatalf("sarama: nothing at %d/%d", p, off)
				}
			}
			pc.Close()
		}
	})
	t.Run("kafka-go", func(t *testing.T) {
		for p := range parts {
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{srv.Addr()}, Topic: topic, Partition: p,
				MaxBytes: 20 << 10, MaxWait: 100 * time.Millisecond})
			for off := range int64(len(have[p])) {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatal(fmt.Errorf("kafka-go at %d/%d: %w", p, off, err))
				}
				if m.Offset != off {
					t.Fatalf("kafka-go read %d/%d, want %d", p, m.Offset, off)
				}
				same("kafka-go", p, m.Offset, m.Key, m.Value, m.Time)
			}
			r.Close()
		}
	})
}

// TestAutoCreateTopics: with the server's AutoCreateTopics, kgo (asking
// for it) and sarama (by default) produce to topics that do not exist yet;
// without it, kgo's produce fails with UNKNOWN_TOPIC_OR_PARTITION (see
// TestKgoErrors).
func TestAutoCreateTopics(t *testing.T) {
	c := kafkatest.New(t, kafkatest.WithServerConfig(kafka.Config{AutoCreateTopics: true}))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("auto", 10)
	kgoProduce(ctx, t, c.Addr(), "auto-kgo", want, kgo.AllowAutoTopicCreation())
	checkStored(t, c, "auto-kgo", want, javaPartitioner)

	cfg := saramaConfig()
	p, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.SendMessages(saramaMessages("auto-sarama", want)); err != nil {
		t.Fatal(err)
	}
	checkStored(t, c, "auto-sarama", want, saramaHash)
}

// TestOldVersions: clients pinned to old Kafka versions use the lowest
// request versions the server serves (Produce v3, Fetch v4, older
// Metadata, ListOffsets and group requests), and still round-trip records
// and consume as a group.
func TestOldVersions(t *testing.T) {
	for _, v := range []struct {
		name string
		kgo  *kversion.Versions
	}{
		{"kafka-0.11", kversion.V0_11_0()},
		{"kafka-1.1", kversion.V1_1_0()},
		{"kafka-2.4", kversion.V2_4_0()},
		{"kafka-3.0", kversion.V3_0_0()},
	} {
		t.Run("kgo-"+v.name, func(t *testing.T) {
			const topic = "old"
			c := kafkatest.New(t, kafkatest.Topic(topic, 3))
			ctx := testCtx(t, 20*time.Second)
			want := makeRecs("old-"+v.name, 60)
			kgoProduce(ctx, t, c.Addr(), topic, want, kgo.MaxVersions(v.kgo))
			checkStored(t, c, topic, want, javaPartitioner)
			recs := make(chan *kgo.Record, 64)
			m := startKgoMember(t, c.Addr(), "old", topic, recs, kgo.MaxVersions(v.kgo), kgo.Balancers(kgo.RangeBalancer()))
			defer m.close()
			var got []*kgo.Record
			for len(got) < len(want) {
				select {
				case r := <-recs:
					got = append(got, r)
				case <-ctx.Done():
					t.Fatalf("consumed %d of %d", len(got), len(want))
				}
			}
			checkKgoConsumed(t, c, topic, got)
		})
	}
	t.Run("sarama-0.11", func(t *testing.T) {
		const topic = "old"
		c := kafkatest.New(t, kafkatest.Topic(topic, 3))
		cfg := saramaConfig()
		cfg.Version = sarama.V0_11_0_0
		cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
		p, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		want := makeRecs("sarama-old", 60)
		if err := p.SendMessages(saramaMessages(topic, want)); err != nil {
			t.Fatal(err)
		}
		checkStored(t, c, topic, want, javaPartitioner)
	})
}

// TestManyTopics: produce requests and fetches that carry several topics
// at once — kgo, sarama and kafka-go (a Writer without a Topic) each
// produce to three topics in one call, and one kgo consumer reads the
// three.
func TestManyTopics(t *testing.T) {
	topics := []string{"ta", "tb", "tc"}
	c := kafkatest.New(t, kafkatest.Topic("ta", 2), kafkatest.Topic("tb", 3), kafkatest.Topic("tc", 1))
	ctx := testCtx(t, 20*time.Second)
	want := map[string][]rec{}
	add := func(client string) (krs []*kgo.Record, sms []*sarama.ProducerMessage, kms []kafkago.Message) {
		for _, topic := range topics {
			rs := makeRecs(client+"-"+topic, 20)
			want[topic] = append(want[topic], rs...)
			krs = append(krs, kgoRecords(topic, rs)...)
			sms = append(sms, saramaMessages(topic, rs)...)
			for _, m := range kafkagoMessages(rs) {
				m.Topic = topic
				kms = append(kms, m)
			}
		}
		return krs, sms, kms
	}

	krs, _, _ := add("kgo")
	cl := kgoClient(t, c.Addr())
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	_, sms, _ := add("sarama")
	cfg := saramaConfig()
	cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
	cfg.Producer.Flush.Messages = len(sms)
	cfg.Producer.Flush.Frequency = time.Second
	sp, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if err := sp.SendMessages(sms); err != nil {
		t.Fatal(err)
	}
	_, _, kms := add("kafkago")
	w := &kafkago.Writer{Addr: kafkago.TCP(c.Addr()), Balancer: kafkago.Murmur2Balancer{}, BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafkago.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(ctx, kms...); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, topic := range topics {
		checkStored(t, c, topic, want[topic], javaPartitioner)
		n += len(want[topic])
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string][]*kgo.Record{}
	for seen := 0; seen < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic] = append(got[r.Topic], r); seen++ })
	}
	for _, topic := range topics {
		checkKgoConsumed(t, c, topic, got[topic])
	}
}

// TestServerRestart: the server is closed and listens again on the same
// address over the same broker; kgo's producer and consumer and Strata's
// client (kafka.Dial) reconnect and go on.
func TestServerRestart(t *testing.T) {
	const topic = "restart"
	b, err := log.Open(t.TempDir(), log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(topic, log.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	defer func() { srv.Close() }()
	ctx := testCtx(t, 30*time.Second)

	prod := kgoClient(t, addr)
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	sc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sp, err := log.NewProducer(sc, log.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()

	var want []rec
	consumed := 0
	round := func(name string) {
		t.Helper()
		rs := makeRecs(name+"-kgo", 20)
		if err := prod.ProduceSync(ctx, kgoRecords(topic, rs)...).FirstErr(); err != nil {
			t.Fatalf("%s: kgo produce: %v", name, err)
		}
		srs := makeRecs(name+"-strata", 20)
		sendAll(ctx, t, sp, topic, srs)
		want = append(want, append(rs, srs...)...)
		for consumed < len(want) {
			fs := cons.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("%s: kgo consume: %v", name, err)
			}
			consumed += len(fs.Records())
		}
	}
	round("before")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = kafka.Listen(addr, b, kafka.Config{})
	if err != nil {
		t.Fatal(err)
	}
	round("after")
	checkStoredIn(t, b, topic, want, javaPartitioner)
	if consumed != len(want) {
		t.Fatalf("kgo consumed %d records, want %d", consumed, len(want))
	}
}
