package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/segment/batch"
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

// groupNotOn returns a group whose partition of __consumer_offsets
// member id does not lead, once every member has the topic with leaders.
func groupNotOn(ctx context.Context, t *testing.T, c *memberCluster, id int) string {
	t.Helper()
	_, err := c.any().FetchOffsets(ctx, "probe", nil) // creates __consumer_offsets
	require.NoError(t, err)
	var img *controller.Image
	for _, b := range c.members {
		img = c.waitImage(b, log.OffsetsTopic, func(img *controller.Image) bool {
			tt, ok := img.Topic(log.OffsetsTopic)
			for _, st := range tt.Partitions {
				ok = ok && st.Leader != controller.NoLeader
			}
			return ok
		})
	}
	tt, _ := img.Topic(log.OffsetsTopic)
	for i := range 1000 {
		g := fmt.Sprintf("g-%d", i)
		if tt.Partitions[replica.GroupPartition(g, len(tt.Partitions))].Leader != id {
			return g
		}
	}
	t.Fatalf("every group is coordinated by member %d", id)
	return ""
}

// The member that coordinates a transaction is killed — cut off, then
// stopped without handing anything over — between AddPartitions (and
// AddOffsets) and EndTxn, and restarted: another member's coordinator
// loads the transaction Ongoing from __transaction_state; the producer's
// commit completes there, with the offsets it sent (their marker written
// to __consumer_offsets by the new coordinator); a READ_COMMITTED reader
// through every member, the restarted one too, reads each committed record
// once and nothing of the aborted transaction.
func TestTxnCoordinatorRestartedMidTransaction(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ps := []int{0, 1}
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	c.createTopic("in", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	createTxnStateTopic(t, c)
	const killed, via = 1, 2
	id := txnIDOn(t, c, killed)
	group := groupNotOn(ctx, t, c, killed)
	in0 := log.TopicPartition{Topic: "in", Partition: 0}

	prod := txnProducer(t, c.member(via), id, 0)
	defer prod.Close()
	require.NoError(t, prod.InitTransactions(ctx))
	sendTxn(ctx, t, prod, "t", ps, "a", true)
	sendTxn(ctx, t, prod, "t", ps, "x", false)
	require.NoError(t, prod.BeginTransaction())
	for _, p := range ps {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: p, Value: fmt.Appendf(nil, "b-%d", p)})
		require.NoError(t, err) // written: its partitions are in the transaction
	}
	require.NoError(t, prod.SendOffsetsToTransaction(ctx, map[log.TopicPartition]int64{in0: 7}, log.GroupMetadata{Group: group, Generation: -1}))

	tp := txn.PartitionFor(id, replica.DefaultTransactionStatePartitions)
	oldEpoch := c.partitionState(log.TransactionStateTopic, tp).LeaderEpoch
	c.net.Isolate(node(killed))
	c.local.Isolate(killed)
	c.stop(killed)
	c.net.HealAll()
	c.local.HealAll()
	next := c.waitLeaderNot(c.member(via), log.TransactionStateTopic, tp, killed)
	c.start(killed)
	c.waitLive(3)

	require.NoError(t, prod.CommitTransaction(ctx))
	coord, node := txnCoordinatorOf(ctx, t, c, id)
	require.NotEqual(t, killed, node, "the coordinator moved (to %d)", next)
	meta, ok := coord.Describe(id)
	require.True(t, ok)
	require.Equal(t, txn.CompleteCommit, meta.State)
	sendTxn(ctx, t, prod, "t", ps, "end", true)

	for _, b := range c.members {
		got := readCommittedUntil(ctx, t, b, "t", ps, "end")
		for _, p := range ps {
			want := []string{fmt.Sprintf("a-%d", p), fmt.Sprintf("b-%d", p), fmt.Sprintf("end-%d", p)}
			require.Equal(t, want, got[p], "t-%d read through member %d", p, b.ID())
		}
		offs, err := b.FetchOffsets(ctx, group, []log.TopicPartition{in0})
		require.NoError(t, err)
		require.EqualValues(t, 7, offs[in0], "the offsets committed with the transaction, through member %d", b.ID())
	}

	// The new coordinator's markers carry its epoch (the leader epoch of
	// its partition of __transaction_state) to __consumer_offsets too, and
	// fence there the markers of the old one: a zombie's COMMIT cannot
	// complete offsets a later transaction has pending.
	newEpoch := c.partitionState(log.TransactionStateTopic, tp).LeaderEpoch
	require.Greater(t, newEpoch, oldEpoch)
	otp := log.TopicPartition{Topic: log.OffsetsTopic, Partition: replica.GroupPartition(group, replica.DefaultOffsetsTopicPartitions)}
	oleader := c.member(c.leader(otp.Topic, otp.Partition))
	ops, err := oleader.Partition(otp.Topic, otp.Partition)
	require.NoError(t, err)
	info := producerInfo(t, ops, meta.ProducerID)
	require.Equal(t, newEpoch, info.CoordinatorEpoch, "the marker's coordinator epoch in %s", otp)

	require.NoError(t, prod.BeginTransaction())
	require.NoError(t, prod.SendOffsetsToTransaction(ctx, map[log.TopicPartition]int64{in0: 9}, log.GroupMetadata{Group: group, Generation: -1}))
	zombie := batch.Marker{Commit: true, CoordinatorEpoch: oldEpoch, ProducerID: meta.ProducerID, ProducerEpoch: meta.ProducerEpoch, Timestamp: time.Now().UnixMilli()}
	err = replica.TxnBackend(oleader).WriteTxnMarker(ctx, otp, zombie)
	require.ErrorIs(t, err, log.ErrTransactionCoordinatorFenced)
	offs, err := c.member(via).FetchOffsets(ctx, group, []log.TopicPartition{in0})
	require.NoError(t, err)
	require.EqualValues(t, 7, offs[in0], "pending offsets completed by a fenced coordinator's marker")
	require.NoError(t, prod.AbortTransaction(ctx))
	txnCoordinatorOf(ctx, t, c, id)
	offs, err = c.member(via).FetchOffsets(ctx, group, []log.TopicPartition{in0})
	require.NoError(t, err)
	require.EqualValues(t, 7, offs[in0], "aborted")
}

// partitionState is topic-p as a running member's metadata has it.
func (c *memberCluster) partitionState(topic string, p int) controller.PartitionState {
	c.t.Helper()
	st, ok := c.any().Image().Partition(topic, p)
	require.True(c.t, ok)
	return st
}

// producerInfo is the producer's state in p.
func producerInfo(t *testing.T, p *log.Partition, id int64) log.ProducerInfo {
	t.Helper()
	for _, info := range p.Producers() {
		if info.ProducerID == id {
			return info
		}
	}
	t.Fatalf("producer %d not in %s", id, p)
	return log.ProducerInfo{}
}
