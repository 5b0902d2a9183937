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
func BenchmarkCleaner(b *testing.B) {
	for _, bc := range []struct {
		size, keys int
		bufBytes   int64
	}{{100, 10000, 16 << 20}, {1000, 10000, 16 << 20}, {100, 1 << 20, 4 << 20}} {
		size, keys, bufBytes := bc.size, bc.keys, bc.bufBytes
		b.Run(fmt.Sprintf("value=%dB/keys=%d/buffer=%dMiB", size, keys, bufBytes>>20), func(b *testing.B) {
			const logBytes = 128 << 20
			b.ReportAllocs()
			var peak, mapBytes int64
			var dirty int64
			for range b.N {
				b.StopTimer()
				br, err := Open(b.TempDir(), Config{RetentionCheckInterval: time.Hour, CleanerBufferBytes: bufBytes})
				require.NoError(b, err)
				tp, err := br.CreateTopic("c", TopicConfig{Cleanup: CleanupCompact, SegmentBytes: 64 << 20})
				require.NoError(b, err)
				p, _ := tp.Partition(0)
				var bd batch.Builder
				value := make([]byte, size)
				n := 0
				for p.Size() < logBytes {
					bd.Reset(t0.UnixMilli())
					for range 100 {
						bd.Append(t0.UnixMilli(), fmt.Appendf(nil, "key-%07d", n%keys), value, nil)
						n++
					}
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
				passes, err := br.cleaner.run(t0)
				b.StopTimer()
				close(stop)
				wg.Wait()
				require.NoError(b, err)
				require.GreaterOrEqual(b, passes, 1)
				if keys*(size+100) < logBytes/4 {
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
