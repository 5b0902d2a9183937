package log_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/strata-log/strata/log"
)

// A consumer loop in a group: Poll, process, Commit. A consumer that starts
// again in the same group resumes after the last commit.
func ExampleConsumer_Poll() {
	dir, _ := os.MkdirTemp("", "strata-example")
	defer os.RemoveAll(dir)
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	t, _ := b.CreateTopic("orders", log.TopicConfig{Partitions: 1})
	p, _ := t.Partition(0)
	for _, v := range []string{"created", "paid", "shipped"} {
		p.Append(log.Record{Key: []byte("order-17"), Value: []byte(v)})
	}

	ctx := context.Background()
	consume := func(want int) {
		c, err := log.NewConsumer(b, log.ConsumerConfig{Group: "billing", Topics: []string{"orders"}, MaxWait: 100 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		defer c.Close() // leaves the group; commits nothing
		for seen := 0; seen < want; {
			recs, err := c.Poll(ctx)
			if err != nil {
				panic(err)
			}
			for _, r := range recs {
				fmt.Printf("%s-%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
				seen++
			}
			if err := c.Commit(ctx); err != nil {
				panic(err) // a rebalance refused it: the records come again
			}
		}
	}
	consume(3)
	p.Append(log.Record{Key: []byte("order-17"), Value: []byte("delivered")})
	consume(1) // resumes after the commit
	// Output:
	// orders-0@0 created
	// orders-0@1 paid
	// orders-0@2 shipped
	// orders-0@3 delivered
}
