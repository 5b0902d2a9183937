package log

import (
	"bytes"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/vfs"
)

// prodBenchBroker opens a broker with a one-partition topic "t": on the
// operating system's file system in b.TempDir(), or in memory.
func prodBenchBroker(b *testing.B, mem bool) *Broker {
	b.Helper()
	cfg := Config{}
	dir := b.TempDir()
	if mem {
		cfg.FS, dir = vfs.NewMem(), "/data"
	}
	br, err := Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	if _, err := br.CreateTopic("t", TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	return br
}

// BenchmarkProducerSendAsync is SendAsync of records of one size to one
// partition through a real Broker, AcksLeader, default linger and batch
// size, a done callback per record; Flush is inside the timing. One op is
// one record. It reports records/s, the CPU time of the process per record
// (both goroutines, the broker and the GC: what bounds records/s on a
// machine whose cores are shared) and, for the OS file system, the fraction
// of the raw page-cache write bandwidth (rawWriteRate) that the encoded
// batches reach.
func BenchmarkProducerSendAsync(b *testing.B) {
	for _, fs := range []string{"os", "mem"} {
		for _, size := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("fs=%s/size=%d", fs, size), func(b *testing.B) {
				br := prodBenchBroker(b, fs == "mem")
				p, err := NewProducer(br, ProducerConfig{Acks: AcksLeader})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				var failed atomic.Int64
				done := func(_ Record, err error) {
					if err != nil {
						failed.Add(1)
					}
				}
				r := Record{Topic: "t", Value: bytes.Repeat([]byte{'v'}, size)}
				// Warm up: batches, builders and slots reach their steady
				// number and size outside the timing (enough records to
				// fill the buffer twice, had the sender kept none of them).
				for i := 0; i < 2*defaultBufferBytes/recordMemory(&r); i++ {
					p.SendAsync(r, done)
				}
				if err := p.Flush(b.Context()); err != nil {
					b.Fatal(err)
				}
				part, _ := br.Partition("t", 0)
				before := part.Size()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				cpu := processCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p.SendAsync(r, done)
				}
				if err := p.Flush(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu = processCPU() - cpu
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d records failed", n)
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)/sec, "records/s")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/record")
				if fs == "os" {
					b.ReportMetric(float64(part.Size()-before)/sec/rawWriteRate(), "of-raw-write")
				}
			})
		}
	}
}

// processCPU is the CPU time (user and system) the process has used: with
// other work on the machine, CPU per record says more than records/s.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProducerSend is the latency of a synchronous Send of a 100-byte
// record (one at a time, so each batch holds one record): with the default
// 5 ms linger, where the linger is the latency, and with no linger. It
// reports the median and the 99th percentile.
func BenchmarkProducerSend(b *testing.B) {
	for _, c := range []struct {
		name   string
		linger time.Duration
	}{{"linger=default", 0}, {"linger=none", -1}} {
		b.Run(c.name, func(b *testing.B) {
			br := prodBenchBroker(b, false)
			p, err := NewProducer(br, ProducerConfig{Acks: AcksLeader, Linger: c.linger})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			r := Record{Topic: "t", Value: bytes.Repeat([]byte{'v'}, 100)}
			lat := make([]time.Duration, 0, 1024)
			b.SetBytes(100)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if _, err := p.Send(b.Context(), r); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
