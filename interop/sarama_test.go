package interop

import (
	"errors"
	"hash/fnv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// saramaMessages converts recs to sarama messages of topic.
func saramaMessages(topic string, rs []rec) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, len(rs))
	for i, r := range rs {
		m := &sarama.ProducerMessage{Topic: topic, Value: sarama.ByteEncoder(r.value), Timestamp: r.ts}
		if r.key != nil {
			m.Key = sarama.ByteEncoder(r.key)
		}
		for _, h := range r.headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		out[i] = m
	}
	return out
}

// saramaHash is sarama's default partitioner for keyed messages
// (NewHashPartitioner): FNV-1a, as a signed int32, modulo n, negated if
// negative. It is not the Java client's.
func saramaHash(key []byte, n int) int {
	h := fnv.New32a()
	h.Write(key)
	p := int32(h.Sum32()) % int32(n)
	if p < 0 {
		p = -p
	}
	return int(p)
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Timeout = 5 * time.Second
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 5 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 2
	cfg.Metadata.Retry.Backoff = 10 * time.Millisecond
	return cfg
}

// TestSaramaSyncProducer: sarama's SyncProducer, with its default config
// (and so its FNV-1a hash partitioner) and with each codec and the murmur2
// partitioner that matches the Java client's. Where sarama says it put
// each message is where Strata has it.
func TestSaramaSyncProducer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codec sarama.CompressionCodec
		part  sarama.PartitionerConstructor
		check partitioner
	}{
		{"default", sarama.CompressionNone, nil, saramaHash},
		{"gzip", sarama.CompressionGZIP, sarama.NewMurmur2Partitioner, javaPartitioner},
		{"snappy", sarama.CompressionSnappy, sarama.NewMurmur2Partitioner, javaPartitioner},
		{"lz4", sarama.CompressionLZ4, sarama.NewMurmur2Partitioner, javaPartitioner},
		{"zstd", sarama.CompressionZSTD, sarama.NewMurmur2Partitioner, javaPartitioner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "sync"
			c := kafkatest.New(t, kafkatest.Topic(topic, 4))
			cfg := saramaConfig()
			cfg.Producer.Compression = tc.codec
			if tc.part != nil {
				cfg.Producer.Partitioner = tc.part
			}
			if tc.codec == sarama.CompressionZSTD {
				cfg.Version = sarama.V2_1_0_0 // zstd needs Produce v7
			}
			p, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			want := makeRecs("sarama-"+tc.name, 80)
			msgs := saramaMessages(topic, want)
			// Half one by one, half in one call.
			for _, m := range msgs[:40] {
				if _, _, err := p.SendMessage(m); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.SendMessages(msgs[40:]); err != nil {
				t.Fatal(err)
			}
			checkStored(t, c, topic, want, tc.check)
			parts := stored(t, c, topic)
			for i, m := range msgs {
				if int(m.Partition) >= len(parts) || m.Offset >= int64(len(parts[m.Partition])) ||
					string(parts[m.Partition][m.Offset].Value) != string(want[i].value) {
					t.Fatalf("message %d: sarama says %d/%d, not where Strata has it", i, m.Partition, m.Offset)
				}
			}
		})
	}
}

