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

// CreatePartitions goes through the controller: every member opens its
// replicas of the new partitions, which take acks=all produces at once.
func TestCreatePartitionsThroughController(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testCreatePartitions(t, tr) })
	}
}

func testCreatePartitions(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	require.NoError(t, c.member(2).CreatePartitions(ctx, "t", 4))
	n, err := c.member(2).Partitions(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, 4, n)
	for id := 1; id <= 3; id++ {
		c.waitImage(c.member(id), "4 partitions", func(img *controller.Image) bool {
			t, ok := img.Topic("t")
			return ok && len(t.Partitions) == 4
		})
	}
	img := c.member(2).Image()
	for p := range 4 {
		st, ok := img.Partition("t", p)
		require.True(t, ok)
		require.Len(t, st.Replicas, 2, "partition %d keeps the replication factor", p)
		// Each replica's member has opened it; the others hold none.
		for id := 1; id <= 3; id++ {
			_, err := c.member(id).Partition("t", p)
			if contains(st.Replicas, id) {
				require.NoError(t, err, "member %d, partition %d", id, p)
			} else {
				require.ErrorIs(t, err, log.ErrUnknownPartition, "member %d, partition %d", id, p)
			}
		}
	}

	prod, err := log.NewProducer(c.member(3), log.ProducerConfig{Acks: log.AcksAll, Timeout: 10 * time.Second})
	require.NoError(t, err)
	for i := range 40 {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % 4, Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
	// (RF 2: the helpers that compare every member's replica do not apply.)
	got := consumeAll(t, c.member(1), "t", 40)
	require.ElementsMatch(t, values(40), got)

	// Refused: no change.
	before := c.member(1).Image().Version()
	require.ErrorIs(t, c.member(1).CreatePartitions(ctx, "t", 4), log.ErrInvalidConfig)
	require.ErrorIs(t, c.member(1).CreatePartitions(ctx, "t", 2), log.ErrInvalidConfig)
	require.ErrorIs(t, c.member(1).CreatePartitions(ctx, "nope", 5), log.ErrUnknownTopic)
	require.ErrorIs(t, c.member(1).CreatePartitions(ctx, "bad/name", 5), log.ErrInvalidTopic)
	// Routed calls past the topic's partitions, or to no topic, say which.
	_, err = c.member(1).ListOffset(context.Background(), log.TopicPartition{Topic: "t", Partition: 4}, log.LatestOffset)
	require.ErrorIs(t, err, log.ErrUnknownPartition)
	_, err = c.member(1).ListOffset(context.Background(), log.TopicPartition{Topic: "nope", Partition: 0}, log.LatestOffset)
	require.ErrorIs(t, err, log.ErrUnknownTopic)
	_, ok := c.member(1).Leader("t", 4)
	require.False(t, ok)
	_, ok = c.member(1).Leader("t", 3)
	require.True(t, ok)
	n, err = c.member(1).Partitions(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, before, c.member(1).Image().Version(), "a refused request changed the metadata")
}
