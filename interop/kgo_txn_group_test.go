package interop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// TestKgoGroupTransactSession: kgo's GroupTransactSession (consume,
// transform, produce, with TxnOffsetCommit and RequireStable offset
// fetches, KIP-447) against a Strata server. Two members share the input;
// one aborts a transaction now and then (its offsets dropped, its records
// read again) and the other aborts its last transaction and leaves
// halfway (its partitions go to the first, which goes on from their
// committed offsets: not the aborted ones). A read_committed reader of
// the output then finds every input exactly once.
func TestKgoGroupTransactSession(t *testing.T) {
	const n = 400
	c := kafkatest.New(t, kafkatest.Topic("in", 4), kafkatest.Topic("out", 2))
	ctx := testCtx(t, 3*time.Minute)
	seed, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := seed.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	seed.Close()

	session := func(id string) *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Addr()), kgo.TransactionalID(id),
			kgo.ConsumerGroup("etl"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"), kgo.FetchMaxBytes(256), kgo.FetchMaxPartitionBytes(128),
			kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var processed sync.Map
	var aborted, commits atomic.Int32
	run := func(s *kgo.GroupTransactSession, maxTxns int, abortEvery int) error {
		for txn := 0; maxTxns == 0 || txn < maxTxns; txn++ {
			fs := s.PollFetches(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := fs.Err0(); err != nil {
				return err
			}
			if err := s.Begin(); err != nil {
				return err
			}
			var wg sync.WaitGroup
			var perr error
			var mu sync.Mutex
			fs.EachRecord(func(r *kgo.Record) {
				wg.Add(1)
				s.Produce(ctx, &kgo.Record{Key: r.Key, Value: []byte(strings.ToUpper(string(r.Value)))}, func(_ *kgo.Record, err error) {
					mu.Lock()
					perr = err
					mu.Unlock()
					wg.Done()
				})
			})
			wg.Wait()
			if perr != nil {
				return perr
			}
			commit := abortEvery == 0 || txn%abortEvery != abortEvery-1
			ok, err := s.End(ctx, kgo.TransactionEndTry(commit))
			if err != nil {
				return err
			}
			if ok && commit {
				commits.Add(1)
				fs.EachRecord(func(r *kgo.Record) { processed.Store(string(r.Value), true) })
			}
			if !commit && len(fs.Records()) > 0 {
				aborted.Add(1)
			}
			if maxTxns == 0 && done(&processed, n) {
				return nil
			}
		}
		return nil
	}

	a, b := session("etl-a"), session("etl-b")
	defer a.Close()
	errs := make(chan error, 2)
	go func() { errs <- run(a, 0, 4) }()
	go func() {
		// Its last transaction aborted, it leaves the group: its
		// partitions go to a.
		err := run(b, 15, 15)
		b.Close()
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	if aborted.Load() == 0 {
		t.Fatal("no transaction with records was aborted")
	}
	t.Logf("%d transactions committed, %d with records aborted", commits.Load(), aborted.Load())
	got := countCommitted(ctx, t, c, "out")
	for i := range n {
		if v := fmt.Sprintf("V%d", i); got[v] != 1 {
			t.Errorf("%s written %d times", v, got[v])
		}
	}
	if len(got) != n {
		t.Errorf("%d distinct values, want %d", len(got), n)
	}
}

func done(m *sync.Map, n int) bool {
	k := 0
	m.Range(func(any, any) bool { k++; return true })
	return k >= n
}

// countCommitted reads topic to its end with a READ_COMMITTED
// log.Consumer on the broker and counts each value.
func countCommitted(ctx context.Context, t *testing.T, c *kafkatest.Cluster, topic string) map[string]int {
	t.Helper()
	b := c.Broker()
	parts, err := b.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		awaitStable(t, b, topic, i)
	}
	cons, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{topic}, Isolation: log.ReadCommitted, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]int{}
	for {
		complete := true
		for i := range parts {
			end, err := b.ListOffset(ctx, log.TopicPartition{Topic: topic, Partition: i}, log.LatestOffset)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := cons.Position(topic, i)
			if err != nil {
				t.Fatal(err)
			}
			complete = complete && pos >= end
		}
		if complete {
			return got
		}
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got[string(r.Value)]++
		}
	}
}
