package log

// Benchmarks of the Consumer, the targets of issue 4:
//
//	BenchmarkConsumerPoll     Poll of a pre-filled partition: records/s (target
//	                          ≥ 6 M of 100 B), allocs/record
//	BenchmarkConsumerLatency  append → a parked Poll (MinBytes 1) returns it:
//	                          p50, p99, max (target p99 ≤ 1 ms)
//
// Both run on the in-memory file system and on the operating system's (in
// b.TempDir(), page cache, no fsync). Run them with
//
//	go test -run '^$' -bench 'Consumer' -benchtime 2s ./log/

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// consBenchBroker opens a broker with a one-partition topic "t".
func consBenchBroker(b *testing.B, fs string) (*Broker, *Partition) {
	b.Helper()
	cfg, dir := Config{}, b.TempDir()
	if fs == "mem" {
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
	p, err := br.Partition("t", 0)
	if err != nil {
		b.Fatal(err)
	}
	return br, p
}

// consBenchBatch encodes n records with 10-byte keys and size-byte values.
func consBenchBatch(n, size int) []byte {
	var bd batch.Builder
	now := time.Now().UnixMilli()
	bd.Reset(now)
	key, value := bytes.Repeat([]byte{'k'}, 10), bytes.Repeat([]byte{'v'}, size)
	for range n {
		bd.Append(now, key, value, nil)
	}
	return bytes.Clone(bd.Bytes())
}

// consCPUTime is the CPU time of the process so far (user + system, every
// thread): the machine's cores are shared, and this moves much less with the
// other processes' load than the wall clock does.
func consCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkConsumerPoll polls one partition pre-filled with batches of 1000
// records (10-byte keys), default ConsumerConfig (1 MiB per partition and
// Poll), from start to end and again. One op is one record: ns/op is per
// record, B/s counts the values, allocs/op is per record. It also reports
// records/s and records/cpu-s.
func BenchmarkConsumerPoll(b *testing.B) {
	for _, fs := range []string{"mem", "os"} {
		for _, size := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("fs=%s/size=%d", fs, size), func(b *testing.B) {
				br, p := consBenchBroker(b, fs)
				enc := consBenchBatch(1000, size)
				for range max(16, (64<<20)/len(enc)) { // about 64 MiB
					if _, _, err := p.AppendBatch(slices.Clone(enc)); err != nil {
						b.Fatal(err)
					}
				}
				end := p.EndOffset()
				c, err := NewConsumer(br, ConsumerConfig{Topics: []string{"t"}})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				cpu0, n := consCPUTime(), 0
				for n < b.N {
					recs, err := c.Poll(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if len(recs) == 0 {
						b.Fatalf("nothing polled after %d records", n)
					}
					n += len(recs)
					if last := recs[len(recs)-1].Offset; last+1 == end {
						if err := c.Seek("t", 0, 0); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(n)/(consCPUTime()-cpu0).Seconds(), "records/cpu-s")
			})
		}
	}
}

// BenchmarkConsumerLatency measures produce → consume: a consumer parks in
// Poll (MinBytes 1, MaxWait 1 min); once it is parked in the broker's
// purgatory, a batch of one 100-byte record is produced with Client.Produce
// (AcksLeader), and the latency is from just before that call until Poll
// has returned the record to the consumer's goroutine. One op is one record.
// It reports p50-us, p99-us and max-us; the append must wake the fetch at
// once, not a timer.
func BenchmarkConsumerLatency(b *testing.B) {
	for _, fs := range []string{"mem", "os"} {
		b.Run("fs="+fs, func(b *testing.B) {
			br, p := consBenchBroker(b, fs)
			c, err := NewConsumer(br, ConsumerConfig{Topics: []string{"t"}, MinBytes: 1, MaxWait: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			got := make(chan time.Time, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					recs, err := c.Poll(ctx)
					if err != nil {
						return // cancelled: the benchmark is over
					}
					now := time.Now()
					for range recs {
						got <- now
					}
				}
			}()
			defer func() { cancel(); <-done }()
			enc := consBenchBatch(1, 100)
			tp := TopicPartition{Topic: "t", Partition: 0}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.SetBytes(100)
			b.ResetTimer()
			for range b.N {
				for br.fetches.Pending() == 0 { // wait until the Poll is parked
					select {
					case <-done:
						b.Fatal("the consumer stopped")
					default:
						runtime.Gosched()
					}
				}
				start := time.Now()
				if _, err := br.Produce(ctx, tp, enc, AcksLeader); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-got).Sub(start))
			}
			b.StopTimer()
			if p.EndOffset() != int64(b.N) {
				b.Fatalf("end offset %d after %d records", p.EndOffset(), b.N)
			}
			slices.Sort(lat)
			us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
			b.ReportMetric(us(lat[len(lat)/2]), "p50-us")
			b.ReportMetric(us(lat[len(lat)*99/100]), "p99-us")
			b.ReportMetric(us(lat[len(lat)-1]), "max-us")
		})
	}
}

// BenchmarkConsumerDecode is the consumer's own share of a Poll: decoding a
// fetched 1 MiB of batches of 1000 records (10-byte keys, 100-byte values)
// into a new slice of Records, CRCs checked. One op is one record.
func BenchmarkConsumerDecode(b *testing.B) {
	enc := consBenchBatch(1000, 100)
	var raw []byte
	for i := int64(0); len(raw)+len(enc) <= 1<<20; i++ {
		off := len(raw)
		raw = append(raw, enc...)
		batch.SetBaseOffset(raw[off:], i*1000)
	}
	tp := TopicPartition{Topic: "t"}
	b.SetBytes(100)
	b.ReportAllocs()
	cpu0, n := consCPUTime(), 0
	for n < b.N {
		recs := make([]Record, 0, countRecords(raw))
		var hdrs []Header
		recs, _, err := decodeFrom(recs, &hdrs, raw, tp, 0)
		if err != nil {
			b.Fatal(err)
		}
		n += len(recs)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(n)/(consCPUTime()-cpu0).Seconds(), "records/cpu-s")
}
