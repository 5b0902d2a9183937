package log

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/vfs"
)

// The cost of Config.Metrics: each benchmark runs the same work with the
// hooks nil and set to a metrics.Recorder, as sub-benchmarks, so that
// -count N interleaves them:
//
//	go test -c -o /tmp/log.test ./log/
//	for i in 1 2 3 4 5 6; do /tmp/log.test -test.run '^$' -test.bench BenchmarkMetrics; done
//
// (-count 6 would run each sub-benchmark six times in a row, not
// interleaved). cpu-ns/op is the process's CPU time per op, which other
// load on the machine changes much less than the wall clock.

var metricsHooks = []struct {
	name  string
	hooks func() metrics.Hooks
}{
	{"hooks=nil", func() metrics.Hooks { return nil }},
	{"hooks=recorder", func() metrics.Hooks { return metrics.NewRecorder() }},
}

func metricsBroker(b *testing.B, h metrics.Hooks, fs vfs.FS, cfg TopicConfig) (*Broker, *Partition) {
	b.Helper()
	dir := "/d"
	if fs == nil {
		dir = b.TempDir()
	}
	br, err := Open(dir, Config{FS: fs, Metrics: h})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	t, err := br.CreateTopic("t", cfg)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := t.Partition(0)
	return br, p
}

// BenchmarkMetricsAppend produces batches of 1000 records of 100 B through
// Broker.Produce (what the Kafka server calls) on the real disk, page
// cache only.
func BenchmarkMetricsAppend(b *testing.B) {
	enc := encodedBatch(records(1000, 100))
	for _, mh := range metricsHooks {
		b.Run(mh.name, func(b *testing.B) {
			br, _ := metricsBroker(b, mh.hooks(), nil, pageCache)
			tp := TopicPartition{Topic: "t"}
			ctx := context.Background()
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				if _, err := br.Produce(ctx, tp, enc, AcksLeader); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, c0)
		})
	}
}

// BenchmarkMetricsAppendFlushEach appends batches of 10 records of 100 B
// with FlushMessages 1 on the in-memory file system, whose fsync is cheap:
// every append flushes and reports it, the worst case for the hooks.
func BenchmarkMetricsAppendFlushEach(b *testing.B) {
	enc := encodedBatch(records(10, 100))
	for _, mh := range metricsHooks {
		b.Run(mh.name, func(b *testing.B) {
			h := mh.hooks()
			_, p := metricsBroker(b, h, vfs.NewMem(), TopicConfig{FlushMessages: 1, SegmentBytes: 64 << 20, RetentionBytes: 64 << 20, MaxIndexBytes: 1 << 20})
			var f0 uint64
			if rec, ok := h.(*metrics.Recorder); ok {
				f0 = rec.Snapshot().Fsync.Count
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				if _, _, err := p.AppendBatch(enc); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, c0)
			if rec, ok := h.(*metrics.Recorder); ok {
				b.ReportMetric(float64(rec.Snapshot().Fsync.Count-f0)/float64(b.N), "flushes/op")
			}
		})
	}
}

// BenchmarkMetricsFetch fetches 1 MiB per request through Broker.Fetch
// from a seeded partition on the real disk.
func BenchmarkMetricsFetch(b *testing.B) {
	enc := encodedBatch(records(1000, 1000))
	for _, mh := range metricsHooks {
		b.Run(mh.name, func(b *testing.B) {
			br, p := metricsBroker(b, mh.hooks(), nil, TopicConfig{})
			for range 64 {
				if _, _, err := p.AppendBatch(enc); err != nil {
					b.Fatal(err)
				}
			}
			req := FetchRequest{
				Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}}},
				MinBytes:   1, MaxBytes: 1 << 20, PartitionMaxBytes: 1 << 20,
			}
			ctx := context.Background()
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			c0 := cpuTime()
			i := 0
			for b.Loop() {
				req.Partitions[0].Offset = int64(i%63) * 1000
				i++
				resp, err := br.Fetch(ctx, req)
				if err != nil || resp.Partitions[0].Err != nil {
					b.Fatal(err, resp.Partitions[0].Err)
				}
				resp.Release()
			}
			reportCPU(b, c0)
		})
	}
}

// reportCPU reports the process's CPU time per op since c0.
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}
