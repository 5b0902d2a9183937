package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestKgoTransactionalProducer: kgo's transactional producer against a
// Strata server: transactions committed and aborted in turn over three
// partitions; a read_committed consumer reads exactly the committed
// records, a read_uncommitted one every record, and every partition's last
// stable offset is its end (no transaction left open). A second producer
// of the same transactional id fences the first. With the server's
// default transaction.version 2 kgo takes a new epoch from every EndTxn;
// with 0 it keeps its epoch and adds partitions itself.
func TestKgoTransactionalProducer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tv         int16 // kafka.Config.TransactionVersion
		finalEpoch int16 // the producer's epoch after its 6 transactions
	}{{"TV2 by default", 0, 6}, {"TV0", -1, 0}} {
		t.Run(tc.name, func(t *testing.T) { testKgoTransactionalProducer(t, tc.tv, tc.finalEpoch) })
	}
}

func testKgoTransactionalProducer(t *testing.T, tv, finalEpoch int16) {
	const topic = "txn"
	c := kafkatest.New(t, kafkatest.Topic(topic, 3), kafkatest.WithServerConfig(kafka.Config{TransactionVersion: tv}))
	ctx := testCtx(t, 2*time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID("etl"),
		kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	committed := map[string]bool{}
	total := 0
	for txn := range 6 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin %d: %v", txn, err)
		}
		for i := range 20 {
			v := fmt.Sprintf("t%d-%d", txn, i)
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(v)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce in transaction %d: %v", txn, err)
			}
			if txn%2 == 0 {
				committed[v] = true
			}
			total++
		}
		end := kgo.TransactionEndTry(txn%2 == 0)
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatalf("end transaction %d (commit %v): %v", txn, end, err)
		}
	}

	// The markers are written once EndTxn is answered: await them.
	for i := range 3 {
		awaitStable(t, c.Broker(), topic, i)
	}
	coord, err := c.Broker().TxnCoordinator(ctx, "etl")
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := coord.Describe("etl"); m.ProducerEpoch != finalEpoch {
		t.Errorf("producer epoch %d after 6 transactions, want %d", m.ProducerEpoch, finalEpoch)
	}

	got := consumeIsolated(ctx, t, c.Addr(), topic, len(committed), kgo.ReadCommitted())
	for v := range got {
		if !committed[v] {
			t.Errorf("read_committed read %q of an aborted transaction", v)
		}
	}
	if len(got) != len(committed) {
		t.Errorf("read_committed read %d records, %d were committed", len(got), len(committed))
	}
	if all := consumeIsolated(ctx, t, c.Addr(), topic, total, kgo.ReadUncommitted()); len(all) != total {
		t.Errorf("read_uncommitted read %d records, %d were produced", len(all), total)
	}

	// A second producer of "etl" fences the first.
	zombie, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID("etl"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("new producer commit: %v", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("old")}).FirstErr()
	if err == nil {
		err = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
}

// awaitStable waits until the partition's last stable offset is its
// end, with the broker's long poll (a marker wakes it).
func awaitStable(t *testing.T, b *log.Broker, topic string, partition int) {
	t.Helper()
	p, err := b.Partition(topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for p.LastStableOffset() < p.EndOffset() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: LSO %d stays below the end %d", p, p.LastStableOffset(), p.EndOffset())
		}
		_, err := b.Fetch(context.Background(), log.FetchRequest{MaxWait: 5 * time.Second, Isolation: log.FetchTxnCommitted,
			Partitions: []log.FetchPartition{{TopicPartition: log.TopicPartition{Topic: topic, Partition: partition}, Offset: p.LastStableOffset()}}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// consumeIsolated reads topic from the start with isolation level iso
// until it has n values (or, read_committed, until the end), returning
// the values.
func consumeIsolated(ctx context.Context, t *testing.T, seed, topic string, n int, iso kgo.IsolationLevel) map[string]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]bool{}
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume after %d records of %d: %v", len(got), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	return got
}
