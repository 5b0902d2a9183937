package log_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/readme"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// The code between the readme markers is the README's, verbatim (one tab
// of indentation less): TestReadme checks that README.md shows it.

// readmeEmbed is the README's "Embed it".
func readmeEmbed(ctx context.Context, dir string, conn net.Conn) error {
	//readme:begin Embed it
	b, err := log.Open(dir, log.Config{}) // a standalone broker on one data dir
	if err != nil {
		return err
	}
	defer b.Close()
	_, err = b.CreateTopic("orders", log.TopicConfig{Partitions: 3, FlushMessages: 1})
	if err != nil && !errors.Is(err, log.ErrTopicExists) { // made by an earlier run
		return err
	}

	// Producers batch per partition (Linger 5 ms, BatchBytes 1 MB) and place keyed
	// records exactly where Kafka's Java client would (murmur2).
	prod, err := log.NewProducer(b, log.ProducerConfig{})
	if err != nil {
		return err
	}
	if _, err := prod.Send(ctx, log.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte("paid")}); err != nil {
		return err
	}
	prod.SendAsync(log.Record{Topic: "orders", Value: []byte("shipped")}, func(r log.Record, err error) {
		// called once per record, in offset order, when it is written or failed
	})
	if err := prod.Close(); err != nil { // sends what is buffered first
		return err
	}

	// Consumers: with a Group, partitions are shared among members (range
	// assignment), rebalanced when members come and go, positions committed durably.
	cons, err := log.NewConsumer(b, log.ConsumerConfig{Group: "billing", Topics: []string{"orders"}})
	if err != nil {
		return err
	}
	defer cons.Close()
	recs, err := cons.Poll(ctx) // long poll: an append wakes it at once
	if err != nil {
		return err
	}
	_ = recs // ... handle them ...
	if err := cons.Commit(ctx); err != nil {
		return err
	}

	// Or the partitions directly: an event store.
	p, err := b.Partition("orders", 0)
	if err != nil {
		return err
	}
	off, err := p.Append(log.Record{Key: []byte("k"), Value: []byte("v")})
	if err != nil {
		return err
	}
	recs, err = p.Read(off, 1<<20) // at least one record if any exists at off
	if err != nil || len(recs) == 0 {
		return fmt.Errorf("read at %d: %d records, %v", off, len(recs), err)
	}
	hourAgo, err := p.OffsetForTime(time.Now().Add(-time.Hour)) // the first record of the last hour
	if err != nil {
		return err
	}
	_, _, err = p.SendTo(conn, hourAgo, 1<<20) // sendfile(2) straight from the segment file
	return err
	//readme:end
}

// TestReadmeEmbed runs the snippet twice on one data dir, as a user who
// runs their program again does.
func TestReadmeEmbed(t *testing.T) {
	dir := t.TempDir()
	for run := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan int64, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- -1
				return
			}
			defer c.Close()
			n, _ := io.Copy(io.Discard, c)
			got <- n
		}()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := readmeEmbed(ctx, dir, conn); err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		conn.Close()
		if n := <-got; n <= 0 {
			t.Fatalf("run %d: SendTo sent %d bytes", run+1, n)
		}
	}
}

// TestReadmeFixtures is the README's "Test with it": Strata's own fixture
// and the Kafka-protocol one.
func TestReadmeFixtures(t *testing.T) {
	//readme:begin Test with it
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("orders", 3)) // in memory, closed when the test ends
	p, err := b.Partition("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(log.Record{Key: []byte("order-17"), Value: []byte("paid")}); err != nil {
		t.Fatal(err)
	}

	k := kafkatest.New(t, kafkatest.Topic("orders", 3)) // the same behind a Kafka listener on 127.0.0.1
	seed := k.Addr()                                    // kgo.SeedBrokers(seed), sarama.NewClient([]string{seed}, cfg), ...
	//readme:end
	if seed == "" {
		t.Fatal("no address")
	}
}

func TestReadme(t *testing.T) {
	n, errs := readme.Check("../README.md", "readme_test.go")
	if n != 2 {
		t.Fatalf("%d snippets in readme_test.go, want 2", n)
	}
	for _, err := range errs {
		t.Error(err)
	}
}
