package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// A member's coordinator of a group stops answering as soon as the
// member's replica of the group's partition of __consumer_offsets stops
// leading, not once the whole image that moved the leadership is applied:
// in between, the old coordinator and the new leader's both answered the
// group's Joins and Heartbeats — two generations at once, members one of
// them did not know (kgo's TestGroupETL against three members, with the
// coordinators moving, failed on UNKNOWN_MEMBER_ID).
func TestCoordinatorStopsWithItsReplicaLeadership(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createOffsetsTopic(t, c)
	coord, g := 0, ""
	for id, gid := range groupsOn(t, c) {
		coord, g = id, gid
		break
	}
	b := replica.KafkaBackend(c.member(coord))
	var gc *group.Coordinator
	for gc == nil {
		gc, _, _ = b.CoordinatorFor(ctx, g)
		if gc == nil {
			select {
			case <-ctx.Done():
				t.Fatalf("no coordinator of %s on member %d", g, coord)
			case <-time.After(10 * time.Millisecond): // the load, in the background
			}
		}
	}
	joined, err := gc.Join(ctx, group.JoinRequest{Group: g, ClientID: "c", Topics: []string{"t"},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
	require.NoError(t, err)

	other := coord%3 + 1
	require.True(t, replica.StepDownOffsetsPartition(c.member(coord), replica.GroupPartition(g, replica.DefaultOffsetsTopicPartitions), other))
	now, node, ok := b.CoordinatorFor(ctx, g)
	require.True(t, now == nil, "the coordinator of member %d answers after its replica stopped leading", coord)
	require.True(t, ok)
	require.Equal(t, int32(coord), node, "the image is not applied yet: the server answers COORDINATOR_LOAD_IN_PROGRESS and the client asks again")
	require.ErrorIs(t, c.member(coord).Heartbeat(shortCtx(t), g, joined.MemberID, joined.Generation), context.DeadlineExceeded)
}

// shortCtx is a context that ends soon: for a group call that a member
// keeps retrying while no coordinator answers.
func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}
