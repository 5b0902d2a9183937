package kafka_test

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// A Strata broker served over the Kafka protocol, and Strata's own
// producer talking to it through a Kafka-protocol Client, as it would to
// any Kafka cluster.
func Example() {
	b, err := log.Open("/data", log.Config{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic("orders", log.TopicConfig{Partitions: 1}); err != nil {
		panic(err)
	}
	srv, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{srv.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	p, err := log.NewProducer(c, log.ProducerConfig{})
	if err != nil {
		panic(err)
	}
	r, err := p.Send(ctx, log.Record{Topic: "orders", Value: []byte("hello")})
	if err != nil {
		panic(err)
	}
	p.Close()
	fmt.Println(r.Topic, r.Partition, r.Offset)
	// Output: orders 0 0
}
