package kafka

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shortSessions is a Backend whose group coordinator takes short
// sessions (and keeps commits in memory).
type shortSessions struct {
	*log.Broker
	groups *group.Coordinator
}

func (b shortSessions) GroupCoordinator() *group.Coordinator { return b.groups }

// startGroups serves a broker whose coordinator takes short sessions.
func startGroups(t *testing.T, opts ...logtest.Option) (*Server, shortSessions) {
	t.Helper()
	b := logtest.New(t, append([]logtest.Option{logtest.InMemory()}, opts...)...)
	gc, err := group.New(group.Config{Partitions: func(t string) (int, error) { return b.Partitions(context.Background(), t) }, MinSessionTimeout: 10 * time.Millisecond, MaxSessionTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, gc.Close()) })
	s, err := Listen("127.0.0.1:0", shortSessions{b, gc}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, shortSessions{b, gc}
}

func joinReq(v int16, groupID, member string, session, rebalance time.Duration, topics ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(v)
	req.Group, req.MemberID, req.ProtocolType = groupID, member, assign.ProtocolType
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = assign.RangeProtocol, assign.EncodeSubscription(topics)
	req.Protocols = append(req.Protocols, p)
	return req
}

func syncReq(v int16, groupID, member string, gen int32, assignments map[string][]log.TopicPartition) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(v)
	req.Group, req.MemberID, req.Generation = groupID, member, gen
	ids := make([]string, 0, len(assignments))
	for id := range assignments {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, assign.EncodeAssignment(assignments[id])
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	return req
}

func heartbeatReq(v int16, groupID, member string, gen int32) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(v)
	req.Group, req.MemberID, req.Generation = groupID, member, gen
	return req
}

func commitReq(v int16, groupID, member string, gen int32, topic string, offsets ...int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(v)
	req.Group, req.MemberID, req.Generation = groupID, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for i, off := range offsets {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = int32(i), off
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestFindCoordinatorEveryVersion(t *testing.T) {
	s, _ := startGroups(t)
	c := dial(t, s.Addr())
	host, port := s.advertised()
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorKey = "g"
		req.CoordinatorKeys = []string{"g", "h"}
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			require.Equal(t, errNone, resp.ErrorCode, "v%d", v)
			require.Equal(t, [3]any{int32(1), host, port}, [3]any{resp.NodeID, resp.Host, resp.Port}, "v%d", v)
			continue
		}
		require.Len(t, resp.Coordinators, 2, "v%d", v)
		for i, k := range []string{"g", "h"} {
			rc := resp.Coordinators[i]
			require.Equal(t, k, rc.Key)
			require.Equal(t, errNone, rc.ErrorCode)
			require.Equal(t, [3]any{int32(1), host, port}, [3]any{rc.NodeID, rc.Host, rc.Port})
		}
	}
	// Transactional ids are coordinated here too (txn_test.go).
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(4)
	req.CoordinatorType = 1
	req.CoordinatorKeys = []string{"txn"}
	resp := c.do(req).(*kmsg.FindCoordinatorResponse)
	require.Equal(t, errNone, resp.Coordinators[0].ErrorCode)
	require.Equal(t, [3]any{int32(1), host, port}, [3]any{resp.Coordinators[0].NodeID, resp.Coordinators[0].Host, resp.Coordinators[0].Port})
}

