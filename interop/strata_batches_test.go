package interop

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/segment/batch"
)

// TestStrataBatchesReadByClients: batches compressed by Strata's Builder, with
// each codec, pushed into kfake as a produce request (kmsg) carrying Strata's
// bytes, are read back by kgo's and sarama's consumers with the right keys,
// values, headers and timestamps: what Strata writes, Kafka clients read.
func TestStrataBatchesReadByClients(t *testing.T) {
	for _, codec := range goldenCodecs {
		t.Run(codec.name, func(t *testing.T) {
			const topic = "strata"
			c := newKfake(t, topic)
			want := goldenRecords()
			// Two batches: the golden records, and 200 JSON-like records of
			// about 1 KiB (several lz4 blocks and xerial-sized chunks).
			var big []goldenRecord
			for i := range 200 {
				v := fmt.Appendf(nil, `{"i":%d,"user":"user-%d","events":[`, i, i%17)
				for len(v) < 1000 {
					v = fmt.Appendf(v, `{"page":"/p/%d","ms":%d},`, len(v)*i%991, len(v))
				}
				big = append(big, goldenRecord{key: fmt.Appendf(nil, "k%d", i), value: append(v, "]}"...), ts: goldenBase + int64(i)})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(kversion.V3_9_0()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for _, recs := range [][]goldenRecord{want, big} {
				produceRaw(ctx, t, cl, topic, strataBatch(t, compressionID(codec.name), recs))
			}
			want = append(want, big...)

			t.Run("kgo", func(t *testing.T) { consumeKgo(ctx, t, c.ListenAddrs(), topic, want) })
			t.Run("sarama", func(t *testing.T) { consumeSarama(t, c.ListenAddrs(), topic, want) })
		})
	}
}

// strataBatch encodes recs with Strata's Builder and codec, and checks it is
// compressed.
func strataBatch(t *testing.T, codec int, recs []goldenRecord) []byte {
	t.Helper()
	var bd batch.Builder
	bd.SetCompression(codec)
	bd.Reset(recs[0].ts)
	for _, r := range recs {
		var hs []batch.RecordHeader
		for _, h := range r.headers {
			hs = append(hs, batch.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		bd.Append(r.ts, r.key, r.value, hs)
	}
	b := bytes.Clone(bd.Bytes())
	h, err := batch.ValidateProduced(b)
	if err != nil || h.Compression() != codec {
		t.Fatalf("Strata's batch: codec %d, %v", h.Compression(), err)
	}
	return b
}

// produceRaw sends b, as it is, in a produce request.
func produceRaw(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, b []byte) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response: %+v", resp)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce of Strata's batch: error code %d", code)
	}
}

func consumeKgo(ctx context.Context, t *testing.T, seeds []string, topic string, want []goldenRecord) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != len(want) {
		t.Fatalf("kgo read %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		var hs [][2]string
		for _, h := range r.Headers {
			hs = append(hs, [2]string{h.Key, string(h.Value)})
		}
		checkRecord(t, "kgo", i, r.Offset, r.Key, r.Value, hs, r.Timestamp, want[i])
	}
}

func consumeSarama(t *testing.T, seeds []string, topic string, want []goldenRecord) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer(seeds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	timeout := time.After(30 * time.Second)
	for i := range want {
		select {
		case m := <-pc.Messages():
			var hs [][2]string
			for _, h := range m.Headers {
				hs = append(hs, [2]string{string(h.Key), string(h.Value)})
			}
			checkRecord(t, "sarama", i, m.Offset, m.Key, m.Value, hs, m.Timestamp, want[i])
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("sarama read %d records of %d in 30 s", i, len(want))
		}
	}
}

func checkRecord(t *testing.T, client string, i int, off int64, key, value []byte, hs [][2]string, ts time.Time, w goldenRecord) {
	t.Helper()
	// Clients do not all tell a null from an empty key or value: compare
	// nullness only where the record has bytes.
	if off != int64(i) || !bytes.Equal(key, w.key) || !bytes.Equal(value, w.value) ||
		(w.key == nil) != (key == nil) || (w.value == nil) != (value == nil) || ts.UnixMilli() != w.ts {
		t.Fatalf("%s record %d: offset %d key %q value %.40q ts %d; want key %q value %.40q ts %d",
			client, i, off, key, value, ts.UnixMilli(), w.key, w.value, w.ts)
	}
	if len(hs) != len(w.headers) {
		t.Fatalf("%s record %d: headers %v, want %v", client, i, hs, w.headers)
	}
	for j := range hs {
		if hs[j] != w.headers[j] {
			t.Fatalf("%s record %d: headers %v, want %v", client, i, hs, w.headers)
		}
	}
}
