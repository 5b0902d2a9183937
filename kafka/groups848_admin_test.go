package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log/logtest"
)

// TestGroupTypesOverTheWire: a classic group (a simple consumer's commit)
// and a KIP-848 consumer group side by side. ListGroups gives each its
// type (v5, KIP-1043) and filters by type and by the consumer group's
// states; DescribeGroups answers the consumer group as Kafka does: Dead,
// and from v6 GROUP_ID_NOT_FOUND "is not a classic group."
func TestGroupTypesOverTheWire(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 2))
	c := dial(t, s.Addr())
	require.Equal(t, errNone, c.do(commitReq(9, "old", "", -1, "t", 4)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	join := cgHeartbeatReq(1, "new", "m1", 0)
	join.RebalanceTimeoutMillis = 30000
	join.SubscribedTopicNames = []string{"t"}
	join.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hr := c.do(join).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, hr.ErrorCode)

	list := func(v int16, states, types []string) map[string]kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.SetVersion(v)
		req.StatesFilter, req.TypesFilter = states, types
		resp := c.do(req).(*kmsg.ListGroupsResponse)
		require.Equal(t, errNone, resp.ErrorCode)
		out := map[string]kmsg.ListGroupsResponseGroup{}
		for _, g := range resp.Groups {
			out[g.Group] = g
		}
		return out
	}
	all := list(5, nil, nil)
	require.Len(t, all, 2)
	require.Equal(t, "classic", all["old"].GroupType)
	require.Equal(t, "Empty", all["old"].GroupState)
	require.Equal(t, "consumer", all["new"].GroupType)
	require.Equal(t, "consumer", all["new"].ProtocolType)
	require.Equal(t, "Stable", all["new"].GroupState)
	require.Contains(t, list(5, nil, []string{"Consumer"}), "new")
	require.Len(t, list(5, nil, []string{"Consumer"}), 1)
	require.Contains(t, list(5, nil, []string{"classic"}), "old")
	require.Len(t, list(5, nil, []string{"classic"}), 1)
	require.Empty(t, list(5, nil, []string{"share"}))
	require.Len(t, list(5, []string{" stable"}, []string{"consumer", "classic"}), 1)
	require.Contains(t, list(4, []string{"Stable"}, nil), "new")
	require.Len(t, list(4, []string{"Empty", "Stable"}, nil), 2)
	require.Empty(t, list(4, []string{"Reconciling", "Assigning"}, nil))

	describe := func(v int16, ids ...string) []kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.SetVersion(v)
		req.Groups = ids
		return c.do(req).(*kmsg.DescribeGroupsResponse).Groups
	}
	dg := describe(6, "new", "old", "nope")
	require.Len(t, dg, 3)
	require.Equal(t, errGroupIDNotFound, dg[0].ErrorCode)
	require.Equal(t, "Group new is not a classic group.", *dg[0].ErrorMessage)
	require.Equal(t, "Dead", dg[0].State)
	require.Empty(t, dg[0].ProtocolType)
	require.Empty(t, dg[0].Members)
	require.Equal(t, errNone, dg[1].ErrorCode)
	require.Equal(t, "Empty", dg[1].State)
	require.Equal(t, errGroupIDNotFound, dg[2].ErrorCode)
	require.Equal(t, "Group nope not found.", *dg[2].ErrorMessage)
	dg = describe(5, "new")
	require.Equal(t, errNone, dg[0].ErrorCode, "before v6 no error: Dead says it")
	require.Equal(t, "Dead", dg[0].State)
	require.Empty(t, dg[0].Members)
}

// TestOffsetFetchMemberEpoch: OffsetFetch v9 of a consumer group checks
// the member and its epoch as Kafka does (the whole group answered
// STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID, no topics); an admin's fetch
// (no member, epoch -1) and a classic group's are not checked.
func TestOffsetFetchMemberEpoch(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	require.Equal(t, errNone, c.do(commitReq(9, "old", "", -1, "t", 4)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	join := cgHeartbeatReq(1, "new", "m1", 0)
	join.RebalanceTimeoutMillis = 30000
	join.SubscribedTopicNames = []string{"t"}
	join.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hr := c.do(join).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, hr.ErrorCode)
	epoch := hr.MemberEpoch
	require.Equal(t, errNone, c.do(commitReq(9, "new", "m1", epoch, "t", 7)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)

	fetch := func(v int16, g string, member *string, epoch int32) kmsg.OffsetFetchResponseGroup {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = g, member, epoch
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp := c.do(req).(*kmsg.OffsetFetchResponse)
		require.Len(t, resp.Groups, 1)
		return resp.Groups[0]
	}
	offset := func(g kmsg.OffsetFetchResponseGroup) int64 {
		require.Equal(t, errNone, g.ErrorCode)
		return g.Topics[0].Partitions[0].Offset
	}
	require.Equal(t, int64(7), offset(fetch(9, "new", kmsg.StringPtr("m1"), epoch)))
	require.Equal(t, int64(7), offset(fetch(9, "new", nil, -1)), "an admin's fetch")
	require.Equal(t, int64(7), offset(fetch(8, "new", nil, -1)))

	stale := fetch(9, "new", kmsg.StringPtr("m1"), epoch+1)
	require.Equal(t, int16(113), stale.ErrorCode) // STALE_MEMBER_EPOCH
	require.Empty(t, stale.Topics)
	unknown := fetch(9, "new", kmsg.StringPtr("stranger"), epoch)
	require.Equal(t, errUnknownMemberID, unknown.ErrorCode)
	require.Empty(t, unknown.Topics)

	require.Equal(t, int64(4), offset(fetch(9, "old", kmsg.StringPtr("whoever"), 3)), "a classic group is not checked")
}