// TestGroupLifecycle runs Kafka's classic protocol over the wire, as a
// Kafka consumer does: two members, a rebalance, commits, the admin APIs.
func TestGroupLifecycle(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 4))
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	const g = "g"
	session, rebalance := 10*time.Second, 10*time.Second

	// KIP-394: a first join of v4+ is told its member id.
	j := c1.do(joinReq(5, g, "", session, rebalance, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errMemberIDRequired, j.ErrorCode)
	m1 := j.MemberID
	require.NotEmpty(t, m1)
	j = c1.do(joinReq(7, g, m1, session, rebalance, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)
	require.Equal(t, m1, j.LeaderID)
	require.Equal(t, int32(1), j.Generation)
	require.Equal(t, assign.ProtocolType, *j.ProtocolType)
	require.Equal(t, assign.RangeProtocol, *j.Protocol)
	require.Len(t, j.Members, 1)
	all := []log.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 2}, {Topic: "t", Partition: 3}}
	sr := c1.do(syncReq(5, g, m1, 1, map[string][]log.TopicPartition{m1: all})).(*kmsg.SyncGroupResponse)
	require.Equal(t, errNone, sr.ErrorCode)
	got, err := assign.DecodeAssignment(sr.MemberAssignment)
	require.NoError(t, err)
	require.Equal(t, all, got)
	require.Equal(t, errNone, c1.do(heartbeatReq(4, g, m1, 1)).(*kmsg.HeartbeatResponse).ErrorCode)
	require.Equal(t, errIllegalGeneration, c1.do(heartbeatReq(0, g, m1, 7)).(*kmsg.HeartbeatResponse).ErrorCode)
	require.Equal(t, errUnknownMemberID, c1.do(heartbeatReq(2, g, "nobody", 1)).(*kmsg.HeartbeatResponse).ErrorCode)

	// Commits of the member, in its generation.
	cr := c1.do(commitReq(8, g, m1, 1, "t", 10, 20)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errNone, cr.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, errNone, cr.Topics[0].Partitions[1].ErrorCode)
	cr = c1.do(commitReq(3, g, m1, 9, "t", 30)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errIllegalGeneration, cr.Topics[0].Partitions[0].ErrorCode)

	// A second member joins (v3: no member id round trip): the join waits
	// until the first rejoins, which it learns from its heartbeat.
	corr := c2.send(joinReq(3, g, "", session, rebalance, "t"))
	require.Eventually(t, func() bool {
		return c1.do(heartbeatReq(1, g, m1, 1)).(*kmsg.HeartbeatResponse).ErrorCode == errRebalanceInProgress
	}, 5*time.Second, time.Millisecond)
	// A member told to rejoin may commit first.
	cr = c1.do(commitReq(2, g, m1, 1, "t", 11)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errNone, cr.Topics[0].Partitions[0].ErrorCode)
	j = c1.do(joinReq(1, g, m1, session, rebalance, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)
	j2 := c2.recv(joinReq(3, g, "", session, rebalance, "t"), corr).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j2.ErrorCode)
	m2 := j2.MemberID
	require.Equal(t, int32(2), j.Generation)
	require.Equal(t, j.Generation, j2.Generation)
	require.Equal(t, j.LeaderID, j2.LeaderID)
	leader, lc, follower, fc := j, c1, j2, c2
	if j2.LeaderID == m2 {
		leader, lc, follower, fc = j2, c2, j, c1
	}
	require.Len(t, leader.Members, 2)
	require.Empty(t, follower.Members)
	// The follower's sync waits for the leader's.
	corr = fc.send(syncReq(3, g, follower.MemberID, 2, nil))
	split := map[string][]log.TopicPartition{leader.MemberID: all[:2], follower.MemberID: all[2:]}
	sr = lc.do(syncReq(3, g, leader.MemberID, 2, split)).(*kmsg.SyncGroupResponse)
	require.Equal(t, errNone, sr.ErrorCode)
	fs := fc.recv(syncReq(3, g, follower.MemberID, 2, nil), corr).(*kmsg.SyncGroupResponse)
	require.Equal(t, errNone, fs.ErrorCode)
	got, err = assign.DecodeAssignment(fs.MemberAssignment)
	require.NoError(t, err)
	require.Equal(t, all[2:], got)

	// OffsetFetch: one group (v1, v7), every offset (topics null, v5),
	// several groups (v8).
	for _, v := range []int16{1, 7} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.SetVersion(v)
		of.Group = g
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0, 1, 3}
		of.Topics = append(of.Topics, rt)
		resp := c1.do(of).(*kmsg.OffsetFetchResponse)
		require.Equal(t, errNone, resp.ErrorCode)
		var offs []int64
		for _, p := range resp.Topics[0].Partitions {
			offs = append(offs, p.Offset)
			require.Equal(t, errNone, p.ErrorCode)
		}
		require.Equal(t, []int64{11, 20, -1}, offs, "v%d", v)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(5)
	of.Group = g
	resp := c1.do(of).(*kmsg.OffsetFetchResponse)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 2)
	of = kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(8)
	for _, id := range []string{g, "other"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = id
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = "t", []int32{1}
		rg.Topics = append(rg.Topics, gt)
		of.Groups = append(of.Groups, rg)
	}
	resp = c1.do(of).(*kmsg.OffsetFetchResponse)
	require.Len(t, resp.Groups, 2)
	require.Equal(t, int64(20), resp.Groups[0].Topics[0].Partitions[0].Offset)
	require.Equal(t, int64(-1), resp.Groups[1].Topics[0].Partitions[0].Offset)

	// DescribeGroups, ListGroups (with a state filter).
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups = []string{g, "nothing"}
	dr := c1.do(dg).(*kmsg.DescribeGroupsResponse)
	require.Equal(t, "Stable", dr.Groups[0].State)
	require.Equal(t, assign.RangeProtocol, dr.Groups[0].Protocol)
	require.Len(t, dr.Groups[0].Members, 2)
	for _, m := range dr.Groups[0].Members {
		require.Equal(t, "test", m.ClientID)
		require.Equal(t, "/127.0.0.1", m.ClientHost)
		tps, err := assign.DecodeAssignment(m.MemberAssignment)
		require.NoError(t, err)
		require.Equal(t, split[m.MemberID], tps)
	}
	require.Equal(t, "Dead", dr.Groups[1].State)
	require.Equal(t, errNone, dr.Groups[1].ErrorCode)
	dg.SetVersion(6)
	require.Equal(t, errGroupIDNotFound, c1.do(dg).(*kmsg.DescribeGroupsResponse).Groups[1].ErrorCode)

	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(4)
	lg.StatesFilter = []string{"stable"}
	lr := c1.do(lg).(*kmsg.ListGroupsResponse)
	require.Len(t, lr.Groups, 1)
	require.Equal(t, g, lr.Groups[0].Group)
	require.Equal(t, "consumer", lr.Groups[0].ProtocolType)
	lg.StatesFilter = []string{"Empty"}
	require.Empty(t, c1.do(lg).(*kmsg.ListGroupsResponse).Groups)

	// DeleteGroups: not while it has members.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.SetVersion(2)
	del.Groups = []string{g, "nothing"}
	delr := c1.do(del).(*kmsg.DeleteGroupsResponse)
	require.Equal(t, errNonEmptyGroup, delr.Groups[0].ErrorCode)
	require.Equal(t, errGroupIDNotFound, delr.Groups[1].ErrorCode)

	// LeaveGroup: v0 one member, v3 a batch.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.SetVersion(0)
	lv.Group, lv.MemberID = g, m1
	require.Equal(t, errNone, c1.do(lv).(*kmsg.LeaveGroupResponse).ErrorCode)
	lv = kmsg.NewPtrLeaveGroupRequest()
	lv.SetVersion(3)
	lv.Group = g
	for _, id := range []string{m2, "nobody"} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		lv.Members = append(lv.Members, m)
	}
	lvr := c2.do(lv).(*kmsg.LeaveGroupResponse)
	require.Equal(t, errNone, lvr.ErrorCode)
	require.Equal(t, errNone, lvr.Members[0].ErrorCode)
	require.Equal(t, errUnknownMemberID, lvr.Members[1].ErrorCode)

	// Empty now: deleted with its offsets.
	lg.StatesFilter = []string{"Empty"}
	require.Len(t, c1.do(lg).(*kmsg.ListGroupsResponse).Groups, 1)
	del.Groups = []string{g}
	require.Equal(t, errNone, c1.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode)
	of = kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(5)
	of.Group = g
	require.Empty(t, c1.do(of).(*kmsg.OffsetFetchResponse).Topics)
}

