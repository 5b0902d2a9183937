package log

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// txnCoordinator awaits b's loaded transaction coordinator.
func txnCoordinator(t *testing.T, b *Broker) *txn.Coordinator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := b.TxnCoordinator(ctx, "any")
	require.NoError(t, err)
	return c
}

// awaitEnd waits, with long polls (no sleeps), until the partition's end
// offset reaches end.
func awaitEnd(t *testing.T, b *Broker, topic string, partition int, end int64) *Partition {
	t.Helper()
	p, err := b.Partition(topic, partition)
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for p.EndOffset() < end {
		require.True(t, time.Now().Before(deadline), "%s: end %d, awaited %d", p, p.EndOffset(), end)
		_, err := b.Fetch(context.Background(), FetchRequest{MaxWait: 5 * time.Second,
			Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: topic, Partition: partition}, Offset: p.EndOffset()}}})
		require.NoError(t, err)
	}
	return p
}

// awaitStable waits, with READ_COMMITTED long polls, until the
// partition's last stable offset reaches end (the marker that moves it is
// published just after the end offset).
func awaitStable(t *testing.T, b *Broker, topic string, partition int, end int64) *Partition {
	t.Helper()
	p := awaitEnd(t, b, topic, partition, end)
	deadline := time.Now().Add(time.Minute)
	for p.LastStableOffset() < end {
		require.True(t, time.Now().Before(deadline), "%s: LSO %d, awaited %d", p, p.LastStableOffset(), end)
		_, err := b.Fetch(context.Background(), FetchRequest{MaxWait: 5 * time.Second, Isolation: FetchTxnCommitted,
			Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: topic, Partition: partition}, Offset: p.LastStableOffset()}}})
		require.NoError(t, err)
	}
	return p
}

// markerIn returns the marker at offset off of p.
func markerIn(t *testing.T, p *Partition, off int64) batch.Marker {
	t.Helper()
	raw, err := p.ReadBatches(off, 1<<20, p.EndOffset())
	require.NoError(t, err)
	m, h, err := batch.ParseMarker(raw[:batch.MarkerSize])
	require.NoError(t, err)
	require.Equal(t, off, h.BaseOffset)
	return m
}

// txnState returns id's state as the last of the first records records
// of TransactionStateTopic holds it, once they are written: the
// CompleteCommit or CompleteAbort record follows the markers.
func txnState(t *testing.T, b *Broker, id string, records int64) txn.Metadata {
	t.Helper()
	p := awaitEnd(t, b, TransactionStateTopic, 0, records)
	recs, err := p.ReadAppend(nil, records-1, 1<<20)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	got, m, err := txn.DecodeRecord(recs[0].Key, recs[0].Value)
	require.NoError(t, err)
	require.Equal(t, id, got)
	return *m
}

// awaitEnded waits until id's transaction is complete in c. The
// coordinator offers no wait (it answers ErrConcurrentTransactions until
// then, which clients retry after a backoff): this polls Describe.
func awaitEnded(t *testing.T, c *txn.Coordinator, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m, ok := c.Describe(id)
		if ok && (m.State == txn.CompleteCommit || m.State == txn.CompleteAbort) {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s still %v", id, m.State)
		time.Sleep(time.Millisecond)
	}
}

