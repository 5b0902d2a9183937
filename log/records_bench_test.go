package log

import (
	"fmt"
	"testing"
)

// BenchmarkRecords replays a partition of about 64 MiB with Records, one
// whole replay per op, for a sweep of record sizes: records/s and
// allocs/record (0 is the target: a replay allocates a few buffers, none
// per record).
//
//	go test -run='^$' -bench=Records ./log/
func BenchmarkRecords(b *testing.B) {
	const perBatch = 100
	for _, size := range []int{16, 100, 1024} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			enc := encodedBatch(records(perBatch, size))
			batches := max(1, (64<<20)/len(enc))
			_, p := benchBroker(b, b.TempDir(), TopicConfig{})
			for range batches {
				if _, _, err := p.AppendBatch(enc); err != nil {
					b.Fatal(err)
				}
			}
			total := int64(batches * perBatch)
			b.SetBytes(int64(batches * len(enc)))
			b.ReportAllocs()
			m0, c0 := mallocs(), cpuTime()
			for b.Loop() {
				n := int64(0)
				for _, err := range p.Records(0) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != total {
					b.Fatalf("replayed %d records, want %d", n, total)
				}
			}
			b.StopTimer()
			n := float64(b.N) * float64(total)
			b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(n/(cpuTime()-c0).Seconds(), "records/cpu-s")
			b.ReportMetric(float64(mallocs()-m0)/n, "allocs/record")
		})
	}
}
