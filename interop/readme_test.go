package interop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/readme"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// The code between the readme markers below is the README's, verbatim (one
// tab of indentation less): TestReadmeSnippets checks that README.md,
// where it has the section, shows exactly this code.

// TestReadmeKafkaClient is the README's "Serve it": an
// application's kgo code tested against Strata through the fixture.
func TestReadmeKafkaClient(t *testing.T) {
	//readme:begin Serve it
	c := kafkatest.New(t, kafkatest.Topic("orders", 3)) // Strata on 127.0.0.1, closed when the test ends
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte("paid")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	if got := fetches.Records(); len(got) != 1 || string(got[0].Value) != "paid" {
		t.Fatalf("consumed %v", got)
	}

	// The record is in Strata's log, in the partition Kafka's partitioner gives its key.
	p, _ := c.Broker().Partition("orders", log.KeyPartition([]byte("order-17"), 3))
	if recs, err := p.Read(0, 1<<20); err != nil || len(recs) != 1 || string(recs[0].Value) != "paid" {
		t.Fatalf("stored %v, %v", recs, err)
	}
	//readme:end
}

// readmeMoveToKafka is the README's "Move to a Kafka cluster": Strata's own
// Producer and Consumer, unchanged, over a Kafka-protocol Client.
func readmeMoveToKafka(ctx context.Context, seeds []string) ([]log.Record, error) {
	//readme:begin Move to a Kafka cluster
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds}) // Apache Kafka, Redpanda, a Strata server
	if err != nil {
		return nil, err
	}
	defer c.Close()

	// The same Producer and Consumer as over a *log.Broker: c is a log.Client.
	prod, err := log.NewProducer(c, log.ProducerConfig{})
	if err != nil {
		return nil, err
	}
	if _, err := prod.Send(ctx, log.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte("paid")}); err != nil {
		return nil, err
	}
	prod.Close()

	cons, err := log.NewConsumer(c, log.ConsumerConfig{Group: "billing", Topics: []string{"orders"}})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	recs, err := cons.Poll(ctx) // joins the group: Kafka's classic protocol, range assignment
	if err != nil {
		return nil, err
	}
	return recs, cons.Commit(ctx) // the group's committed offsets, as Kafka keeps them
	//readme:end
}

func TestReadmeMoveToKafka(t *testing.T) {
	check := func(t *testing.T, seeds []string) {
		ctx := testCtx(t, 10*time.Second)
		recs, err := readmeMoveToKafka(ctx, seeds)
		if err != nil {
			t.Fatal(err)
		}
		part := log.KeyPartition([]byte("order-17"), 3)
		if len(recs) != 1 || string(recs[0].Key) != "order-17" || string(recs[0].Value) != "paid" || recs[0].Partition != part {
			t.Fatalf("consumed %+v", recs)
		}
		os, err := newKadm(t, seeds[0]).FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := os.Lookup("orders", int32(part)); !ok || o.At != 1 {
			t.Fatalf("committed %+v", os)
		}
	}
	t.Run("kfake", func(t *testing.T) {
		kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "orders"))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		check(t, kc.ListenAddrs())
	})
	t.Run("strata", func(t *testing.T) {
		check(t, []string{kafkatest.New(t, kafkatest.Topic("orders", 3)).Addr()})
	})
}

// TestReadmeSnippets: the README's sections named like the snippets of
// this file show them, verbatim.
func TestReadmeSnippets(t *testing.T) {
	n, errs := readme.Check("../README.md", "readme_test.go")
	if n != 2 {
		t.Fatalf("%d snippets in readme_test.go, want 2", n)
	}
	for _, err := range errs {
		t.Error(err)
	}
}
