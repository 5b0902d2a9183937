package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/segment/batch"
)

// goldenDir is where the generator writes the batches that the segment/batch
// tests decode.
const goldenDir = "../segment/batch/testdata/golden"

// goldenRecord is one record of the golden batches. The same five records,
// written out again, are what segment/batch's TestGoldenBatches expects:
// change both together.
type goldenRecord struct {
	key, value []byte // nil is null
	headers    [][2]string
	ts         int64 // ms
}

const goldenBase = 1_764_000_000_000

func goldenRecords() []goldenRecord {
	return []goldenRecord{
		{key: []byte("key-0"), value: bytes.Repeat([]byte(`{"id":0,"name":"golden","tags":["a","b"]},`), 24), headers: [][2]string{{"trace", "t-0"}, {"content-type", "json"}}, ts: goldenBase},
		{key: nil, value: []byte("v1"), ts: goldenBase + 1000},
		{key: []byte("key-2"), value: nil, headers: [][2]string{{"h", "x"}}, ts: goldenBase + 2000},
		{key: []byte("key-3"), value: []byte("three"), ts: goldenBase + 3000},
		{key: []byte("key-4"), value: bytes.Repeat([]byte(`{"n":4,"payload":"0123456789abcdef"},`), 80), ts: goldenBase + 1500},
	}
}

var goldenCodecs = []struct {
	name   string
	kgo    kgo.CompressionCodec
	sarama sarama.CompressionCodec
}{
	{"gzip", kgo.GzipCompression(), sarama.CompressionGZIP},
	{"snappy", kgo.SnappyCompression(), sarama.CompressionSnappy},
	{"lz4", kgo.Lz4Compression(), sarama.CompressionLZ4},
	{"zstd", kgo.ZstdCompression(), sarama.CompressionZSTD},
}

// capture records the record bytes of every produce request kfake receives,
// and lets kfake handle the request as usual.
type capture struct {
	mu      sync.Mutex
	batches [][]byte
}

func (c *capture) install(cl *kfake.Cluster) {
	cl.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, t := range pr.Topics {
			for _, p := range t.Partitions {
				if len(p.Records) > 0 {
					c.batches = append(c.batches, bytes.Clone(p.Records))
				}
			}
		}
		return nil, nil, false // not handled: observed only
	})
}

func (c *capture) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.batches, nil)
}

func newKfake(t *testing.T, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestGenerateGolden has kgo and sarama each produce the golden records with
// each codec to kfake, captures the produce requests' record batches and
// writes them to segment/batch/testdata/golden/<client>-<codec>.batch. It
// runs only with STRATA_GOLDEN=1: the files are committed, and regenerating
// them is a deliberate act (a client's new version may frame differently).
func TestGenerateGolden(t *testing.T) {
	if os.Getenv("STRATA_GOLDEN") == "" {
		t.Skip("generator: set STRATA_GOLDEN=1 to regenerate segment/batch/testdata/golden")
	}
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, codec := range goldenCodecs {
		for client, produce := range map[string]func(*testing.T, string, []string){
			"kgo": func(t *testing.T, topic string, seeds []string) { produceKgo(t, topic, seeds, codec.kgo) },
			"sarama": func(t *testing.T, topic string, seeds []string) {
				produceSarama(t, topic, seeds, codec.sarama)
			},
		} {
			t.Run(client+"-"+codec.name, func(t *testing.T) {
				c := newKfake(t, "golden")
				var cp capture
				cp.install(c)
				produce(t, "golden", c.ListenAddrs())
				raw := cp.bytes()
				n := 0
				if err := batch.Batches(raw, func(b []byte, h batch.Header) error {
					n += int(h.NumRecords)
					if got := h.Compression(); got != compressionID(codec.name) {
						return fmt.Errorf("batch codec %d, want %s", got, codec.name)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if n != len(goldenRecords()) {
					t.Fatalf("captured %d records, want %d", n, len(goldenRecords()))
				}
				name := filepath.Join(goldenDir, client+"-"+codec.name+".batch")
				if err := os.WriteFile(name, raw, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d bytes", name, len(raw))
			})
		}
	}
}

func compressionID(name string) int {
	switch name {
	case "gzip":
		return batch.CompressionGzip
	case "snappy":
		return batch.CompressionSnappy
	case "lz4":
		return batch.CompressionLz4
	case "zstd":
		return batch.CompressionZstd
	}
	return -1
}

// produceKgo sends the golden records as one batch: a long linger holds them
// until Flush sends them together.
func produceKgo(t *testing.T, topic string, seeds []string, codec kgo.CompressionCodec) {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Minute),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, g := range goldenRecords() {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: g.key, Value: g.value, Timestamp: time.UnixMilli(g.ts)}
		for _, h := range g.headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// produceSarama sends the golden records with a sync producer that flushes
// once it holds all of them.
func produceSarama(t *testing.T, topic string, seeds []string, codec sarama.CompressionCodec) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.Producer.Compression = codec
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Messages = len(goldenRecords())
	cfg.Producer.Flush.Frequency = time.Minute
	p, err := sarama.NewSyncProducer(seeds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for _, g := range goldenRecords() {
		m := &sarama.ProducerMessage{Topic: topic, Partition: 0, Timestamp: time.UnixMilli(g.ts)}
		if g.key != nil {
			m.Key = sarama.ByteEncoder(g.key)
		}
		if g.value != nil {
			m.Value = sarama.ByteEncoder(g.value)
		}
		for _, h := range g.headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		msgs = append(msgs, m)
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}