// A group without members takes commits from a simple consumer (member
// "" and generation -1, as Kafka's assign() consumers commit); a topic the
// broker lacks gets UNKNOWN_TOPIC_OR_PARTITION and the rest is committed.
func TestSimpleConsumerCommits(t *testing.T) {
	s, b := startGroups(t, logtest.Topic("t", 2))
	c := dial(t, s.Addr())
	for _, v := range []int16{0, 1, 5, 9} {
		req := commitReq(v, "simple", "", -1, "t", int64(v)+1, int64(v)+2)
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "missing"
		rt.Partitions = append(rt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.OffsetCommitResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		require.Equal(t, errNone, resp.Topics[0].Partitions[1].ErrorCode, "v%d", v)
		require.Equal(t, errUnknownTopicOrPartition, resp.Topics[1].Partitions[0].ErrorCode, "v%d", v)
		got := b.GroupCoordinator().Committed("simple", nil)
		require.Equal(t, map[log.TopicPartition]int64{{Topic: "t", Partition: 0}: int64(v) + 1, {Topic: "t", Partition: 1}: int64(v) + 2}, got)
	}
	// A non-member while the group has members is refused.
	j := c.do(joinReq(3, "simple", "", time.Second, time.Second, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)
	resp := c.do(commitReq(5, "simple", "", -1, "t", 100)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errUnknownMemberID, resp.Topics[0].Partitions[0].ErrorCode)
}

// A JoinGroup that waits for a rebalance holds back the responses behind it
// on its connection (Kafka's ordering rule), not their handling: a member of
// another group heartbeating on that connection keeps its session, and
// every response comes, in order, once the join completes.
func TestHeartbeatPipelinedBehindJoin(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 1))
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	long := 10 * time.Second
	ja := c1.do(joinReq(3, "a", "", long, long, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, ja.ErrorCode)
	require.Equal(t, errNone, c1.do(syncReq(3, "a", ja.MemberID, ja.Generation, nil)).(*kmsg.SyncGroupResponse).ErrorCode)
	const session = time.Second
	jb := c1.do(joinReq(3, "b", "", session, session, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, jb.ErrorCode)
	require.Equal(t, errNone, c1.do(syncReq(3, "b", jb.MemberID, jb.Generation, nil)).(*kmsg.SyncGroupResponse).ErrorCode)

	// On c2: a join of group a that waits for a's member to rejoin, then
	// heartbeats of group b's member for two of its session timeouts.
	join := joinReq(3, "a", "", long, long, "t")
	joinCorr := c2.send(join)
	hb := heartbeatReq(3, "b", jb.MemberID, jb.Generation)
	var corrs []int32
	tick := time.NewTicker(session / 5)
	for end := time.Now().Add(2 * session); time.Now().Before(end); <-tick.C {
		corrs = append(corrs, c2.send(hb))
	}
	tick.Stop()
	// a's member rejoins: the rebalance completes.
	require.Equal(t, errNone, c1.do(joinReq(3, "a", ja.MemberID, long, long, "t")).(*kmsg.JoinGroupResponse).ErrorCode)
	require.Equal(t, errNone, c2.recv(join, joinCorr).(*kmsg.JoinGroupResponse).ErrorCode)
	for _, corr := range corrs {
		require.Equal(t, errNone, c2.recv(hb, corr).(*kmsg.HeartbeatResponse).ErrorCode)
	}
	require.Equal(t, errNone, c1.do(hb).(*kmsg.HeartbeatResponse).ErrorCode, "b's member is alive")
}

// Static members (KIP-345) leave by instance id (LeaveGroup v3+).
func TestLeaveGroupByInstanceID(t *testing.T) {
	s, b := startGroups(t, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	req := joinReq(5, "g", "", time.Second, time.Second, "t")
	req.InstanceID = kmsg.StringPtr("i1")
	// A static member is not asked for a known member id (as in Kafka).
	j := c.do(req).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.SetVersion(5)
	lv.Group = "g"
	for _, m := range []struct{ member, instance string }{{"other-id", "i1"}, {"", "i9"}, {"", "i1"}} {
		rm := kmsg.NewLeaveGroupRequestMember()
		rm.MemberID, rm.InstanceID = m.member, kmsg.StringPtr(m.instance)
		lv.Members = append(lv.Members, rm)
	}
	resp := c.do(lv).(*kmsg.LeaveGroupResponse)
	require.Equal(t, []int16{errFencedInstanceID, errUnknownMemberID, errNone},
		[]int16{resp.Members[0].ErrorCode, resp.Members[1].ErrorCode, resp.Members[2].ErrorCode})
	d, _ := b.GroupCoordinator().Describe("g")
	require.Empty(t, d.Members)
}

// A JoinGroup without protocols is not Kafka's protocol.
func TestJoinGroupErrors(t *testing.T) {
	s, _ := startGroups(t)
	c := dial(t, s.Addr())
	req := joinReq(3, "g", "", time.Second, time.Second)
	req.Protocols = nil
	require.Equal(t, errInconsistentGroupProtocol, c.do(req).(*kmsg.JoinGroupResponse).ErrorCode)
	req = joinReq(3, "g", "", time.Millisecond, time.Second)
	require.Equal(t, errInvalidSessionTimeout, c.do(req).(*kmsg.JoinGroupResponse).ErrorCode)
	req = joinReq(3, "", "", time.Second, time.Second)
	require.Equal(t, errInvalidGroupID, c.do(req).(*kmsg.JoinGroupResponse).ErrorCode)
	req = joinReq(3, "g", "unknown", time.Second, time.Second)
	require.Equal(t, errUnknownMemberID, c.do(req).(*kmsg.JoinGroupResponse).ErrorCode)
	j := c.do(joinReq(3, "g", "", time.Second, time.Second, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)
	other := joinReq(3, "g", "", time.Second, time.Second, "t")
	other.ProtocolType = "connect"
	require.Equal(t, errInconsistentGroupProtocol, c.do(other).(*kmsg.JoinGroupResponse).ErrorCode)
	sr := syncReq(5, "g", j.MemberID, j.Generation, nil)
	sr.Protocol = kmsg.StringPtr("roundrobin")
	require.Equal(t, errInconsistentGroupProtocol, c.do(sr).(*kmsg.SyncGroupResponse).ErrorCode)
}

// A static member replaced by a newer instance (same instance id, new
// member id) is fenced: its heartbeats, syncs and commits get
// FENCED_INSTANCE_ID (KIP-345).
func TestStaticMemberFenced(t *testing.T) {
	s, _ := startGroups(t, logtest.Topic("t", 1))
	c := dial(t, s.Addr())
	join := func() *kmsg.JoinGroupResponse {
		req := joinReq(5, "g", "", 10*time.Second, 10*time.Second, "t")
		req.InstanceID = kmsg.StringPtr("i1")
		return c.do(req).(*kmsg.JoinGroupResponse)
	}
	old := join()
	require.Equal(t, errNone, old.ErrorCode)
	sr := syncReq(3, "g", old.MemberID, old.Generation, map[string][]log.TopicPartition{old.MemberID: {{Topic: "t"}}})
	sr.InstanceID = kmsg.StringPtr("i1")
	require.Equal(t, errNone, c.do(sr).(*kmsg.SyncGroupResponse).ErrorCode)
	now := join() // the instance restarted: a new member id in its place
	require.Equal(t, errNone, now.ErrorCode)
	require.NotEqual(t, old.MemberID, now.MemberID)

	hb := heartbeatReq(3, "g", old.MemberID, old.Generation)
	hb.InstanceID = kmsg.StringPtr("i1")
	require.Equal(t, errFencedInstanceID, c.do(hb).(*kmsg.HeartbeatResponse).ErrorCode)
	require.Equal(t, errFencedInstanceID, c.do(sr).(*kmsg.SyncGroupResponse).ErrorCode)
	cr := commitReq(7, "g", old.MemberID, old.Generation, "t", 1)
	cr.InstanceID = kmsg.StringPtr("i1")
	require.Equal(t, errFencedInstanceID, c.do(cr).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	hb = heartbeatReq(3, "g", now.MemberID, now.Generation)
	hb.InstanceID = kmsg.StringPtr("i1")
	require.Equal(t, errNone, c.do(hb).(*kmsg.HeartbeatResponse).ErrorCode)
}

// Without a group coordinator the group APIs are not advertised (nor
// served).
func TestGroupAPIsNeedACoordinator(t *testing.T) {
	b := logtest.New(t, logtest.InMemory())
	s, err := Listen("127.0.0.1:0", shortSessions{b, nil}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c := dial(t, s.Addr())
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	keys := map[int16]bool{}
	for _, k := range c.do(req).(*kmsg.ApiVersionsResponse).ApiKeys {
		keys[k.ApiKey] = true
	}
	require.True(t, keys[fetchKey])
	for _, k := range []int16{findCoordinatorKey, joinGroupKey, offsetCommitKey, offsetFetchKey, listGroupsKey, deleteGroupsKey} {
		require.False(t, keys[k], kmsg.NameForKey(k))
	}
	c.send(heartbeatReq(0, "g", "m", 1))
	c.closed()
}

// Close answers a JoinGroup waiting for its rebalance at once
// (COORDINATOR_NOT_AVAILABLE: the client looks for the coordinator
// again) and ends its goroutines.
func TestCloseEndsPendingJoin(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 1))
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	long := time.Minute
	j := c1.do(joinReq(3, "g", "", long, long, "t")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)
	join := joinReq(3, "g", "", long, long, "t")
	corr := c2.send(join) // waits for the first member to rejoin
	require.Eventually(t, func() bool {
		return c1.do(heartbeatReq(1, "g", j.MemberID, j.Generation)).(*kmsg.HeartbeatResponse).ErrorCode == errRebalanceInProgress
	}, 5*time.Second, time.Millisecond)
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, errCoordinatorNotAvailable, c2.recv(join, corr).(*kmsg.JoinGroupResponse).ErrorCode)
}