func TestBrokerTxnCommitAbortRestart(t *testing.T) {
	fs := vfs.NewMem()
	b, err := Open("/d", Config{FS: fs})
	require.NoError(t, err)
	_, err = b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"t"}, b.Topics(), "internal topics are not listed")
	_, err = b.CreateTopic(TransactionStateTopic, TopicConfig{})
	require.ErrorIs(t, err, ErrInvalidTopic)

	ctx := context.Background()
	c := txnCoordinator(t, b)
	pid, err := c.InitProducerID(ctx, "etl", time.Minute, nil)
	require.NoError(t, err)
	require.Equal(t, int16(0), pid.Epoch)
	ps := []tp.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	require.NoError(t, c.AddPartitions(ctx, "etl", pid.ID, pid.Epoch, ps, 0))
	for i := range 2 {
		p, _ := b.Partition("t", i)
		_, _, err := p.AppendBatch(txnProduce(pid.ID, pid.Epoch, 0, 3))
		require.NoError(t, err)
		require.Equal(t, int64(0), p.LastStableOffset(), "open transaction holds the LSO")
	}
	_, err = c.EndTxn(ctx, "etl", pid.ID, pid.Epoch, true, 0)
	require.NoError(t, err)
	for i := range 2 {
		p := awaitStable(t, b, "t", i, 4)
		m := markerIn(t, p, 3)
		require.True(t, m.Commit)
		require.Equal(t, pid.ID, m.ProducerID)
		require.Equal(t, int64(4), p.LastStableOffset())
	}
	// Init, add, prepare, complete: four records, fsynced.
	require.Equal(t, txn.CompleteCommit, txnState(t, b, "etl", 4).State)
	awaitEnded(t, c, "etl")

	// An abort of the next transaction, in one partition.
	require.NoError(t, c.AddPartitions(ctx, "etl", pid.ID, pid.Epoch, ps[:1], 0))
	p0, _ := b.Partition("t", 0)
	_, _, err = p0.AppendBatch(txnProduce(pid.ID, pid.Epoch, 3, 2))
	require.NoError(t, err)
	_, err = c.EndTxn(ctx, "etl", pid.ID, pid.Epoch, false, 0)
	require.NoError(t, err)
	require.False(t, markerIn(t, awaitEnd(t, b, "t", 0, 7), 6).Commit)
	require.Len(t, abortedTxns(t, p0), 1)
	require.Equal(t, txn.CompleteAbort, txnState(t, b, "etl", 7).State)
	awaitEnded(t, c, "etl")
	require.NoError(t, b.Close())

	// The state comes back: the id keeps its producer, the next
	// InitProducerId bumps its epoch.
	b, err = Open("/d", Config{FS: fs})
	require.NoError(t, err)
	defer b.Close()
	c = txnCoordinator(t, b)
	m, ok := c.Describe("etl")
	require.True(t, ok)
	require.Equal(t, txn.CompleteAbort, m.State)
	require.Equal(t, pid.ID, m.ProducerID)
	again, err := c.InitProducerID(ctx, "etl", time.Minute, nil)
	require.NoError(t, err)
	require.Equal(t, txn.ProducerIDEpoch{ID: pid.ID, Epoch: 1}, again)
	other, err := c.InitProducerID(ctx, "other", time.Minute, nil)
	require.NoError(t, err)
	require.NotEqual(t, pid.ID, other.ID, "producer ids come from the durable blocks")
}

