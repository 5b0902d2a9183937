package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/txn"
)

// midCommit is a transaction stopped between its PrepareCommit and its
// marker: its coordinator (member coord) is cut from the leader of the
// partition it wrote (member leader) on the data plane, so the marker
// cannot be written, while the third member (other) has both.
type midCommit struct {
	c                    *memberCluster
	id                   string
	coord, leader, other int
	prod                 *log.Producer
}

// commitCut commits a transaction of one record in t-0 with the
// coordinator cut from t-0's leader, and checks that it stays in
// PrepareCommit there, its record beyond t-0's last stable offset.
func commitCut(ctx context.Context, t *testing.T, c *memberCluster) *midCommit {
	t.Helper()
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	createTxnStateTopic(t, c)
	m := &midCommit{c: c, leader: c.leader("t", 0)}
	m.coord = m.leader%3 + 1
	m.other = 6 - m.leader - m.coord
	m.id = txnIDOn(t, c, m.coord)
	m.prod = txnProducer(t, c.member(m.other), m.id, 0)
	require.NoError(t, m.prod.InitTransactions(ctx))
	require.NoError(t, m.prod.BeginTransaction())
	_, err := m.prod.Send(ctx, log.Record{Topic: "t", Value: []byte("c-0")})
	require.NoError(t, err)

	c.local.Cut(m.coord, m.leader)
	// Answered once PrepareCommit is in the ISR of the coordinator's
	// partition: the coordinator and the third member, once the cut
	// member has left it.
	require.NoError(t, m.prod.CommitTransaction(ctx))
	coord, err := replica.TxnBackend(c.member(m.coord)).TxnCoordinator(ctx, m.id)
	require.NoError(t, err)
	meta, ok := coord.Describe(m.id)
	require.True(t, ok)
	require.Equal(t, txn.PrepareCommit, meta.State, "the marker cannot reach member %d", m.leader)
	lso, err := c.member(m.other).ListOffset(ctx, log.TopicPartition{Topic: "t"}, log.LatestStableOffset)
	require.NoError(t, err)
	require.EqualValues(t, 0, lso, "the committing transaction holds t-0's LSO")
	return m
}

// finish commits one more transaction through the same producer and
// checks that a READ_COMMITTED reader on member via reads the cut
// transaction's record once, then that one.
func (m *midCommit) finish(ctx context.Context, t *testing.T, via int) {
	t.Helper()
	sendTxn(ctx, t, m.prod, "t", []int{0}, "end", true)
	got := readCommittedUntil(ctx, t, m.c.member(via), "t", []int{0}, "end")
	require.Equal(t, []string{"c-0", "end-0"}, got[0])
	require.NoError(t, m.prod.Close())
}

// The coordinator of a committing transaction is stopped after
// PrepareCommit, before its marker is written: the new leader of its
// __transaction_state partition loads PrepareCommit and writes the marker.
func TestTxnCoordinatorKilledMidCommit(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	defer c.local.HealAll()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := commitCut(ctx, t, c)

	tp := txn.PartitionFor(m.id, replica.DefaultTransactionStatePartitions)
	c.stop(m.coord)
	next := c.waitLeaderNot(c.member(m.other), log.TransactionStateTopic, tp, m.coord)
	require.Equal(t, m.other, next, "the member in the ISR of %s-%d leads it", log.TransactionStateTopic, tp)
	m.finish(ctx, t, m.leader)
}

// The leader of a partition a committing transaction wrote is stopped
// after PrepareCommit, before the marker reached it: the coordinator
// writes the marker at the partition's new leader.
func TestTxnPartitionLeaderKilledMidCommit(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	defer c.local.HealAll()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := commitCut(ctx, t, c)

	c.stop(m.leader)
	c.waitLeaderNot(c.member(m.other), "t", 0, m.leader)
	m.finish(ctx, t, m.other)
}

// A producer that dies with its transaction open (after AddPartitions,
// before EndTxn) has it aborted by its coordinator once its timeout
// passes: the last stable offset moves on, and a READ_COMMITTED reader
// gets the later transactions of another producer, never its records.
func TestTxnProducerDiesAbortedOnTimeout(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ps := []int{0, 1}

	dead := txnProducer(t, c.member(1), "dies", time.Second)
	require.NoError(t, dead.InitTransactions(ctx))
	require.NoError(t, dead.BeginTransaction())
	for _, p := range ps {
		_, err := dead.Send(ctx, log.Record{Topic: "t", Partition: p, Value: []byte("dead")})
		require.NoError(t, err) // written: its partitions are in the transaction
	}
	// dead is never heard of again (closed below, after the checks).

	live := txnProducer(t, c.member(2), "lives", 0)
	defer live.Close()
	sendTxn(ctx, t, live, "t", ps, "live", true)
	sendTxn(ctx, t, live, "t", ps, "end", true)
	got := readCommittedUntil(ctx, t, c.member(3), "t", ps, "end")
	for _, p := range ps {
		require.Equal(t, []string{"live-" + string(rune('0'+p)), "end-" + string(rune('0'+p))}, got[p], "partition %d", p)
	}
	node, ok := replica.TxnBackend(c.member(3)).TxnCoordinatorNode(ctx, "dies")
	require.True(t, ok)
	coord, err := replica.TxnBackend(c.member(int(node))).TxnCoordinator(ctx, "dies")
	require.NoError(t, err)
	select {
	case <-coord.Idle("dies"):
	case <-ctx.Done():
		t.Fatal("the aborted transaction never completed")
	}
	meta, ok := coord.Describe("dies")
	require.True(t, ok)
	require.Equal(t, txn.CompleteAbort, meta.State)
	for _, p := range ps {
		tp := log.TopicPartition{Topic: "t", Partition: p}
		lso, err := c.member(1).ListOffset(ctx, tp, log.LatestStableOffset)
		require.NoError(t, err)
		hw, err := c.member(1).ListOffset(ctx, tp, log.LatestOffset)
		require.NoError(t, err)
		require.Equal(t, hw, lso, "t-%d: nothing left open", p)
	}
	dead.Close()
}
