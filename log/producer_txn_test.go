package log

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/txn"
	"github.com/strata-log/strata/vfs"
)

// readValues reads topic from the start to its end at isolation (its last
// stable offset for ReadCommitted: what is decided now) and returns the
// values in offset order per partition, concatenated.
func readValues(t *testing.T, b *Broker, topic string, isolation IsolationLevel) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := NewConsumer(b, ConsumerConfig{Topics: []string{topic}, Isolation: isolation, MaxWait: 20 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	n, err := b.Partitions(ctx, topic)
	require.NoError(t, err)
	var out []string
	for {
		done := true
		for i := range n {
			at := LatestOffset
			if isolation == ReadCommitted {
				at = LatestStableOffset
			}
			end, err := b.ListOffset(ctx, TopicPartition{Topic: topic, Partition: i}, at)
			require.NoError(t, err)
			pos, err := c.Position(topic, i)
			require.NoError(t, err)
			done = done && pos >= end
		}
		if done {
			return out
		}
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
}

// committedSoon waits until READ_COMMITTED readers of topic see want
// (in any order) and the group's committed offsets are offsets: over a
// Client whose coordinator answers EndTxn before it writes the markers
// (Kafka's, a cluster's) they follow CommitTransaction; a Broker writes
// them first.
func committedSoon(t *testing.T, b *Broker, topic string, want []string, groupID string, offsets map[TopicPartition]int64) {
	t.Helper()
	tps := slices.Collect(maps.Keys(offsets))
	require.Eventually(t, func() bool {
		got := readValues(t, b, topic, ReadCommitted)
		slices.Sort(got)
		committed, err := b.FetchOffsets(context.Background(), groupID, tps)
		require.NoError(t, err)
		return slices.Equal(got, want) && maps.Equal(committed, offsets)
	}, 10*time.Second, 5*time.Millisecond)
}

func newTxnProducerT(t *testing.T, b *Broker, id string) *Producer {
	t.Helper()
	p, err := NewProducer(b, ProducerConfig{TransactionalID: id, Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// A transaction's records are seen by READ_COMMITTED readers once it
// commits, never if it aborts; its offsets are the group's committed ones
// once it commits; the producer's records go nowhere outside one.
func TestProducerTransactionsOnBroker(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	_, err = b.CreateTopic("in", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	p := newTxnProducerT(t, b, "t1")

	_, err = p.Send(ctx, Record{Topic: "out", Value: []byte("outside")})
	require.ErrorIs(t, err, ErrInvalidTxnState)
	require.ErrorIs(t, p.CommitTransaction(ctx), ErrInvalidTxnState)

	send := func(vals ...string) {
		for _, v := range vals {
			_, err := p.Send(ctx, Record{Topic: "out", Key: []byte(v), Value: []byte(v)})
			require.NoError(t, err)
		}
	}
	require.NoError(t, p.BeginTransaction())
	require.ErrorIs(t, p.BeginTransaction(), ErrInvalidTxnState)
	send("a1", "a2", "a3")
	in0 := TopicPartition{Topic: "in", Partition: 0}
	require.NoError(t, p.SendOffsetsToTransaction(ctx, map[TopicPartition]int64{in0: 3}, GroupMetadata{Group: "g", Generation: -1}))
	require.Empty(t, readValues(t, b, "out", ReadCommitted), "open: nothing visible")
	got, err := b.FetchOffsets(ctx, "g", []TopicPartition{in0})
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, p.CommitTransaction(ctx))
	committedSoon(t, b, "out", []string{"a1", "a2", "a3"}, "g", map[TopicPartition]int64{in0: 3})

	require.NoError(t, p.BeginTransaction())
	send("b1", "b2")
	require.NoError(t, p.SendOffsetsToTransaction(ctx, map[TopicPartition]int64{in0: 5}, GroupMetadata{Group: "g", Generation: -1}))
	require.NoError(t, p.AbortTransaction(ctx))
	require.ElementsMatch(t, []string{"a1", "a2", "a3", "b1", "b2"}, readValues(t, b, "out", ReadUncommitted))
	require.Eventually(t, func() bool { return len(b.GroupCoordinator().PendingTxn("g", nil)) == 0 }, 10*time.Second, 5*time.Millisecond)
	committedSoon(t, b, "out", []string{"a1", "a2", "a3"}, "g", map[TopicPartition]int64{in0: 3}) // the aborted offsets dropped

	require.NoError(t, p.BeginTransaction())
	send("c1")
	require.NoError(t, p.CommitTransaction(ctx))
	committedSoon(t, b, "out", []string{"a1", "a2", "a3", "c1"}, "g", map[TopicPartition]int64{in0: 3})
}

// A second producer of the transactional id fences the first: the first's
// open transaction is aborted, and its later sends and commits fail with
// ErrProducerFenced.
func TestProducerTransactionFencing(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	old := newTxnProducerT(t, b, "same")
	require.NoError(t, old.BeginTransaction())
	_, err = old.Send(ctx, Record{Topic: "out", Value: []byte("zombie")})
	require.NoError(t, err)

	fresh := newTxnProducerT(t, b, "same")
	require.NoError(t, fresh.InitTransactions(ctx))
	require.NoError(t, fresh.BeginTransaction())
	_, err = fresh.Send(ctx, Record{Topic: "out", Value: []byte("fresh")})
	require.NoError(t, err)
	require.NoError(t, fresh.CommitTransaction(ctx))

	err = old.CommitTransaction(ctx)
	require.Error(t, err)
	require.True(t, fenced(err), "%v", err)
	committedSoon(t, b, "out", []string{"fresh"}, "g", nil)
}

// A record that fails in a transaction makes it abortable: the commit is
// refused, the abort goes through, and the next transaction works.
func TestProducerTransactionAbortable(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 1, MaxMessageBytes: 1024})
	require.NoError(t, err)
	p := newTxnProducerT(t, b, "t")
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, Record{Topic: "out", Value: []byte("ok")})
	require.NoError(t, err)
	_, err = p.Send(ctx, Record{Topic: "out", Value: make([]byte, 4096)})
	require.ErrorIs(t, err, ErrRecordTooLarge)
	require.ErrorIs(t, p.CommitTransaction(ctx), ErrTransactionAbortable)
	require.ErrorIs(t, p.CommitTransaction(ctx), ErrInvalidTxnState)
	require.NoError(t, p.AbortTransaction(ctx))
	require.NoError(t, p.BeginTransaction())
	for i := range 3 {
		_, err = p.Send(ctx, Record{Topic: "out", Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, p.CommitTransaction(ctx))
	committedSoon(t, b, "out", []string{"v0", "v1", "v2"}, "g", nil)
}

// A transactional id needs a Client that serves transactions; a
// transaction timeout needs a transactional id; the transaction calls need
// a transactional producer.
func TestProducerTransactionConfig(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := NewProducer(struct{ Client }{b}, ProducerConfig{TransactionalID: "x"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorIs(t, err, ErrTransactionsUnsupported)
	_, err = NewProducer(b, ProducerConfig{TransactionTimeout: time.Second})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewProducer(b, ProducerConfig{TransactionalID: "x", Acks: AcksLeader})
	require.ErrorIs(t, err, ErrInvalidConfig, "transactions are idempotent: AcksAll")

	plain, err := NewProducer(b, ProducerConfig{})
	require.NoError(t, err)
	defer plain.Close()
	require.ErrorIs(t, plain.BeginTransaction(), ErrTransactionalIDRequired)
	require.ErrorIs(t, plain.CommitTransaction(context.Background()), ErrTransactionalIDRequired)
}

// The next transaction starts right after a commit: the coordinator is
// still writing the markers of the last, and the producer's first call of
// the next waits for them (in-process) rather than retrying after
// RetryBackoff, here far longer than ctx allows.
func TestProducerTransactionBackToBack(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	p, err := NewProducer(b, ProducerConfig{TransactionalID: "t1", Linger: -1, RetryBackoff: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var want []string
	for i := range 5 {
		require.NoError(t, p.BeginTransaction())
		v := fmt.Sprint("v", i)
		_, err := p.Send(ctx, Record{Topic: "out", Value: []byte(v)})
		require.NoError(t, err, "transaction %d", i)
		require.NoError(t, p.CommitTransaction(ctx), "transaction %d", i)
		want = append(want, v)
	}
	require.Eventually(t, func() bool {
		return slices.Equal(readValues(t, b, "out", ReadCommitted), want)
	}, 10*time.Second, 5*time.Millisecond)
}

// concurrentBroker answers the first n AddPartitionsToTxn calls
// ErrConcurrentTransactions, as a coordinator over the wire does while the
// previous transaction's markers are written.
type concurrentBroker struct {
	*Broker
	mu    sync.Mutex
	n     int
	calls int
}

func (b *concurrentBroker) AddPartitionsToTxn(ctx context.Context, id string, pid ProducerID, tps []TopicPartition) error {
	b.mu.Lock()
	b.calls++
	busy := b.calls <= b.n
	b.mu.Unlock()
	if busy {
		return fmt.Errorf("remote: %w", txn.ErrConcurrentTransactions)
	}
	return b.Broker.AddPartitionsToTxn(ctx, id, pid, tps)
}

// ErrConcurrentTransactions is retried soon (Kafka's producer: after 20
// ms), not after RetryBackoff doubling: here RetryBackoff is far longer
// than ctx allows.
func TestProducerTransactionConcurrentRetry(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	cb := &concurrentBroker{Broker: b, n: 3}
	p, err := NewProducer(cb, ProducerConfig{TransactionalID: "t1", Linger: -1, RetryBackoff: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.BeginTransaction())
	_, err = p.Send(ctx, Record{Topic: "out", Value: []byte("v")})
	require.NoError(t, err)
	require.NoError(t, p.CommitTransaction(ctx))
	cb.mu.Lock()
	require.Equal(t, 4, cb.calls)
	cb.mu.Unlock()
	require.Eventually(t, func() bool {
		return slices.Equal(readValues(t, b, "out", ReadCommitted), []string{"v"})
	}, 10*time.Second, 5*time.Millisecond)
}

// A transaction's batch goes once it holds txnEagerBytes and nothing of
// its partition is in flight, without waiting out the Linger (here longer
// than the test): written before the commit, where READ_UNCOMMITTED
// readers see it and READ_COMMITTED ones do not; the commit then sends
// the rest, returns once every record's callback has run, and every record
// becomes visible, in order.
func TestProducerTransactionEagerBatches(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	p, err := NewProducer(b, ProducerConfig{TransactionalID: "t1", Linger: time.Hour, Timeout: 2 * time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp0 := TopicPartition{Topic: "out", Partition: 0}

	require.NoError(t, p.BeginTransaction())
	var want []string
	var mu sync.Mutex
	var errs []error
	acked := 0
	done := func(_ Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		acked++
		if err != nil {
			errs = append(errs, err)
		}
	}
	n := 3*txnEagerBytes/100 + 7
	for i := range n {
		v := fmt.Sprintf("%099d", i) // 99 B: n records are over 3 txnEagerBytes encoded
		want = append(want, v)
		p.SendAsync(Record{Topic: "out", Value: []byte(v)}, done)
	}
	require.Eventually(t, func() bool {
		end, err := b.ListOffset(ctx, tp0, LatestOffset)
		require.NoError(t, err)
		return end > 0
	}, 30*time.Second, time.Millisecond, "a batch of the transaction written before the Linger and the commit")
	lso, err := b.ListOffset(ctx, tp0, LatestStableOffset)
	require.NoError(t, err)
	require.Zero(t, lso, "open transaction: nothing stable")
	require.Empty(t, readValues(t, b, "out", ReadCommitted))
	require.NotEmpty(t, readValues(t, b, "out", ReadUncommitted))

	require.NoError(t, p.CommitTransaction(ctx))
	mu.Lock()
	require.Equal(t, n, acked, "CommitTransaction returns once every callback has run")
	require.Empty(t, errs)
	mu.Unlock()
	require.Eventually(t, func() bool {
		return slices.Equal(readValues(t, b, "out", ReadCommitted), want)
	}, 30*time.Second, 5*time.Millisecond)
}

// notLeaderOnce is a Broker whose first produce is refused with
// ErrNotLeader (retriable), before anything is appended.
type notLeaderOnce struct {
	*Broker
	mu      sync.Mutex
	refused bool
}

func (b *notLeaderOnce) refuse() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	refuse := !b.refused
	b.refused = true
	return refuse
}

func (b *notLeaderOnce) ProduceBatch(ctx context.Context, tp TopicPartition, raw []byte, acks Acks) (ProduceResult, error) {
	if b.refuse() {
		return ProduceResult{}, fmt.Errorf("test: %w", ErrNotLeader)
	}
	return b.Broker.ProduceBatch(ctx, tp, raw, acks)
}

// ProduceBuilt and BuiltProducerOf make it a BuiltProducer, as the Broker
// it wraps: the Producer sends in the committing goroutine as on a Broker.
func (b *notLeaderOnce) ProduceBuilt(ctx context.Context, tp TopicPartition, bb BuiltBatch, acks Acks) (ProduceResult, error) {
	if b.refuse() {
		return ProduceResult{}, fmt.Errorf("test: %w", ErrNotLeader)
	}
	return b.Broker.ProduceBuilt(ctx, tp, bb, acks)
}

func (b *notLeaderOnce) BuiltProducerOf() Client { return b }

// CommitTransaction on a Broker sends the transaction's last batches
// itself (sendAllLocked); one refused there is retried after the backoff
// by a worker, and the commit returns once it is written and committed. On a
// Broker the markers are written before EndTxn answers, so a
// READ_COMMITTED read right after the commit sees every record.
func TestProducerTransactionCommitSends(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 3})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p, err := NewProducer(b, ProducerConfig{TransactionalID: "t1", Linger: time.Hour, Timeout: 2 * time.Hour, Partitioner: PartitionerRoundRobin})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	var want []string
	for txn := range 3 {
		require.NoError(t, p.BeginTransaction())
		for i := range 30 {
			v := fmt.Sprintf("%d-%02d", txn, i)
			want = append(want, v)
			p.SendAsync(Record{Topic: "out", Value: []byte(v)}, nil)
		}
		require.NoError(t, p.CommitTransaction(ctx))
		got := readValues(t, b, "out", ReadCommitted)
		slices.Sort(got)
		require.Equal(t, want, got, "visible as the commit returns")
	}

	nl := &notLeaderOnce{Broker: b}
	p2, err := NewProducer(nl, ProducerConfig{TransactionalID: "t2", Linger: time.Hour, Timeout: 2 * time.Hour, RetryBackoff: 5 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p2.Close()) })
	require.NoError(t, p2.BeginTransaction())
	for i := range 10 {
		v := fmt.Sprintf("t2-%02d", i)
		want = append(want, v)
		p2.SendAsync(Record{Topic: "out", Key: []byte("k"), Value: []byte(v)}, nil)
	}
	require.NoError(t, p2.CommitTransaction(ctx))
	nl.mu.Lock()
	require.True(t, nl.refused)
	nl.mu.Unlock()
	got := readValues(t, b, "out", ReadCommitted)
	slices.Sort(got)
	require.Equal(t, want, got)
}

// Flush on a Broker sends its batches in the caller's goroutine
// (sendAllLocked), but only those closed when it was called: another
// goroutine sending all the while (no linger: each record's batch may go
// at once) does not keep it sending.
func TestProducerFlushInlineReturns(t *testing.T) {
	leaktest.Check(t)
	b := openT(t, vfs.NewMem(), "/d")
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err := b.CreateTopic("out", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	p, err := NewProducer(b, ProducerConfig{Idempotent: true, Acks: AcksAll, Linger: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	stop, stopped, sending := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for n := 0; ; n++ {
			if n == 1000 {
				close(sending)
			}
			select {
			case <-stop:
				return
			default:
				p.SendAsync(Record{Topic: "out", Value: []byte("x")}, nil)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	<-sending
	for range 20 {
		require.NoError(t, p.Flush(ctx), "Flush returns while another goroutine sends")
	}
	close(stop)
	<-stopped
	require.NoError(t, p.Flush(ctx))
	end, err := b.ListOffset(ctx, TopicPartition{Topic: "out"}, LatestOffset)
	require.NoError(t, err)
	require.Positive(t, end)
}
