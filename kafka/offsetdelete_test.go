package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetDeleteReq asks to delete group's commits of "topic:partition"s.
func offsetDeleteReq(groupID string, tps map[string][]int32) *kmsg.OffsetDeleteRequest {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = groupID
	for _, topic := range []string{"a", "b", "nope", "orders", "secret"} {
		ps, ok := tps[topic]
		if !ok {
			continue
		}
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func offsetDeleteCodes(resp *kmsg.OffsetDeleteResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

func TestOffsetDelete(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("a", 2), logtest.Topic("b", 2))
	c := dial(t, s.Addr())
	gc := b.GroupCoordinator()
	committed := func(g string) map[log.TopicPartition]int64 { return gc.Committed(g, nil) }
	tp := func(topic string, p int) log.TopicPartition { return log.TopicPartition{Topic: topic, Partition: p} }

	resp := c.do(offsetDeleteReq("g", map[string][]int32{"a": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errGroupIDNotFound, resp.ErrorCode)
	require.Empty(t, resp.Topics)
	resp = c.do(offsetDeleteReq("", map[string][]int32{"a": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errInvalidGroupID, resp.ErrorCode)

	// An active consumer of a: its commits of a stay, b's go; unknown
	// partitions say so.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := gc.Join(ctx, group.JoinRequest{Group: "g", ClientID: "m", Topics: []string{"a"}, SessionTimeout: time.Minute, RebalanceTimeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, errNone, c.do(commitReq(8, "g", m.MemberID, m.Generation, "a", 5, 6)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, errNone, c.do(commitReq(8, "g", m.MemberID, m.Generation, "b", 7, 8)).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	resp = c.do(offsetDeleteReq("g", map[string][]int32{"a": {0}, "b": {0, 5, -1}, "nope": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errNone, resp.ErrorCode)
	require.Equal(t, map[string]int16{"a/0": errGroupSubscribedToTopic, "b/0": errNone, "b/5": errUnknownTopicOrPartition,
		"b/-1": errUnknownTopicOrPartition, "nope/0": errUnknownTopicOrPartition}, offsetDeleteCodes(resp))
	require.Equal(t, map[log.TopicPartition]int64{tp("a", 0): 5, tp("a", 1): 6, tp("b", 1): 8}, committed("g"))

	// Empty: every commit asked for goes.
	require.NoError(t, gc.Leave(ctx, "g", m.MemberID))
	resp = c.do(offsetDeleteReq("g", map[string][]int32{"a": {0, 1}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, map[string]int16{"a/0": errNone, "a/1": errNone}, offsetDeleteCodes(resp))
	require.Equal(t, map[log.TopicPartition]int64{tp("b", 1): 8}, committed("g"))
}

// errGroupSubscribedToTopic is GROUP_SUBSCRIBED_TO_TOPIC.
const errGroupSubscribedToTopic = kerr.GroupSubscribedToTopic

func TestAuthorizeOffsetDelete(t *testing.T) {
	a := startAuthz(t, Config{})
	gc := a.b.GroupCoordinator()
	ctx := context.Background()
	orders0, secret0 := log.TopicPartition{Topic: "orders", Partition: 0}, log.TopicPartition{Topic: "secret", Partition: 0}
	require.NoError(t, gc.Commit(ctx, "g", "", -1, map[log.TopicPartition]int64{orders0: 1, secret0: 2}))
	a.grant(allowTo("alice", acl.OpDelete, acl.Group("g")), allowTo("alice", acl.OpRead, acl.Topic("orders")),
		allowTo("bob", acl.OpRead, acl.Topic("orders")), allowTo("bob", acl.OpRead, acl.Topic("secret")))
	// bob may read both topics but not delete from the group.
	resp := a.as("bob").do(offsetDeleteReq("g", map[string][]int32{"orders": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errGroupAuthorizationFailed, resp.ErrorCode)
	require.Empty(t, resp.Topics)
	// alice: orders goes, secret is refused and stays.
	resp = a.as("alice").do(offsetDeleteReq("g", map[string][]int32{"orders": {0}, "secret": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errNone, resp.ErrorCode)
	require.Equal(t, map[string]int16{"orders/0": errNone, "secret/0": errTopicAuthorizationFailed}, offsetDeleteCodes(resp))
	require.Equal(t, map[log.TopicPartition]int64{secret0: 2}, gc.Committed("g", nil))
	// Only refused topics: the group is still asked (its errors come first).
	resp = a.as("alice").do(offsetDeleteReq("nogroup", map[string][]int32{"secret": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errGroupAuthorizationFailed, resp.ErrorCode, "no Delete on nogroup")
	a.grant(allowTo("alice", acl.OpDelete, acl.Group("nogroup")))
	resp = a.as("alice").do(offsetDeleteReq("nogroup", map[string][]int32{"secret": {0}})).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, errGroupIDNotFound, resp.ErrorCode)
	require.Empty(t, resp.Topics)
}
