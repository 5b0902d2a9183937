package main

import (
	"testing"

	"github.com/strata-log/strata/log"
)

// BenchmarkProduceConsume runs the Strata side of the produce+consume
// cases (1 KiB JSON-like records, quick size: 40 000 records a run;
// uncompressed, also in 16 KiB batches, lz4, zstd) in a go test benchmark, for profiles of where
// the time goes (-cpuprofile, -blockprofile, -mutexprofile, -trace). One op
// is one whole run, broker start and stop included; records/s and
// cpu-µs/record are those of the timed part, as the bench program
// measures them.
func BenchmarkProduceConsume(b *testing.B) {
	const size, n = 1024, 40_000
	values := jsonValues(1024, size)
	for _, c := range []struct {
		name       string
		codec      log.Compression
		batchBytes int
	}{{"none", log.CompressionNone, 0}, {"none-16KiB", log.CompressionNone, 16 << 10}, {"lz4", log.CompressionLz4, 0}, {"zstd", log.CompressionZstd, 0}} {
		b.Run(c.name, func(b *testing.B) {
			e := &env{mode: modeQuick, runs: 1, root: b.TempDir()}
			var sum sample
			for b.Loop() {
				s, err := strataProduceConsumeWith(e, size, n, log.ProducerConfig{Compression: c.codec, BatchBytes: c.batchBytes}, values)
				if err != nil {
					b.Fatal(err)
				}
				sum.Records += s.Records
				sum.Elapsed += s.Elapsed
				sum.CPU += s.CPU
			}
			b.ReportMetric(float64(sum.Records)/sum.Elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(sum.CPU.Microseconds())/float64(sum.Records), "cpu-µs/record")
		})
	}
}
