package log

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/vfs"
)

// BenchmarkShareConsumers: 4 ShareConsumers of one group accept every
// 100 B record of a 4-partition topic, as the bench module's share case
// in the process (issue 29's target: 1 M records/s), the acknowledgements
// written to __share_group_state on disk (os: in the page cache, as the
// topic fsyncs none of its records, shareStateConfig) or on the
// in-memory file system (mem). It reports records/s, and the Polls that returned records and
// those that returned none.
//
//	go test -run '^$' -bench ShareConsumers -benchtime 400000x ./log/
func BenchmarkShareConsumers(b *testing.B) {
	for _, fs := range []string{"os", "mem"} {
		b.Run("fs="+fs, func(b *testing.B) {
			const consumers = 4
			cfg, dir := Config{}, b.TempDir()
			if fs == "mem" {
				cfg.FS, dir = vfs.NewMem(), "/data"
			}
			br, err := Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			t, err := br.CreateTopic("t", TopicConfig{Partitions: consumers})
			if err != nil {
				b.Fatal(err)
			}
			n := (b.N + consumers - 1) / consumers * consumers
			value := make([]byte, 100)
			var bd batch.Builder
			for p := range consumers {
				part, err := t.Partition(p)
				if err != nil {
					b.Fatal(err)
				}
				for left := n / consumers; left > 0; {
					k := min(left, 1000)
					now := time.Now().UnixMilli()
					bd.Reset(now)
					for range k {
						bd.Append(now, nil, value, nil)
					}
					if _, _, err := part.AppendBatch(bd.Bytes()); err != nil {
						b.Fatal(err)
					}
					left -= k
				}
			}
			if err := br.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var got, polls, empty atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range consumers {
				c, err := NewShareConsumer(br, ShareConsumerConfig{Group: "g", Topics: []string{"t"}, MaxRecords: 2000, MaxWait: 10 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					defer c.Close(ctx)
					for got.Load() < int64(n) {
						recs, err := c.Poll(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						polls.Add(1)
						if len(recs) == 0 {
							empty.Add(1)
						}
						for _, r := range recs {
							if err := r.Accept(); err != nil {
								b.Error(err)
								return
							}
						}
						got.Add(int64(len(recs)))
					}
				})
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(got.Load())/el.Seconds(), "records/s")
			b.ReportMetric(float64(polls.Load()), "polls")
			b.ReportMetric(float64(empty.Load()), "empty-polls")
		})
	}
}
