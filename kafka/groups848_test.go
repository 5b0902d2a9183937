package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log/logtest"
)

func cgHeartbeatReq(v int16, g, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(v)
	req.Group, req.MemberID, req.MemberEpoch = g, member, epoch
	req.RebalanceTimeoutMillis = -1
	return req
}

func owned(assignment *kmsg.ConsumerGroupHeartbeatResponseAssignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if assignment == nil {
		return out
	}
	for _, t := range assignment.Topics {
		out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
	}
	return out
}

func countAssigned(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) int {
	n := 0
	for _, t := range a.Topics {
		n += len(t.Partitions)
	}
	return n
}

// TestConsumerGroupHeartbeat: two members of a KIP-848 group over the
// wire, topics by id, revocation before assignment, describe, leave.
func TestConsumerGroupHeartbeat(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 4))
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())

	join := func(v int16, member string) *kmsg.ConsumerGroupHeartbeatRequest {
		req := cgHeartbeatReq(v, "g", member, 0)
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return req
	}
	// v0: the coordinator makes the member id.
	r1 := c1.do(join(0, "")).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, r1.ErrorCode)
	require.NotEmpty(t, *r1.MemberID)
	require.Equal(t, int32(1), r1.MemberEpoch)
	require.Equal(t, int32(5000), r1.HeartbeatIntervalMillis)
	require.Equal(t, topicID("t"), r1.Assignment.Topics[0].TopicID)
	require.Equal(t, 4, countAssigned(r1.Assignment))
	m1 := *r1.MemberID

	// v1: the member makes it; an empty one is refused.
	require.Equal(t, errInvalidRequest, c2.do(join(1, "")).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	r2 := c2.do(join(1, "m2")).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, r2.ErrorCode)
	require.Equal(t, int32(2), r2.MemberEpoch)
	require.Equal(t, 0, countAssigned(r2.Assignment), "m1 holds everything yet")

	// m1 is asked to revoke half; once it says it did, m2 gets them.
	hb := cgHeartbeatReq(1, "g", m1, 1)
	hb.Topics = owned(r1.Assignment)
	r1 = c1.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, r1.ErrorCode)
	require.Equal(t, int32(1), r1.MemberEpoch)
	require.Equal(t, 2, countAssigned(r1.Assignment))
	hb = cgHeartbeatReq(1, "g", m1, 1)
	hb.Topics = owned(r1.Assignment)
	r1 = c1.do(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, int32(2), r1.MemberEpoch)
	r2 = c2.do(cgHeartbeatReq(1, "g", "m2", 2)).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, r2.ErrorCode)
	require.Equal(t, 2, countAssigned(r2.Assignment))

	// Errors by code.
	require.Equal(t, errUnknownMemberID, c2.do(cgHeartbeatReq(1, "g", "nobody", 3)).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	r := c2.do(cgHeartbeatReq(1, "g", "m2", 9)).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, int16(110), r.ErrorCode) // FENCED_MEMBER_EPOCH
	require.NotNil(t, r.ErrorMessage)
	bad := join(1, "m3")
	bad.ServerAssignor = kmsg.StringPtr("sticky")
	require.Equal(t, int16(112), c2.do(bad).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode) // UNSUPPORTED_ASSIGNOR
	regex := join(1, "m3")
	regex.SubscribedTopicNames, regex.SubscribedTopicRegex = nil, kmsg.StringPtr("[")
	require.Equal(t, int16(128), c2.do(regex).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode) // INVALID_REGULAR_EXPRESSION

	// Commits carry the member epoch.
	cr := c2.do(commitReq(9, "g", "m2", 2, "t", 7)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errNone, cr.Topics[0].Partitions[0].ErrorCode)
	cr = c2.do(commitReq(9, "g", "m2", 1, "t", 8)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, int16(113), cr.Topics[0].Partitions[0].ErrorCode) // STALE_MEMBER_EPOCH

	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.SetVersion(1)
	d.Groups = []string{"g", "nope"}
	dr := c1.do(d).(*kmsg.ConsumerGroupDescribeResponse)
	require.Len(t, dr.Groups, 2)
	require.Equal(t, errNone, dr.Groups[0].ErrorCode)
	require.Equal(t, "Stable", dr.Groups[0].State)
	require.Equal(t, int32(2), dr.Groups[0].Epoch)
	require.Equal(t, "uniform", dr.Groups[0].AssignorName)
	require.Len(t, dr.Groups[0].Members, 2)
	require.Equal(t, "t", dr.Groups[0].Members[1].Assignment.TopicPartitions[0].Topic)
	require.Equal(t, int16(69), dr.Groups[1].ErrorCode) // GROUP_ID_NOT_FOUND

	lg := kmsg.NewPtrListGroupsRequest()
	lr := c1.do(lg).(*kmsg.ListGroupsResponse)
	require.Len(t, lr.Groups, 1)
	require.Equal(t, "consumer", lr.Groups[0].ProtocolType)

	// Leave.
	r = c2.do(cgHeartbeatReq(1, "g", "m2", -1)).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, r.ErrorCode)
	require.Equal(t, int32(-1), r.MemberEpoch)
}
