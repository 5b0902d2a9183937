package replica_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// TestMemberDescribes: over a member's Kafka listener, DescribeLogDirs
// lists the replicas it holds, followers' too, with their sizes, and
// DescribeTopicPartitions gives each partition's leader, replicas and ISR
// as the metadata has them, a stopped member's replicas offline.
func TestMemberDescribes(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "kafka")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.createTopic("d", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 1})
	produce(t, c.any(), "d", 0, 10)
	c.waitReplicasInSync("d", 0)
	c.waitReplicasInSync("d", 1)

	ask := func(via int, req kmsg.Request) kmsg.Response {
		kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.peers[via-1].Addr}, Dial: c.net.Node("client").Dial})
		require.NoError(t, err)
		defer kc.Close()
		resp, err := kc.Request(ctx, req, req.MaxVersion())
		require.NoError(t, err)
		return resp
	}
	leader := c.leader("d", 0)
	follower := c.replicasOf("d", 0)[0]
	if follower == leader {
		follower = c.replicasOf("d", 0)[1]
	}
	logDirs := func(via int) []kmsg.DescribeLogDirsResponseDirTopicPartition {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = "d", []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		resp := ask(via, req).(*kmsg.DescribeLogDirsResponse)
		require.Equal(t, int16(0), resp.ErrorCode)
		require.Len(t, resp.Dirs, 1)
		require.Len(t, resp.Dirs[0].Topics, 1)
		require.Equal(t, "d", resp.Dirs[0].Topics[0].Topic)
		return resp.Dirs[0].Topics[0].Partitions
	}
	led, followed := logDirs(leader), logDirs(follower)
	require.Len(t, followed, 2)
	require.Positive(t, led[0].Size)
	require.Equal(t, led[0].Size, followed[0].Size, "the follower's copy is the leader's")
	require.Zero(t, followed[0].OffsetLag)

	dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dreq.ResponsePartitionLimit = 1
	dresp := ask(follower, dreq).(*kmsg.DescribeTopicPartitionsResponse)
	require.Len(t, dresp.Topics, 1)
	require.NotNil(t, dresp.NextCursor)
	require.Equal(t, "d", dresp.NextCursor.Topic)
	require.Equal(t, int32(1), dresp.NextCursor.Partition)
	dp := dresp.Topics[0].Partitions[0]
	require.Equal(t, int32(leader), dp.LeaderID)
	require.Len(t, dp.Replicas, 3)
	require.ElementsMatch(t, dp.Replicas, dp.ISR)
	require.Empty(t, dp.OfflineReplicas)

	// A member stopped: its replicas are offline once it is fenced.
	down := c.replicasOf("d", 1)[2]
	via := c.any(down).ID()
	c.stop(down)
	require.Eventually(t, func() bool {
		dreq := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = "d"
		dreq.Topics = append(dreq.Topics, dt)
		dresp := ask(via, dreq).(*kmsg.DescribeTopicPartitionsResponse)
		return slices.Equal(dresp.Topics[0].Partitions[1].OfflineReplicas, []int32{int32(down)})
	}, 20*time.Second, 50*time.Millisecond)
}
