package kafka_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// A member serves AlterPartitionReassignments and
// ListPartitionReassignments at the versions Kafka 4 advertises (0-1 and
// 0): v1's AllowReplicationFactorChange false refuses a target that
// changes a partition's replica count (INVALID_REPLICATION_FACTOR, nothing
// recorded) and lets one of the same count move; v0 and v1 with true
// change it; the response says which was asked.
func TestAlterPartitionReassignmentsV1(t *testing.T) {
	leaktest.Check(t)
	members := startAdminCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{members[0].Addr()}})
	require.NoError(t, err)
	defer c.Close()

	vresp, err := c.Request(ctx, kmsg.NewPtrApiVersionsRequest(), 3)
	require.NoError(t, err)
	versions := map[int16][2]int16{}
	for _, k := range vresp.(*kmsg.ApiVersionsResponse).ApiKeys {
		versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	require.Equal(t, [2]int16{0, 1}, versions[45], "AlterPartitionReassignments")
	require.Equal(t, [2]int16{0, 0}, versions[46], "ListPartitionReassignments")

	require.NoError(t, c.CreateTopic(ctx, "rf", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 1}))
	orig := waitPartition(ctx, t, members, "rf", 0, func(s controller.PartitionState) bool { return s.Leader != controller.NoLeader })
	other := int32(6 - orig.Replicas[0] - orig.Replicas[1])
	alter := func(version int16, allow bool, replicas ...int32) *kmsg.AlterPartitionAssignmentsResponse {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.SetVersion(version)
		req.AllowReplicationFactorChange = allow
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = "rf"
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Replicas = replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.Request(ctx, req, version)
		require.NoError(t, err)
		r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		require.Zero(t, r.ErrorCode)
		require.Len(t, r.Topics, 1)
		require.Len(t, r.Topics[0].Partitions, 1)
		return r
	}
	cur := []int32{int32(orig.Replicas[0]), int32(orig.Replicas[1])}

	r := alter(1, false, append(slices.Clone(cur), other)...)
	require.Equal(t, int16(38), r.Topics[0].Partitions[0].ErrorCode, "INVALID_REPLICATION_FACTOR: %v", r.Topics[0].Partitions[0].ErrorMessage)
	require.False(t, r.AllowReplicationFactorChange)
	st, _ := members[0].Image().Partition("rf", 0)
	require.Equal(t, orig.Replicas, st.Replicas, "a refused target changed the assignment")

	// Same count, other brokers: moves.
	r = alter(1, false, other, cur[0])
	require.Zero(t, r.Topics[0].Partitions[0].ErrorCode, "%v", r.Topics[0].Partitions[0].ErrorMessage)
	waitPartition(ctx, t, members, "rf", 0, func(s controller.PartitionState) bool {
		return slices.Equal(s.Replicas, []int{int(other), int(cur[0])}) && len(s.AddingReplicas)+len(s.RemovingReplicas) == 0
	})
	// v1 allowing it, and v0 (which always does), change the count.
	r = alter(1, true, other, cur[0], cur[1])
	require.Zero(t, r.Topics[0].Partitions[0].ErrorCode, "%v", r.Topics[0].Partitions[0].ErrorMessage)
	require.True(t, r.AllowReplicationFactorChange)
	waitPartition(ctx, t, members, "rf", 0, func(s controller.PartitionState) bool {
		return len(s.Replicas) == 3 && len(s.AddingReplicas)+len(s.RemovingReplicas) == 0
	})
	r = alter(0, false, other)
	require.Zero(t, r.Topics[0].Partitions[0].ErrorCode, "%v", r.Topics[0].Partitions[0].ErrorMessage)
	waitPartition(ctx, t, members, "rf", 0, func(s controller.PartitionState) bool { return len(s.Replicas) == 1 })
}

// A member passes the controller's reassignment types to the server as
// they are: one definition (internal/reassign).
var (
	_ kafka.ReassignTarget = controller.ReassignTarget{}
	_ kafka.ReassignResult = controller.ReassignResult{}
	_ kafka.Reassignment   = controller.Reassignment{}
)
