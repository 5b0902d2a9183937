package log_test

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// A producer that compresses its batches with zstd: the broker stores them as
// sent, and every reader decompresses them.
func ExampleProducerConfig_compression() {
	b, _ := log.Open("/data", log.Config{FS: vfs.NewMem()})
	defer b.Close()
	t, _ := b.CreateTopic("events", log.TopicConfig{})

	prod, err := log.NewProducer(b, log.ProducerConfig{Compression: log.CompressionZstd})
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		prod.SendAsync(log.Record{Topic: "events", Value: fmt.Appendf(nil, `{"event":%d}`, i)}, nil)
	}
	_ = prod.Flush(context.Background())
	_ = prod.Close()

	p, _ := t.Partition(0)
	recs, _ := p.Read(0, 1<<20)
	for _, r := range recs {
		fmt.Printf("%d %s\n", r.Offset, r.Value)
	}
	// Output:
	// 0 {"event":0}
	// 1 {"event":1}
	// 2 {"event":2}
}

// A topic that stores every batch with lz4, whatever its producer sent
// (Kafka's compression.type).
func ExampleTopicCompression() {
	b, _ := log.Open("/data", log.Config{FS: vfs.NewMem()})
	defer b.Close()
	t, _ := b.CreateTopic("logs", log.TopicConfig{Compression: log.TopicCompressionLz4})
	p, _ := t.Partition(0)
	_, _ = p.Append(log.Record{Value: []byte("stored compressed")})
	recs, _ := p.Read(0, 1<<20)
	fmt.Println(string(recs[0].Value), t.Name())
	// Output: stored compressed logs
}