// TestSaramaAsyncProducer: sarama's AsyncProducer with each codec, its
// successes where Strata stored the messages.
func TestSaramaAsyncProducer(t *testing.T) {
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP,
		sarama.CompressionSnappy, sarama.CompressionLZ4, sarama.CompressionZSTD} {
		t.Run(codec.String(), func(t *testing.T) {
			const topic = "async"
			c := kafkatest.New(t, kafkatest.Topic(topic, 3))
			cfg := saramaConfig()
			cfg.Version = sarama.V2_1_0_0
			cfg.Producer.Compression = codec
			cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
			cfg.Producer.Return.Errors = true
			cfg.Producer.Flush.Frequency = 5 * time.Millisecond
			p, err := sarama.NewAsyncProducer([]string{c.Addr()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := makeRecs("async-"+codec.String(), 150)
			go func() {
				for _, m := range saramaMessages(topic, want) {
					p.Input() <- m
				}
			}()
			timeout := time.After(10 * time.Second)
			for n := 0; n < len(want); n++ {
				select {
				case <-p.Successes():
				case err := <-p.Errors():
					t.Fatal(err)
				case <-timeout:
					t.Fatalf("%d messages of %d acknowledged in 10 s", n, len(want))
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			checkStored(t, c, topic, want, javaPartitioner)
		})
	}
}

// TestSaramaIdempotent: sarama's idempotent producer needs InitProducerId;
// without it NewSyncProducer fails with UNSUPPORTED_VERSION (after its own
// retries, few here) rather than hang.
func TestSaramaIdempotent(t *testing.T) {
	const topic = "idem"
	c := kafkatest.New(t, kafkatest.Topic(topic, 2))
	ctx := testCtx(t, 10*time.Second)
	cfg := saramaConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.Retry.Max = 2
	cfg.Producer.Transaction.Retry.Backoff = 10 * time.Millisecond
	cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
	served := serves(ctx, t, c.Addr(), 22)
	start := time.Now()
	p, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
	if !served {
		if err == nil {
			p.Close()
			t.Fatal("sarama's idempotent producer started without InitProducerId")
		}
		if !errors.Is(err, sarama.ErrUnsupportedVersion) {
			t.Fatalf("sarama's idempotent producer without InitProducerId: %v, want UNSUPPORTED_VERSION", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("sarama's idempotent producer took %v to fail", d)
		}
		t.Logf("InitProducerId not served: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := makeRecs("idem", 40)
	if err := p.SendMessages(saramaMessages(topic, want)); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) {
			t.Fatal(pe[0].Err)
		}
		t.Fatal(err)
	}
	checkStored(t, c, topic, want, javaPartitioner)
}

// TestSaramaConsumer: sarama's partition consumer reads what Strata stored
// from the oldest offset, and its client lists the offsets Strata has.
func TestSaramaConsumer(t *testing.T) {
	const topic = "cons"
	c := kafkatest.New(t, kafkatest.Topic(topic, 3))
	ctx := testCtx(t, 15*time.Second)
	kgoProduce(ctx, t, c.Addr(), topic, makeRecs("sc", 90))
	parts := stored(t, c, topic)
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	client, err := sarama.NewClient([]string{c.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for p, rs := range parts {
		oldest, err1 := client.GetOffset(topic, int32(p), sarama.OffsetOldest)
		newest, err2 := client.GetOffset(topic, int32(p), sarama.OffsetNewest)
		if err1 != nil || err2 != nil || oldest != 0 || newest != int64(len(rs)) {
			t.Fatalf("partition %d: offsets %d, %d (%v, %v); want 0, %d", p, oldest, newest, err1, err2, len(rs))
		}
		pc, err := cons.ConsumePartition(topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rs {
			select {
			case m := <-pc.Messages():
				hs := make([]log.Header, len(m.Headers))
				for i, h := range m.Headers {
					hs[i] = log.Header{Key: string(h.Key), Value: h.Value}
				}
				if m.Offset != s.Offset || string(m.Key) != string(s.Key) || string(m.Value) != string(s.Value) ||
					!m.Timestamp.Equal(s.Timestamp) || !sameHeaders(hs, s.Headers) {
					t.Fatalf("partition %d: sarama read offset %d key %q ts %d headers %v; stored offset %d key %q ts %d headers %v",
						p, m.Offset, m.Key, m.Timestamp.UnixMilli(), hs, s.Offset, s.Key, s.Timestamp.UnixMilli(), s.Headers)
				}
			case err := <-pc.Errors():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatalf("partition %d: sarama read nothing at offset %d", p, s.Offset)
			}
		}
		if err := pc.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
