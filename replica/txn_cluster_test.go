package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/txn"
)

// txnCoordinatorOf returns the coordinator of a transactional id, at the
// member that runs it, once it is idle (its last transaction's markers
// written).
func txnCoordinatorOf(ctx context.Context, t *testing.T, c *memberCluster, id string) (*txn.Coordinator, int) {
	t.Helper()
	node, ok := replica.TxnBackend(c.any()).TxnCoordinatorNode(ctx, id)
	require.True(t, ok)
	coord, err := replica.TxnBackend(c.member(int(node))).TxnCoordinator(ctx, id)
	require.NoError(t, err)
	select {
	case <-coord.Idle(id):
	case <-ctx.Done():
		t.Fatalf("transaction of %q never completed", id)
	}
	return coord, int(node)
}

// Each member expires the idle transactional ids of the
// __transaction_state partitions it leads (transactional.id.expiration.ms,
// checked every minute here): an id whose last transaction completed is
// tombstoned once idle that long on the coordinators' clock, an id with a
// transaction open is kept.
func TestTxnIDsExpireOnMembers(t *testing.T) {
	leaktest.Check(t)
	const expiration = time.Minute
	c := startClusterWith(t, 3, "local", func(cfg *replica.Config) { cfg.TransactionalIDExpiration = expiration })
	clk := clocktest.New(time.Now())
	for _, b := range c.members {
		replica.SetTxnClock(b, clk) // before __transaction_state exists: every coordinator runs on it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})

	idle := txnProducer(t, c.member(1), "idle", 0)
	require.NoError(t, idle.InitTransactions(ctx))
	sendTxn(ctx, t, idle, "t", []int{0, 1}, "idle", true)
	require.NoError(t, idle.Close())
	busy := txnProducer(t, c.member(2), "busy", 10*time.Minute)
	defer busy.Close()
	require.NoError(t, busy.InitTransactions(ctx))
	require.NoError(t, busy.BeginTransaction())
	_, err := busy.Send(ctx, log.Record{Topic: "t", Value: []byte("open")})
	require.NoError(t, err)

	idleCoord, _ := txnCoordinatorOf(ctx, t, c, "idle")
	busyCoord, _ := txnCoordinatorOf(ctx, t, c, "busy")
	first, ok := idleCoord.Describe("idle")
	require.True(t, ok)
	require.Equal(t, txn.CompleteCommit, first.State)

	clk.Advance(expiration / 2) // a check, too early for either
	_, ok = idleCoord.Describe("idle")
	require.True(t, ok, "expired before transactional.id.expiration.ms")

	// The checks run in Advance (the clock's calls); their tombstones are
	// acks=all writes to __transaction_state.
	clk.Advance(2 * expiration)
	_, ok = idleCoord.Describe("idle")
	require.False(t, ok, "an id idle for transactional.id.expiration.ms expires")
	meta, ok := busyCoord.Describe("busy")
	require.True(t, ok, "an id with a transaction open does not expire")
	require.Equal(t, txn.Ongoing, meta.State)

	// The tombstone is in the partition: the id's next producer starts
	// afresh (a new producer id), and commits.
	again := txnProducer(t, c.member(3), "idle", 0)
	defer again.Close()
	require.NoError(t, again.InitTransactions(ctx))
	sendTxn(ctx, t, again, "t", []int{0}, "again", true)
	coord, _ := txnCoordinatorOf(ctx, t, c, "idle")
	next, ok := coord.Describe("idle")
	require.True(t, ok)
	require.NotEqual(t, first.ProducerID, next.ProducerID, "a new producer id: the expired one's state is gone")

	require.NoError(t, busy.AbortTransaction(ctx))
}
