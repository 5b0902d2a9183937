package log_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// A topic's partitions grow, its configuration changes while it is in use,
// and its oldest records are deleted: what Kafka's CreatePartitions,
// IncrementalAlterConfigs and DeleteRecords do.
func ExampleBroker_AlterTopicConfig() {
	b, err := log.Open("/data", log.Config{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic("orders", log.TopicConfig{Partitions: 1, RetentionTime: time.Hour}); err != nil {
		panic(err)
	}

	// Two partitions more: the total is 3.
	if err := b.CreatePartitions(ctx, "orders", 3); err != nil {
		panic(err)
	}
	n, _ := b.Partitions(context.Background(), "orders")
	fmt.Println("partitions:", n)

	// Keep records forever, and refuse batches over 1 KiB: what is set on
	// the topic replaces what was (retention.ms is set, the rest defaults).
	if err := b.AlterTopicConfig("orders", log.TopicConfig{RetentionTime: -1, MaxMessageBytes: 1024}); err != nil {
		panic(err)
	}
	p, _ := b.Partition("orders", 0)
	_, err = p.Append(log.Record{Value: make([]byte, 2048)})
	fmt.Println("too large:", errors.Is(err, log.ErrRecordTooLarge))

	for i := 0; i < 5; i++ {
		p.Append(log.Record{Value: []byte(fmt.Sprint(i))})
	}
	low, _ := b.DeleteRecords(ctx, log.TopicPartition{Topic: "orders"}, 3)
	recs, _ := p.Read(low, 1<<20)
	fmt.Println("start:", low, "first:", string(recs[0].Value))
	// Output:
	// partitions: 3
	// too large: true
	// start: 3 first: 3
}
