package interop

import (
	"hash/crc32"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// kafkagoMessages converts recs to kafka-go messages.
func kafkagoMessages(rs []rec) []kafkago.Message {
	out := make([]kafkago.Message, len(rs))
	for i, r := range rs {
		m := kafkago.Message{Key: r.key, Value: r.value, Time: r.ts}
		for _, h := range r.headers {
			m.Headers = append(m.Headers, kafkago.Header{Key: h.Key, Value: h.Value})
		}
		out[i] = m
	}
	return out
}

// crc32Partitioner is kafka-go's CRC32Balancer (librdkafka's "consistent").
func crc32Partitioner(key []byte, n int) int { return int(crc32.ChecksumIEEE(key) % uint32(n)) }

// TestKafkagoWriter: kafka-go's Writer with its balancers and codecs. Its
// Murmur2Balancer puts keys where the Java client (and Strata) does; its
// Hash balancer where sarama's default partitioner does.
func TestKafkagoWriter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kafkago.Balancer
		codec    compress.Compression
		check    partitioner
	}{
		{"default", nil, 0, nil}, // round robin: no keyed placement
		{"murmur2-gzip", kafkago.Murmur2Balancer{}, compress.Gzip, javaPartitioner},
		{"hash-snappy", &kafkago.Hash{}, compress.Snappy, saramaHash},
		{"crc32-lz4", kafkago.CRC32Balancer{}, compress.Lz4, crc32Partitioner},
		{"leastbytes-zstd", &kafkago.LeastBytes{}, compress.Zstd, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "writer"
			c := kafkatest.New(t, kafkatest.Topic(topic, 4))
			ctx := testCtx(t, 15*time.Second)
			w := &kafkago.Writer{
				Addr:         kafkago.TCP(c.Addr()),
				Topic:        topic,
				Balancer:     tc.balancer,
				Compression:  tc.codec,
				BatchTimeout: 5 * time.Millisecond,
				RequiredAcks: kafkago.RequireAll,
				WriteTimeout: 5 * time.Second,
				ReadTimeout:  5 * time.Second,
			}
			defer w.Close()
			want := makeRecs("kafkago-"+tc.name, 120)
			msgs := kafkagoMessages(want)
			for _, m := range msgs[:20] {
				if err := w.WriteMessages(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.WriteMessages(ctx, msgs[20:]...); err != nil {
				t.Fatal(err)
			}
			checkStored(t, c, topic, want, tc.check)
		})
	}
}

// TestKafkagoReader: kafka-go's Reader (one partition, no group) reads what
// Strata stored, with keys, values, headers and timestamps.
func TestKafkagoReader(t *testing.T) {
	const topic = "reader"
	c := kafkatest.New(t, kafkatest.Topic(topic, 2))
	ctx := testCtx(t, 15*time.Second)
	want := makeRecs("kgr", 60)
	kgoProduce(ctx, t, c.Addr(), topic, want)
	parts := stored(t, c, topic)
	for p, rs := range parts {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:   []string{c.Addr()},
			Topic:     topic,
			Partition: p,
			MaxWait:   100 * time.Millisecond,
		})
		for _, s := range rs {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
			if m.Offset != s.Offset || string(m.Key) != string(s.Key) || string(m.Value) != string(s.Value) ||
				!m.Time.Equal(s.Timestamp) || len(m.Headers) != len(s.Headers) {
				t.Fatalf("partition %d: read offset %d key %q ts %d headers %d; stored offset %d key %q ts %d headers %d",
					p, m.Offset, m.Key, m.Time.UnixMilli(), len(m.Headers), s.Offset, s.Key, s.Timestamp.UnixMilli(), len(s.Headers))
			}
			for i, h := range m.Headers {
				if h.Key != s.Headers[i].Key || string(h.Value) != string(s.Headers[i].Value) {
					t.Fatalf("partition %d offset %d: header %d %q=%q, stored %q=%q", p, m.Offset, i, h.Key, h.Value, s.Headers[i].Key, s.Headers[i].Value)
				}
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
