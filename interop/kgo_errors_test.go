package interop

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestKgoLongPoll: a kgo consumer's fetch, parked on an empty partition
// with a 10 s FetchMaxWait, is answered as soon as a record is appended.
func TestKgoLongPoll(t *testing.T) {
	const topic = "poll"
	c := kafkatest.New(t, kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 15*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A first poll that finds nothing: by its end kgo has its fetch parked.
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if fs := cl.PollFetches(pctx); len(fs.Records()) != 0 {
		t.Fatalf("records in an empty topic: %v", fs.Records())
	}
	cancel()
	p, err := c.Broker().Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := p.Append(log.Record{Key: []byte("k"), Value: []byte("woken")}); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if rs := fs.Records(); len(rs) != 1 || string(rs[0].Value) != "woken" {
		t.Fatalf("polled %v", rs)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the parked fetch was answered %v after the append, not at once", d)
	}
}

// TestKgoErrors: Kafka's error codes where kgo expects them.
func TestKgoErrors(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 2), kafkatest.TopicWithConfig("small", log.TopicConfig{Partitions: 1, MaxMessageBytes: 1024}))
	ctx := testCtx(t, 15*time.Second)

	t.Run("unknown topic", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.UnknownTopicRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr()
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("produce to an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
		}
	})

	t.Run("message too large", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		big := bytes.Repeat([]byte("x"), 4096)
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: big}).FirstErr()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("produce of 4 KiB to a topic of max.message.bytes 1024: %v, want MESSAGE_TOO_LARGE", err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: big[:100]}).FirstErr(); err != nil {
			t.Fatalf("a small record after: %v", err)
		}
	})

	t.Run("offset out of range", func(t *testing.T) {
		want := makeRecs("oor", 10)
		kgoProduce(ctx, t, c.Addr(), "t", want, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		// Past the end: kgo gets OFFSET_OUT_OF_RANGE and resets to the start.
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().At(1000)}}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var got []*kgo.Record
		for len(got) < len(want) {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			got = append(got, fs.Records()...)
		}
		for i, r := range got {
			if r.Offset != int64(i) || !bytes.Equal(r.Value, want[i].value) {
				t.Fatalf("after the reset: record %d at offset %d value %q", i, r.Offset, r.Value)
			}
		}
	})
}

// TestKgoTransactions: a kgo transactional producer. Without the
// transaction APIs (AddPartitionsToTxn and EndTxn) it fails at once, with an
// error, rather than hang; with them, a committed transaction is stored.
func TestKgoTransactions(t *testing.T) {
	const topic = "tx"
	c := kafkatest.New(t, kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 10*time.Second)
	served := serves(ctx, t, c.Addr(), 24) && serves(ctx, t, c.Addr(), 26)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID("tx-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	err = cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("in a transaction")}).FirstErr()
	}
	if err == nil {
		err = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	switch {
	case ctx.Err() != nil:
		t.Fatalf("transaction hung: %v", err)
	case served && err != nil:
		t.Fatalf("transactions are served and fail: %v", err)
	case served:
		p, _ := c.Broker().Partition(topic, 0)
		if rs, err := p.Read(0, 1<<20); err != nil || len(rs) != 1 {
			t.Fatalf("committed transaction: %v, %v", rs, err)
		}
	case err == nil:
		t.Fatal("a transaction committed without the transaction APIs")
	case time.Since(start) > 2*time.Second:
		t.Fatalf("the transaction took %v to fail", time.Since(start))
	default:
		t.Logf("transactions not served: %v", err)
	}
}
