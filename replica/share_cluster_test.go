package replica_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// ShareGroupDescribe is answered by the group's coordinator only: the
// other members answer NOT_COORDINATOR, as Kafka's brokers do, rather
// than GROUP_ID_NOT_FOUND for a group whose members they do not know.
func TestShareGroupDescribeAtCoordinatorOnly(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	createOffsetsTopic(t, c)
	const g = "sg"
	_, node, ok := replica.KafkaBackend(c.member(1)).CoordinatorFor(ctx, g)
	require.True(t, ok)
	coord := c.member(int(node))

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, g, "member-a", []string{"t"}
	for { // the coordinator may still load its partition
		resp, err := kafkaRequest(coord.Addr(), hb)
		require.NoError(t, err)
		code := resp.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode
		if code == kerr.None {
			break
		}
		require.Equal(t, kerr.CoordinatorLoadInProgress, code)
		select {
		case <-ctx.Done():
			t.Fatal("the coordinator never loaded")
		case <-time.After(20 * time.Millisecond):
		}
	}

	for _, b := range c.members {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.Version, req.GroupIDs = 1, []string{g}
		resp, err := kafkaRequest(b.Addr(), req)
		require.NoError(t, err)
		groups := resp.(*kmsg.ShareGroupDescribeResponse).Groups
		require.Len(t, groups, 1)
		if b == coord {
			require.Equal(t, kerr.None, groups[0].ErrorCode, "at the coordinator, member %d", b.ID())
			require.Len(t, groups[0].Members, 1)
			require.Equal(t, "member-a", groups[0].Members[0].MemberID)
			continue
		}
		require.Equal(t, kerr.NotCoordinator, groups[0].ErrorCode, "at member %d, not the coordinator (%d)", b.ID(), node)
	}
}

// The share-partitions' records in __share_group_state are pruned up to
// each one's latest snapshot: 40 alterations
// of a group's offsets — a snapshot each — leave a record or two per
// share-partition in its partition of __share_group_state, among them its
// latest snapshot, from which a new leader of the partition loads it.
func TestShareStatePrunedOnCluster(t *testing.T) {
	leaktest.Check(t)
	const parts, rounds = 2, 40
	c := shareCluster(t, "p", parts, "gp")
	coord := c.member(c.leader(log.OffsetsTopic, replica.GroupPartition("gp", replica.DefaultOffsetsTopicPartitions)))
	cc := replica.ShareCoordinatorOf(coord)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := log.NewProducer(c.member(1), log.ProducerConfig{Acks: log.AcksAll, Partitioner: log.PartitionerManual})
	require.NoError(t, err)
	for p := range parts { // records in each partition: an altered offset is kept within them
		for i := range rounds {
			_, err := prod.Send(ctx, log.Record{Topic: "p", Partition: p, Value: fmt.Appendf(nil, "v%d", i)})
			require.NoError(t, err)
		}
	}
	require.NoError(t, prod.Close())
	for i := range rounds {
		alter := map[log.TopicPartition]int64{}
		for p := range parts {
			alter[log.TopicPartition{Topic: "p", Partition: p}] = int64(i)
		}
		require.NoError(t, cc.AlterOffsets(ctx, "gp", alter))
	}

	// kept is the records p-p's partition of __share_group_state keeps
	// (not partition 0, which holds the group's config: not pruned past it).
	kept := func(p int) int64 {
		lp := stateReplica(t, c, p)
		return lp.EndOffset() - lp.StartOffset()
	}
	latest := map[int]int64{}
	for p := range parts {
		require.GreaterOrEqual(t, kept(p), int64(rounds), "p-%d's before", p)
		latest[p] = latestSnapshot(t, c, p)
	}
	for _, b := range c.members {
		require.NoError(t, replica.PruneShareState(ctx, b))
	}
	for p := range parts {
		// The latest snapshot of each share-partition there, a load's barrier.
		require.LessOrEqual(t, kept(p), int64(2*parts), "p-%d's after", p)
	}
	for _, b := range c.members {
		require.Equal(t, "earliest", replica.ShareCoordinatorOf(b).GroupConfig("gp").AutoOffsetReset, "member %d", b.ID())
	}

	// What is left holds each share-partition's latest snapshot: the
	// record a new leader loads it from.
	for p, at := range latest {
		lp := stateReplica(t, c, p)
		require.LessOrEqual(t, lp.StartOffset(), at, "the latest snapshot of p-%d pruned", p)
		require.Positive(t, lp.StartOffset(), "p-%d's partition of %s not pruned", p, log.ShareStateTopic)
	}

	// A new leader of p-0 loads its share-partition from what is left.
	tp := log.TopicPartition{Topic: "p", Partition: 0}
	old := c.leader("p", 0)
	st, ok := replica.ShareCoordinatorOf(c.member(old)).Offsets("gp")[tp]
	require.True(t, ok)
	require.EqualValues(t, rounds-1, st.StartOffset, "at the leader %d", old)
	c.stop(old)
	next := c.waitLeaderNot(c.any(old), "p", 0, old)
	require.Eventually(t, func() bool { // loaded in the background
		st, ok := replica.ShareCoordinatorOf(c.member(next)).Offsets("gp")[tp]
		return ok && st.StartOffset == rounds-1
	}, 30*time.Second, 10*time.Millisecond, "the latest snapshot at the new leader %d", next)
}

// stateReplica is the leader's replica of the partition of
// __share_group_state holding p-p's share-partitions.
func stateReplica(t *testing.T, c *memberCluster, p int) *log.Partition {
	t.Helper()
	n, err := c.any().Partitions(context.Background(), log.ShareStateTopic)
	require.NoError(t, err)
	sp := replica.ShareStatePartition(log.TopicPartition{Topic: "p", Partition: p}, n)
	require.NotZero(t, sp, "partition 0 holds the groups' configs")
	lp, err := c.member(c.leader(log.ShareStateTopic, sp)).Partition(log.ShareStateTopic, sp)
	require.NoError(t, err)
	return lp
}

// latestSnapshot is the offset of the latest ShareSnapshot record of
// p-p's share-partition.
func latestSnapshot(t *testing.T, c *memberCluster, p int) int64 {
	t.Helper()
	lp := stateReplica(t, c, p)
	recs, err := log.DecodeRecords(readAll(t, lp, lp.HighWatermark()))
	require.NoError(t, err)
	at := int64(-1)
	for _, r := range recs {
		if len(r.Key) > 4 && r.Key[0] == 0 && r.Key[1] == 0 && binary.BigEndian.Uint32(r.Key[len(r.Key)-4:]) == uint32(p) {
			at = r.Offset
		}
	}
	require.GreaterOrEqual(t, at, int64(0), "no snapshot of p-%d", p)
	return at
}
