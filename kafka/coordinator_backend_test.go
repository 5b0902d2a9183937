package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// routed is a cluster member's Backend as the server sees it: node 1 of
// two (node 7 is the other), coordinating the groups whose id starts with
// "mine", loading "loading", with no coordinator for "none"; node 7
// coordinates the rest.
type routed struct {
	*log.Broker
	gc *group.Coordinator
}

func (routed) GroupCoordinator() *group.Coordinator { return nil }

func (b routed) CoordinatorFor(_ context.Context, groupID string) (*group.Coordinator, int32, bool) {
	switch {
	case len(groupID) >= 4 && groupID[:4] == "mine":
		return b.gc, 1, true
	case groupID == "loading":
		return nil, 1, true
	case groupID == "none":
		return nil, 0, false
	}
	return nil, 7, true
}

func (b routed) Coordinators() []*group.Coordinator { return []*group.Coordinator{b.gc} }

func (routed) ClusterBrokers() []ClusterBroker {
	return []ClusterBroker{{ID: 1, Host: "127.0.0.1", Port: 1}, {ID: 7, Host: "10.0.0.7", Port: 9092}}
}
func (routed) ControllerID() int32 { return 7 }
func (routed) PartitionState(string, int) (int32, int32, []int32, []int32, bool) {
	return 1, 0, []int32{1}, []int32{1}, true
}

var (
	_ GroupRouter    = routed{}
	_ ClusterBackend = routed{}
)

func startRouted(t *testing.T) (*Server, routed) {
	t.Helper()
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 2))
	gc, err := group.New(group.Config{Partitions: func(t string) (int, error) { return b.Partitions(context.Background(), t) }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, gc.Close()) })
	s, err := Listen("127.0.0.1:0", routed{b, gc}, Config{NodeID: 1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, routed{b, gc}
}

// FindCoordinator answers, for each group, the node the GroupRouter names
// and its address from the cluster's brokers.
func TestFindCoordinatorRouted(t *testing.T) {
	leaktest.Check(t)
	s, _ := startRouted(t)
	c := dial(t, s.Addr())
	host, port := s.advertised()
	type answer struct {
		node int32
		host string
		port int32
		code int16
	}
	want := map[string]answer{
		"mine":    {1, host, port, errNone},
		"loading": {1, host, port, errNone},
		"other":   {7, "10.0.0.7", 9092, errNone},
		"none":    {-1, "", -1, errCoordinatorNotAvailable},
	}
	for key, w := range want {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(3)
		req.CoordinatorKey = key
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		require.Equal(t, w, answer{resp.NodeID, resp.Host, resp.Port, resp.ErrorCode}, "v3 %s", key)

		req = kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorKeys = []string{key}
		resp = c.do(req).(*kmsg.FindCoordinatorResponse)
		require.Len(t, resp.Coordinators, 1)
		rc := resp.Coordinators[0]
		require.Equal(t, w, answer{rc.NodeID, rc.Host, rc.Port, rc.ErrorCode}, "v4 %s", key)
	}
}

// The group APIs serve the groups this node coordinates and send the
// others away: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, which a Kafka client answers by finding the
// coordinator again.
func TestGroupAPIsRouted(t *testing.T) {
	leaktest.Check(t)
	s, b := startRouted(t)
	c := dial(t, s.Addr())

	// Served though the backend's GroupCoordinator is nil.
	av := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	served := map[int16]bool{}
	for _, k := range av.ApiKeys {
		served[k.ApiKey] = true
	}
	for _, key := range []int16{findCoordinatorKey, joinGroupKey, offsetCommitKey, offsetFetchKey, listGroupsKey} {
		require.True(t, served[key], "api %d", key)
	}

	// A group of this node's: joined, committed, fetched.
	join := c.do(joinReq(3, "mine", "", time.Minute, time.Minute, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, join.ErrorCode)
	sync := c.do(syncReq(3, "mine", join.MemberID, join.Generation, map[string][]log.TopicPartition{join.MemberID: {{Topic: "t", Partition: 0}}})).(*kmsg.SyncGroupResponse)
	require.Equal(t, errNone, sync.ErrorCode)
	commit := c.do(commitReq(2, "mine", join.MemberID, join.Generation, "t", 5)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errNone, commit.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, map[log.TopicPartition]int64{{Topic: "t", Partition: 0}: 5}, b.gc.Committed("mine", nil))

	codes := map[string]int16{"other": errNotCoordinator, "loading": errCoordinatorLoadInProgress, "none": errCoordinatorNotAvailable}
	for g, want := range codes {
		require.Equal(t, want, c.do(joinReq(3, g, "", time.Minute, time.Minute, "t")).(*kmsg.JoinGroupResponse).ErrorCode, "join %s", g)
		require.Equal(t, want, c.do(syncReq(3, g, "m", 1, nil)).(*kmsg.SyncGroupResponse).ErrorCode, "sync %s", g)
		require.Equal(t, want, c.do(heartbeatReq(3, g, "m", 1)).(*kmsg.HeartbeatResponse).ErrorCode, "heartbeat %s", g)
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.SetVersion(1)
		leave.Group, leave.MemberID = g, "m"
		require.Equal(t, want, c.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, "leave %s", g)
		cr := c.do(commitReq(2, g, "", -1, "t", 1, 2)).(*kmsg.OffsetCommitResponse)
		for _, p := range cr.Topics[0].Partitions {
			require.Equal(t, want, p.ErrorCode, "commit %s", g)
		}

		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.SetVersion(1) // the error on each partition
		fetch.Group = g
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{0, 1}
		fetch.Topics = append(fetch.Topics, ft)
		fr := c.do(fetch).(*kmsg.OffsetFetchResponse)
		require.Len(t, fr.Topics, 1)
		require.Len(t, fr.Topics[0].Partitions, 2)
		for _, p := range fr.Topics[0].Partitions {
			require.Equal(t, want, p.ErrorCode, "fetch v1 %s", g)
			require.EqualValues(t, -1, p.Offset)
		}
		fetch.SetVersion(8) // the group's error
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		fetch.Groups = append(fetch.Groups, rg)
		fr = c.do(fetch).(*kmsg.OffsetFetchResponse)
		require.Len(t, fr.Groups, 1)
		require.Equal(t, want, fr.Groups[0].ErrorCode, "fetch v8 %s", g)

		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{g}
		require.Equal(t, want, c.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode, "describe %s", g)
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Groups = []string{g}
		require.Equal(t, want, c.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, "delete %s", g)
	}
	require.Empty(t, b.gc.Committed("other", nil))

	// ListGroups lists the groups of this node's coordinators only.
	lg := c.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	require.Len(t, lg.Groups, 1)
	require.Equal(t, "mine", lg.Groups[0].Group)

	require.True(t, CoordinatorMoved(codeError(errNotCoordinator)))
	require.True(t, CoordinatorMoved(codeError(errCoordinatorLoadInProgress)))
	require.False(t, CoordinatorMoved(codeError(errUnknownMemberID)))
	require.False(t, CoordinatorMoved(nil))
}
