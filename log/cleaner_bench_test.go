package log

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/stretchr/testify/require"
)

// BenchmarkCleaner compacts a dirty log of 128 MiB on the operating
// system's file system: batches of 100 records, keys drawn from 10 000 (so
// nearly every record is superseded), or from a million with an offset map
// too small for them (several passes, each copying the log up to where the
// map filled). It reports MB/s of dirty log cleaned
// per second (b.SetBytes), the offset map's size, and the peak of the heap
// during the pass above what it was before (sampled every millisecond).
//
// The compressed cases write batches of 100 JSON-like records (which
// compress about 3:1) with one codec: MB/s is of the log as stored, the
// compressed bytes; raw-MB/s is of the records uncompressed.
func BenchmarkCleaner(b *testing.B) {
	type benchCase struct {
		size, keys int
		bufBytes   int64
		codec      int
	}
	cases := []benchCase{{100, 10000, 16 << 20, 0}, {1000, 10000, 16 << 20, 0}, {100, 1 << 20, 4 << 20, 0}}
	for _, codec := range cleanerCodecs[1:] {
		cases = append(cases, benchCase{100, 10000, 16 << 20, codec}, benchCase{100, 1 << 20, 4 << 20, codec})
	}
	for _, bc := range cases {
		size, keys, bufBytes, codec := bc.size, bc.keys, bc.bufBytes, bc.codec
		name := fmt.Sprintf("value=%dB/keys=%d/buffer=%dMiB", size, keys, bufBytes>>20)
		if codec != batch.CompressionNone {
			name = fmt.Sprintf("codec=%s/%s", batchCodecName(codec), name)
		}
		b.Run(name, func(b *testing.B) {
			logBytes := int64(128 << 20)
			if codec != batch.CompressionNone {
				logBytes = 64 << 20 // several times that in records
			}
			b.ReportAllocs()
			var peak, mapBytes int64
			var dirty, rawBytes int64
			for range b.N {
				b.StopTimer()
				br, err := Open(b.TempDir(), Config{RetentionCheckInterval: time.Hour, CleanerBufferBytes: bufBytes})
				require.NoError(b, err)
				tp, err := br.CreateTopic("c", TopicConfig{Cleanup: CleanupCompact, SegmentBytes: 64 << 20})
				require.NoError(b, err)
				p, _ := tp.Partition(0)
				var bd batch.Builder
				bd.SetCompression(codec)
				value := make([]byte, size)
				n := 0
				rawBytes = 0
				for p.Size() < logBytes {
					bd.Reset(t0.UnixMilli())
					for range 100 {
						if codec != batch.CompressionNone {
							value = jsonValue(value[:0], n, size)
						}
						bd.Append(t0.UnixMilli(), fmt.Appendf(nil, "key-%07d", n%keys), value, nil)
						n++
					}
					rawBytes += int64(bd.Size())
					_, _, err := p.AppendBatch(bd.Bytes())
					require.NoError(b, err)
				}
				require.NoError(b, p.Roll())
				require.NoError(b, p.Flush())
				dirty = p.Size()
				runtime.GC()
				base := heapBytes()
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var max int64
				wg.Add(1)
				go func() {
					defer wg.Done()
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							max = maxInt(max, heapBytes()-base)
						}
					}
				}()
				b.StartTimer()
				start := time.Now()
				passes, err := br.cleaner.run(t0)
				b.StopTimer()
				b.ReportMetric(float64(rawBytes)/1e6/time.Since(start).Seconds(), "raw-MB/s")
				close(stop)
				wg.Wait()
				require.NoError(b, err)
				require.GreaterOrEqual(b, passes, 1)
				if int64(keys*(size+100)) < logBytes/4 {
					require.Less(b, p.Size(), int64(keys*(size+100)), "one record per key left")
				}
				peak = maxInt(peak, max)
				b.ReportMetric(float64(passes), "passes")
				mapBytes = br.cleaner.maxMapBytes
				require.NoError(b, br.Close())
			}
			b.SetBytes(dirty)
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(mapBytes)/(1<<20), "map-MiB")
			b.ReportMetric(float64(bufBytes)/(1<<20), "buffer-MiB")
		})
	}
}

// jsonValue appends to dst a JSON-like value of about size bytes for record
// n: field names repeat, numbers and an id vary, as in an event log.
func jsonValue(dst []byte, n, size int) []byte {
	x := uint64(n)*0x9E3779B97F4A7C15 + 1
	dst = fmt.Appendf(dst, `{"id":%d,"user":"u%05d","kind":"%s","amount":%d.%02d,"ref":"%016x"`,
		n, x%50000, [...]string{"order", "refund", "view", "click"}[x>>60&3], x>>20%10000, x>>40%100, x)
	for len(dst) < size-1 {
		dst = fmt.Appendf(dst, `,"f%d":%d`, len(dst)%7, (x>>(len(dst)%50))%1000)
	}
	return append(dst, '}')
}

func maxInt(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapBytes() int64 {
	metrics.Read(heapSample)
	return int64(heapSample[0].Value.Uint64())
}
