package interop

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestReadCommittedInterleaved: two kgo transactional producers and a plain
// one interleave on one partition: A's transaction stays open while B
// aborts one, a plain record is written, and B commits another. Meanwhile
// a READ_COMMITTED reader reads nothing past A's first offset (the LSO);
// once A aborts and then commits a second transaction, kgo and sarama
// read_committed consumers and Strata's Consumer over kafka.Dial read
// exactly the committed and plain records, in offset order, and never an
// aborted one; a read_uncommitted one reads them all.
func TestReadCommittedInterleaved(t *testing.T) {
	const topic = "rc"
	c := kafkatest.New(t, kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 2*time.Minute)
	newTxn := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID(id),
			kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a, b := newTxn("rc-a"), newTxn("rc-b")
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	produce := func(cl *kgo.Client, vals ...string) {
		t.Helper()
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
	}
	begin := func(cl *kgo.Client) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		t.Helper()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}

	begin(a)
	produce(a, "a1", "a2") // open until later
	begin(b)
	produce(b, "b1", "b2")
	end(b, false)
	produce(plain, "p1")
	begin(b)
	produce(b, "b3", "b4")
	end(b, true)

	p, err := c.Broker().Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	// b's markers are written once EndTxn is answered: wait for the HW to
	// pass them with a long poll on the log end.
	for p.HighWatermark() < 9 {
		resp, err := c.Broker().Fetch(ctx, log.FetchRequest{MaxWait: 5 * time.Second,
			Partitions: []log.FetchPartition{{TopicPartition: log.TopicPartition{Topic: topic}, Offset: p.HighWatermark()}}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Release()
	}
	if lso := p.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d with a's transaction open from 0", lso)
	}

	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	sc, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{topic}, Isolation: log.ReadCommitted, MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	recs, err := sc.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Fatalf("read_committed read %d records past the LSO 0: first %q", len(recs), recs[0].Value)
	}

	end(a, false)
	begin(a)
	produce(a, "a3", "a4")
	end(a, true)
	awaitStable(t, c.Broker(), topic, 0)

	want := []string{"p1", "b3", "b4", "a3", "a4"}
	var got []string
	for len(got) < len(want) {
		recs, err := sc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Strata's Consumer over kafka.Dial, read_committed: %q, want %q", got, want)
	}

	kgot := consumeIsolated(ctx, t, c.Addr(), topic, len(want), kgo.ReadCommitted())
	if len(kgot) != len(want) {
		t.Errorf("kgo read_committed read %v, want %q", kgot, want)
	}
	for _, v := range want {
		if !kgot[v] {
			t.Errorf("kgo read_committed missed %q (read %v)", v, kgot)
		}
	}
	if all := consumeIsolated(ctx, t, c.Addr(), topic, 9, kgo.ReadUncommitted()); len(all) != 9 {
		t.Errorf("kgo read_uncommitted read %v, want the 9 records", all)
	}

	if got := saramaReadCommitted(ctx, t, c.Addr(), topic, len(want)); !slices.Equal(got, want) {
		t.Errorf("sarama read_committed: %q, want %q", got, want)
	}
}

// saramaReadCommitted reads partition 0 of topic from the start with
// sarama at isolation level read_committed until it has n values,
// returning them in order (an aborted record, before the committed ones,
// would be among them).
func saramaReadCommitted(ctx context.Context, t *testing.T, seed, topic string, n int) []string {
	t.Helper()
	cfg := saramaConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cons, err := sarama.NewConsumer([]string{seed}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	for len(got) < n {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("sarama read %q, then nothing: %v", got, ctx.Err())
		}
	}
	return got
}
