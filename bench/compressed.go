package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compressedVariants: produce + consume of 1 KiB JSON-like records with
// lz4 and with zstd, the producer compressing, as the produce case does
// otherwise (one partition, n records sent asynchronously while a consumer
// reads them concurrently). Strata's Producer (ProducerConfig.Compression)
// and Consumer against kgo with the same codec against kfake.
func compressedVariants(e *env) []variant {
	const size = 1024
	n := e.pick(200_000, 40_000, 300)
	values := jsonValues(1024, size) // as many as a 1 MB batch of kgo holds: no value twice in a batch
	codecs := []struct {
		name   string
		strata log.Compression
		kgo    kgo.CompressionCodec
	}{
		{"lz4", log.CompressionLz4, kgo.Lz4Compression()},
		{"zstd", log.CompressionZstd, kgo.ZstdCompression()},
	}
	var vs []variant
	for _, c := range codecs {
		vs = append(vs, variant{
			label: "produce+consume " + sizeName(size) + " JSON, " + c.name, cpuNote: "record", liveHeap: true,
			limit: limitPageCache,
			systems: []system{
				{name: "strata Producer+Consumer, " + c.name, baseline: true,
					durability: "page cache (FlushMessages 0: fsync on roll and Close)",
					run: func(e *env) (sample, error) {
						return strataProduceConsumeWith(e, size, n, log.ProducerConfig{Compression: c.strata}, values)
					}},
				{name: "kfake + kgo, " + c.name, durability: kfakeDurability,
					run: func(e *env) (sample, error) {
						return kfakeProduceConsumeWith(e, size, n, values, kgo.ProducerBatchCompression(c.kgo))
					}},
			},
		})
	}
	return vs
}

// jsonValues returns k JSON documents of exactly size bytes, alike in shape
// and different in content, as the events of one topic are: they compress
// about as well as real ones (several to one), not to nothing.
func jsonValues(k, size int) [][]byte {
	words := []string{"deposit", "withdrawal", "transfer", "refund", "fee", "interest", "chargeback", "adjustment"}
	cities := []string{"Lisbon", "Osaka", "Lagos", "Quito", "Tallinn", "Perth", "Denver", "Pune"}
	x := uint32(2463534242)
	rnd := func() uint32 { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x }
	out := make([][]byte, k)
	for i := range out {
		b := fmt.Appendf(nil, `{"id":"evt-%08x-%04x","account":"acc-%06d","kind":%q,"amount":%d.%02d,"currency":"EUR","city":%q,"ts":"2026-12-01T%02d:%02d:%02d.%03dZ","tags":[`,
			rnd(), rnd()&0xffff, rnd()%1_000_000, words[rnd()%8], rnd()%100_000, rnd()%100, cities[rnd()%8],
			rnd()%24, rnd()%60, rnd()%60, rnd()%1000)
		for j := 0; len(b) < size-100; j++ { // a tag takes at most 45 bytes
			if j > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `{"k":%q,"v":%d,"ref":"%08x"}`, words[rnd()%8], rnd()%10_000, rnd())
		}
		b = append(b, `],"note":"`...)
		for len(b) < size-2 {
			b = append(b, "abcdefghijklmnopqrstuvwxyz0123456789"[rnd()%36])
		}
		out[i] = append(b, `"}`...)
	}
	return out
}

// strataProduceConsumeWith is strataProduceConsume with a producer config
// and values sent in turn.
func strataProduceConsumeWith(e *env, size, n int, pcfg log.ProducerConfig, values [][]byte) (sample, error) {
	dir, err := e.tempDir("strata-produce-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return sample{}, err
	}
	defer b.Close()
	if _, err := b.CreateTopic("bench", log.TopicConfig{}); err != nil {
		return sample{}, err
	}
	prod, err := log.NewProducer(b, pcfg)
	if err != nil {
		return sample{}, err
	}
	defer prod.Close()
	cons, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{"bench"}})
	if err != nil {
		return sample{}, err
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	i := 0
	return timeProduceConsume(ctx, cancel, "strata", n, size,
		func(failed *atomic.Int64) {
			v := values[i%len(values)]
			i++
			prod.SendAsync(log.Record{Topic: "bench", Value: v}, func(_ log.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		},
		prod.Flush,
		func(ctx context.Context) error { return strataConsume(ctx, cons, n) })
}

// kfakeProduceConsumeWith is kfakeProduceConsume with producer options and
// values sent in turn.
func kfakeProduceConsumeWith(e *env, size, n int, values [][]byte, popts ...kgo.Opt) (sample, error) {
	dir, err := e.tempDir("kfake-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	c, err := startKfake(dir, "bench", false)
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	prod, err := kgoClient(c, append([]kgo.Opt{kgo.DefaultProduceTopic("bench")}, popts...)...)
	if err != nil {
		return sample{}, err
	}
	defer prod.Close()
	cons, err := kgoClient(c, kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return sample{}, err
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	i := 0
	return timeProduceConsume(ctx, cancel, "kgo", n, size,
		func(failed *atomic.Int64) {
			v := values[i%len(values)]
			i++
			prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		},
		prod.Flush,
		func(ctx context.Context) error { return kgoConsume(ctx, cons, n) })
}
