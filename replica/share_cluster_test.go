package replica_test

import (
	"context"
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
