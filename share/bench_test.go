package share

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// BenchmarkAcquireAcknowledge: members acquire batches of 500 records of
// one partition each and accept them, the state written to an in-memory
// log: the coordinator's cost per record, without the log's fsync.
func BenchmarkAcquireAcknowledge(b *testing.B) {
	for _, members := range []int{1, 4} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			f := newFixture(b, Config{GroupConfigs: map[string]GroupConfig{"g": {AutoOffsetReset: "earliest"}}})
			f.produce(0, 1<<62)
			f.produce(1, 1<<62)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/members + 1
			for m := range members {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("m%d", m)
					t := TopicPartition{Topic: "t", Partition: m % 2}
					for done := 0; done < per; {
						rs, err := f.c.Acquire(ctx, "g", id, t, 500)
						if err != nil {
							panic(err)
						}
						for _, r := range rs {
							if err := f.c.Acknowledge(ctx, "g", id, t, []AckBatch{{First: r.First, Last: r.Last, Types: []AckType{AckAccept}}}); err != nil {
								panic(err)
							}
							done += int(r.Last - r.First + 1)
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
