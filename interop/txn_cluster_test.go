package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/txn"
)

// TestKgoGroupTransactSessionCluster: kgo's GroupTransactSession
// (consume, transform, produce, exactly once) against a three-member
// cluster, with a member stopped mid-run that leads an output partition
// and coordinates one session's transactions (and leads a third of
// __consumer_offsets and __transaction_state): leadership and the
// coordinators move, the sessions go on, and a READ_COMMITTED reader of
// the output then finds every input exactly once. The members finalize
// transaction.version 2, as Kafka 4's: kgo speaks KIP-890 part 2 to them,
// its produces and offset commits adding their partitions and groups, and
// sends no AddPartitionsToTxn or AddOffsetsToTxn.
func TestKgoGroupTransactSessionCluster(t *testing.T) {
	const n = 400
	c := startCluster(t, 3)
	ctx := testCtx(t, 150*time.Second)
	for _, tp := range []struct {
		name  string
		parts int
	}{{"in", 4}, {"out", 3}} {
		if err := c.any().CreateTopic(ctx, tp.name, log.TopicConfig{Partitions: tp.parts, ReplicationFactor: 3, MinInSyncReplicas: 2}); err != nil {
			t.Fatal(err)
		}
	}
	// The victim leads a partition of out and coordinates the first
	// session's transactions, another member the second's. (A member
	// the controller fenced for a moment on a loaded machine can lead no
	// partition of __transaction_state until the leaders are rebalanced,
	// 5 minutes on: the victim is one that leads both.)
	createTxnState(ctx, t, c)
	xt, _ := c.any().Image().Topic(log.TransactionStateTopic)
	victim := -1
	for p := range 3 {
		l := c.leader("out", p)
		if slices.ContainsFunc(xt.Partitions, func(st controller.PartitionState) bool { return st.Leader == l }) {
			victim = l
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no leader of out coordinates transactions: %v", xt.Partitions)
	}
	ids := []string{txnIDOf(t, c, victim, true), txnIDOf(t, c, victim, false)}
	seed := newClusterKgo(t, c, kgo.DefaultProduceTopic("in"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range n {
		if err := seed.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	seed.Close()

	sent := &requestCounter{}
	session := func(id string) *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.seeds()...), kgo.Dialer(c.dial), kgo.TransactionalID(id),
			kgo.ConsumerGroup("etl"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"), kgo.FetchMaxBytes(256), kgo.FetchMaxPartitionBytes(128),
			kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(30*time.Second), kgo.FetchMaxWait(200*time.Millisecond), kgo.RecordDeliveryTimeout(15*time.Second),
			kgo.WithHooks(sent))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var mu sync.Mutex
	processed := map[string]bool{}
	progress := make(chan struct{}, 1)
	var commits, aborts int
	// Polling stops once every input is processed: the session that did
	// not process the last ones is waiting for more.
	pctx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	// step runs one transaction of session s: poll, produce each input
	// upper-cased, commit (or abort when a produce failed).
	step := func(s *kgo.GroupTransactSession) error {
		fs := s.PollFetches(pctx)
		if pctx.Err() != nil {
			return nil // finished by the other session, or the test's end
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		if err := s.Begin(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			wg.Add(1)
			s.Produce(ctx, &kgo.Record{Key: r.Key, Value: []byte(strings.ToUpper(string(r.Value)))}, func(_ *kgo.Record, err error) {
				mu.Lock()
				if err != nil {
					perr = err
				}
				mu.Unlock()
				wg.Done()
			})
		})
		wg.Wait()
		commit := perr == nil
		if !commit {
			t.Logf("produce failed, the transaction aborts: %v", perr)
		}
		ok, err := s.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			return err
		}
		mu.Lock()
		if ok && commit {
			commits++
			fs.EachRecord(func(r *kgo.Record) { processed[string(r.Value)] = true })
			if len(processed) >= n {
				stopPolling()
			}
		} else {
			aborts++
		}
		mu.Unlock()
		select {
		case progress <- struct{}{}:
		default:
		}
		return nil
	}
	// run runs transactions with id until every input is processed. A
	// session whose producer id kgo declares fatal (kgo can fail an
	// AddPartitionsToTxn or InitProducerId with "unknown broker" when the
	// coordinator it cached leaves the metadata between its two lookups)
	// is closed and a new one started with the same id, as an application
	// does: the new one fences the old, whose open transaction is aborted.
	run := func(id string) error {
		for restarts := 0; ; restarts++ {
			s := session(id)
			var err error
			for err == nil {
				mu.Lock()
				k := len(processed)
				mu.Unlock()
				finished := k >= n
				if ctx.Err() != nil {
					closeWithin(t, s)
					return fmt.Errorf("%s: %d of %d inputs processed: %w", id, k, n, ctx.Err())
				}
				if finished || pctx.Err() != nil {
					closeWithin(t, s)
					return nil
				}
				err = step(s)
			}
			closeWithin(t, s)
			if ctx.Err() != nil || restarts == 3 {
				mu.Lock()
				defer mu.Unlock()
				return fmt.Errorf("%s, after %d restarts, %d of %d inputs processed: %w", id, restarts, len(processed), n, err)
			}
			t.Logf("%s: %v; a new session takes over", id, err)
		}
	}

	errs := make(chan error, 2)
	go func() { errs <- run(ids[0]) }()
	go func() { errs <- run(ids[1]) }()

	// Once a third of the input is processed, stop the victim.
	for {
		mu.Lock()
		k := len(processed)
		mu.Unlock()
		if k >= n/3 {
			break
		}
		select {
		case <-progress:
		case err := <-errs:
			t.Fatalf("a session stopped early: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d of %d inputs processed", k, n)
		}
	}
	t.Logf("stopping member %d, a leader of out and the coordinator of %s, after %d inputs", victim, ids[0], n/3)
	c.stop(victim)

	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	t.Logf("%d transactions committed, %d aborted", commits, aborts)
	mu.Unlock()

	got := readCommittedCluster(ctx, t, c.any(), "out")
	for i := range n {
		if v := fmt.Sprintf("V%d", i); got[v] != 1 {
			t.Errorf("%s written %d times", v, got[v])
		}
	}
	if len(got) != n {
		t.Errorf("%d distinct values, want %d", len(got), n)
	}
	if adds, ends := sent.count(kmsg.AddPartitionsToTxn)+sent.count(kmsg.AddOffsetsToTxn), sent.count(kmsg.EndTxn); adds != 0 || ends == 0 {
		t.Errorf("kgo sent %d AddPartitionsToTxn or AddOffsetsToTxn and %d EndTxn: not transaction version 2", adds, ends)
	}
}

// requestCounter is a kgo hook that counts the requests written, by key.
type requestCounter struct {
	mu sync.Mutex
	n  map[int16]int
}

func (r *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[int16]int{}
	}
	r.n[key]++
}

func (r *requestCounter) count(key kmsg.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[int16(key)]
}

// createTxnState makes the first transactional call, which creates
// __transaction_state (Kafka's 50 partitions), and waits until every
// member knows a leader for each of its partitions.
func createTxnState(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	prod, err := log.NewProducer(c.any(), log.ProducerConfig{TransactionalID: "probe", Acks: log.AcksAll})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitImage(log.TransactionStateTopic+" led", func(img *controller.Image) bool {
		xt, ok := img.Topic(log.TransactionStateTopic)
		for _, st := range xt.Partitions {
			ok = ok && st.Leader != controller.NoLeader
		}
		return ok && len(xt.Partitions) == replica.DefaultTransactionStatePartitions
	})
}

// txnIDOf returns a transactional id whose coordinator is member id (on),
// or another member (!on).
func txnIDOf(t *testing.T, c *cluster, id int, on bool) string {
	t.Helper()
	xt, _ := c.any().Image().Topic(log.TransactionStateTopic)
	for i := range 1000 {
		tid := fmt.Sprintf("etl-%d", i)
		if (xt.Partitions[txn.PartitionFor(tid, len(xt.Partitions))].Leader == id) == on {
			return tid
		}
	}
	t.Fatalf("no transactional id tried is coordinated by member %d (%v)", id, on)
	return ""
}

// closeWithin closes a session, which flushes: a failed test whose
// records cannot be written does not hang on it.
func closeWithin(t *testing.T, s *kgo.GroupTransactSession) {
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("GroupTransactSession.Close did not return within 10 s")
	}
}

// readCommittedCluster reads topic to its high watermark with a
// READ_COMMITTED log.Consumer on member b (which cannot pass a partition's
// last stable offset: reaching the HW means nothing there is left open)
// and counts each value.
func readCommittedCluster(ctx context.Context, t *testing.T, b *replica.Broker, topic string) map[string]int {
	t.Helper()
	parts, err := b.Partitions(ctx, topic)
	if err != nil {
		t.Fatal(err)
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
