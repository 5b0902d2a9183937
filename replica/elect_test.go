package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
)

// ElectLeaders on five voters: a preferred election gives a partition back
// to its first replica once that one is in the ISR again (the automatic
// rebalance is minutes away); an unclean one, and only it, brings back a
// partition whose whole ISR is down, from a replica outside it.
func TestElectLeaders(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 5, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := func(topic string) []log.TopicPartition { return []log.TopicPartition{{Topic: topic, Partition: 0}} }

	c.createTopic("p", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 1})
	st, _ := c.any().Image().Partition("p", 0)
	pref := st.Replicas[0]
	res, err := c.any().ElectLeaders(ctx, controller.ElectPreferred, tp("p"))
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, controller.ErrElectionNotNeeded)
	produce(t, c.any(), "p", 0, 10)
	c.stop(pref)
	c.waitLeaderNot(c.any(), "p", 0, pref)
	c.start(pref)
	c.waitISR("p", 0, 3)
	asked := c.any(pref)
	res, err = asked.ElectLeaders(ctx, controller.ElectPreferred, tp("p"))
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, pref, res[0].Leader)
	l, _ := asked.Leader("p", 0)
	require.Equal(t, pref, l, "applied on the member asked when ElectLeaders returns")
	// Idempotent: a send that meets the leader change is retried without
	// a duplicate (a plain acks=all producer may write one, as Kafka's).
	prod, err := log.NewProducer(c.member(pref), log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Timeout: 10 * time.Second})
	require.NoError(t, err)
	for i := 10; i < 20; i++ {
		_, err := prod.Send(ctx, log.Record{Topic: "p", Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
	require.Equal(t, values(20), consumeAll(t, c.member(pref), "p", 20))

	// Unclean: the follower stops (the ISR shrinks to the leader), then the
	// leader; the follower back, the partition stays leaderless until an
	// unclean election is asked for.
	c.createTopic("u", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 1})
	st, _ = c.any().Image().Partition("u", 0)
	leader, follower := st.Leader, st.Replicas[0]
	if follower == leader {
		follower = st.Replicas[1]
	}
	produce(t, c.member(leader), "u", 0, 5)
	c.stop(follower)
	c.waitISR("u", 0, 1)
	produce(t, c.member(leader), "u", 5, 5) // only the leader has these
	c.stop(leader)
	c.start(follower)
	asker := c.any(leader, follower)
	c.waitImage(asker, "u leaderless with its follower back", func(img *controller.Image) bool {
		st, _ := img.Partition("u", 0)
		b, ok := img.Broker(follower)
		return st.Leader == controller.NoLeader && ok && !b.Fenced
	})
	res, err = asker.ElectLeaders(ctx, controller.ElectPreferred, tp("u"))
	require.NoError(t, err)
	require.Error(t, res[0].Err, "a preferred election never goes outside the ISR")
	st, _ = asker.Image().Partition("u", 0)
	require.Equal(t, controller.NoLeader, st.Leader)
	res, err = asker.ElectLeaders(ctx, controller.ElectUnclean, tp("u"))
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, follower, res[0].Leader)
	st, _ = asker.Image().Partition("u", 0)
	require.Equal(t, follower, st.Leader)
	require.Equal(t, []int{follower}, st.ISR)
	res, err = asker.ElectLeaders(ctx, controller.ElectUnclean, tp("u"))
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, controller.ErrElectionNotNeeded)
	// The new leader serves what it had: the first five records.
	require.Equal(t, values(5), consumeAll(t, asker, "u", 5))

	// Unknown partitions.
	res, err = asker.ElectLeaders(ctx, controller.ElectPreferred, []log.TopicPartition{{Topic: "nope"}, {Topic: "p", Partition: 7}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, log.ErrUnknownTopic)
	require.ErrorIs(t, res[1].Err, controller.ErrUnknownPartition)
}