// TestBrokerTxnCrashMidCommit: the marker of one partition fails to be
// written (its disk fails) after the commit is decided and the other
// partition has its marker; the machine crashes. Reopened, the
// coordinator finds PrepareCommit and writes both markers again; every
// record committed is readable and the LSO moves past them.
func TestBrokerTxnCrashMidCommit(t *testing.T) {
	mem := vfs.NewMem()
	var failT1 atomic.Bool
	fs := vfs.WithErrors(mem, func(op vfs.Op, path string) error {
		if failT1.Load() && op == vfs.OpWrite && strings.Contains(path, "/t-1/") {
			return vfs.ErrInjected
		}
		return nil
	})
	// The coordinator writes t-0's marker, then t-1's, whose failure it
	// logs: once it does, t-0's marker is fsynced (AppendMarker returned).
	// Its end offset alone is published before the fsync.
	t1Failed := make(chan struct{}, 1)
	logger := slog.New(signalHandler{msg: "txn: marker write failed, retrying", ch: t1Failed})
	b, err := Open("/d", Config{FS: fs, Logger: logger})
	require.NoError(t, err)
	defer func() { b.Close() }()
	_, err = b.CreateTopic("t", TopicConfig{Partitions: 2, FlushMessages: 1})
	require.NoError(t, err)
	ctx := context.Background()
	c := txnCoordinator(t, b)
	pid, err := c.InitProducerID(ctx, "etl", time.Minute, nil)
	require.NoError(t, err)
	ps := []tp.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
	require.NoError(t, c.AddPartitions(ctx, "etl", pid.ID, pid.Epoch, ps, 0))
	for i := range 2 {
		p, _ := b.Partition("t", i)
		_, _, err := p.AppendBatch(txnProduce(pid.ID, pid.Epoch, 0, 5))
		require.NoError(t, err)
	}
	failT1.Store(true)
	_, err = c.EndTxn(ctx, "etl", pid.ID, pid.Epoch, true, 0)
	require.NoError(t, err, "the commit is decided once PrepareCommit is written")
	select {
	case <-t1Failed:
	case <-time.After(time.Minute):
		t.Fatal("the coordinator did not try t-1's marker")
	}
	awaitEnd(t, b, "t", 0, 6)
	p1, _ := b.Partition("t", 1)
	require.Equal(t, int64(5), p1.EndOffset(), "t-1's marker failed")
	m, _ := c.Describe("etl")
	require.Equal(t, txn.PrepareCommit, m.State)

	// The crash: only what was synced survives.
	crashed := mem.CrashClone()
	b2, err := Open("/d", Config{FS: crashed})
	require.NoError(t, err)
	defer b2.Close()
	for i, end := range []int64{7, 6} { // t-0 gets its marker again
		p := awaitStable(t, b2, "t", i, end)
		// t-0 had its marker: it gets a second one, which ends nothing.
		last := p.EndOffset() - 1
		require.True(t, markerIn(t, p, last).Commit)
		require.Equal(t, p.EndOffset(), p.LastStableOffset())
		recs, err := p.ReadAppend(nil, 0, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 5, "every committed record of %s", p)
	}
	require.Equal(t, txn.CompleteCommit, txnState(t, b2, "etl", 4).State)
}

// TestBrokerTxnLoading: while the coordinator loads, TxnCoordinator
// answers ErrTxnCoordinatorLoading to a caller that does not wait (the
// Kafka server's) and makes one that waits wait until it is loaded.
func TestBrokerTxnLoading(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	loaded := b.txn
	txnCoordinator(t, b)
	// A host still loading, as startTxn makes it.
	loading := &txnHost{loaded: make(chan struct{})}
	b.txn = loading
	defer func() { b.txn = loaded }()
	now, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.TxnCoordinator(now, "etl")
	require.ErrorIs(t, err, ErrTxnCoordinatorLoading)
	got := make(chan *txn.Coordinator)
	go func() {
		c, _ := b.TxnCoordinator(context.Background(), "etl")
		got <- c
	}()
	loading.coord = loaded.coord
	close(loading.loaded)
	require.Same(t, loaded.coord, <-got)
}

// TestBrokerTxnMarkerErrors: WriteTxnMarker refuses a marker without a
// producer, a deleted partition needs none, and a marker older than the
// producer's epoch is refused and changes nothing.
func TestBrokerTxnMarkerErrors(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.CreateTopic("t", TopicConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	at := TopicPartition{Topic: "t", Partition: 0}
	require.ErrorIs(t, b.WriteTxnMarker(ctx, at, batch.Marker{ProducerID: -1}), ErrInvalidRequest)
	require.ErrorIs(t, b.WriteTxnMarker(ctx, TopicPartition{Topic: "gone"}, markerOf(1, 0, 0, true)), ErrUnknownTopic)
	require.NoError(t, txnMarkers{b}.WriteMarker(ctx, tp.TopicPartition{Topic: "gone"}, markerOf(1, 0, 0, true)))

	p, _ := b.Partition("t", 0)
	_, _, err = p.AppendBatch(txnProduce(7, 3, 0, 1))
	require.NoError(t, err)
	err = b.WriteTxnMarker(ctx, at, markerOf(7, 2, 0, true))
	require.True(t, errors.Is(err, ErrProducerFenced), "%v", err)
	require.Equal(t, int64(1), p.EndOffset())
	require.NoError(t, txnMarkers{b}.WriteMarker(ctx, at, markerOf(7, 2, 0, true)), "a fenced marker is dropped, not retried")
	require.NoError(t, b.WriteTxnMarker(ctx, at, markerOf(7, 3, 0, false)))
	require.Equal(t, int64(2), p.LastStableOffset())
}
