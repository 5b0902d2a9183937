package log_test

import (
	"context"
	"fmt"
	"os"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

// A share group as a queue: the members take records from the same
// partition, each acknowledged one by one.
func ExampleShareConsumer() {
	dir, _ := os.MkdirTemp("", "strata-example")
	defer os.RemoveAll(dir)
	b, _ := log.Open(dir, log.Config{})
	defer b.Close()
	t, _ := b.CreateTopic("jobs", log.TopicConfig{Partitions: 1})
	p, _ := t.Partition(0)
	p.Append(log.Record{Value: []byte("resize a.png")}, log.Record{Value: []byte("resize b.png")})
	// Start from the first record (Kafka's default is the log's end).
	b.ShareCoordinator().SetGroupConfig("workers", share.GroupConfig{AutoOffsetReset: "earliest"})

	ctx := context.Background()
	c, err := log.NewShareConsumer(b, log.ShareConsumerConfig{Group: "workers", Topics: []string{"jobs"}, ExplicitAck: true})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	var done int
	for done < 2 {
		recs, err := c.Poll(ctx)
		if err != nil {
			panic(err)
		}
		for _, r := range recs {
			if r.DeliveryCount == 1 && r.Offset == 1 {
				fmt.Printf("%s: not now\n", r.Value)
				r.Release() // delivered again, to any member
				continue
			}
			fmt.Printf("%s (delivery %d): done\n", r.Value, r.DeliveryCount)
			r.Accept()
			done++
		}
	}
	// Output:
	// resize a.png (delivery 1): done
	// resize b.png: not now
	// resize b.png (delivery 2): done
}
