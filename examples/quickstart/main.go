// Command quickstart is Strata in a few lines: it opens a data directory,
// creates a topic, produces records, consumes them as a member of a consumer
// group and commits its position. Run it twice: the second run's consumer
// resumes after the first run's commit and sees only the new records.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/strata-log/strata/log"
)

func main() {
	dir := flag.String("dir", "./strata-data", "data directory")
	flag.Parse()
	if err := run(context.Background(), *dir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	// A standalone broker: one process, one data directory, durable.
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Printf("opened %s (topics: %v)\n", dir, b.Topics())

	if _, err := b.CreateTopic("greetings", log.TopicConfig{Partitions: 3}); errors.Is(err, log.ErrTopicExists) {
		n, _ := b.Partitions(context.Background(), "greetings")
		fmt.Printf("topic \"greetings\" exists: %d partitions\n", n)
	} else if err != nil {
		return err
	} else {
		fmt.Println("created topic \"greetings\": 3 partitions")
	}

	// Produce: a key always lands on the same partition (Kafka's murmur2).
	prod, err := log.NewProducer(b, log.ProducerConfig{})
	if err != nil {
		return err
	}
	names := []string{"alice", "bob", "carol", "dave", "erin"}
	for _, name := range names {
		r, err := prod.Send(ctx, log.Record{Topic: "greetings", Key: []byte(name), Value: []byte("hello, " + name)})
		if err != nil {
			return err
		}
		fmt.Printf("produced %-6s -> partition %d, offset %d\n", name, r.Partition, r.Offset)
	}
	if err := prod.Close(); err != nil {
		return err
	}

	// Consume as a member of group "quickstart": it starts after the
	// group's last commit (or at the earliest record the first time).
	cons, err := log.NewConsumer(b, log.ConsumerConfig{
		Group:   "quickstart",
		Topics:  []string{"greetings"},
		Reset:   log.ResetEarliest,
		MaxWait: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seen := 0
	for {
		recs, err := cons.Poll(ctx)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break // caught up
		}
		for _, r := range recs {
			fmt.Printf("consumed partition %d offset %d: %s\n", r.Partition, r.Offset, r.Value)
		}
		seen += len(recs)
	}
	if err := cons.Commit(ctx); err != nil {
		return err
	}
	fmt.Printf("consumed %d records and committed; run again to see the group resume after them\n", seen)
	return nil
}
