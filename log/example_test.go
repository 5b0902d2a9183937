package log_test

import (
	"context"
	"fmt"
	"os"

	"github.com/strata-log/strata/log"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "strata-example")
	defer os.RemoveAll(dir)

	b, err := log.Open(dir, log.Config{})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	t, err := b.CreateTopic("greetings", log.TopicConfig{Partitions: 1})
	if err != nil {
		panic(err)
	}
	p, _ := t.Partition(0)
	off, _ := p.Append(log.Record{Key: []byte("alice"), Value: []byte("hello")})
	recs, _ := p.Read(off, 1<<20)
	fmt.Printf("%d: %s=%s\n", recs[0].Offset, recs[0].Key, recs[0].Value)
	// Output: 0: alice=hello
}

func ExampleProducer_Send() {
	dir, _ := os.MkdirTemp("", "strata-example")
	defer os.RemoveAll(dir)
	b, _ := log.Open(dir, log.Config{})
	defer b.Close()
	b.CreateTopic("orders", log.TopicConfig{Partitions: 3})

	prod, err := log.NewProducer(b, log.ProducerConfig{})
	if err != nil {
		panic(err)
	}
	defer prod.Close()
	// Records with the same key land on the same partition (Kafka's
	// murmur2 partitioner), in order.
	for _, v := range []string{"created", "paid", "shipped"} {
		r, err := prod.Send(context.Background(), log.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte(v)})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s -> partition %d offset %d\n", v, r.Partition, r.Offset)
	}
	// Output:
	// created -> partition 0 offset 0
	// paid -> partition 0 offset 1
	// shipped -> partition 0 offset 2
}
