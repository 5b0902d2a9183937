package kafka

import (
	"fmt"
	"testing"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeTPReq(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsRequest {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, t := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// describedTP is a response as "topic/partition" per described partition
// and "topic:code" per topic error.
func describedTP(resp *kmsg.DescribeTopicPartitionsResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			out = append(out, fmt.Sprintf("%s:%d", *t.Topic, t.ErrorCode))
			continue
		}
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", *t.Topic, p.Partition))
		}
	}
	return out
}

func cursorOf(resp *kmsg.DescribeTopicPartitionsResponse) string {
	if resp.NextCursor == nil {
		return ""
	}
	return fmt.Sprintf("%s/%d", resp.NextCursor.Topic, resp.NextCursor.Partition)
}

func TestDescribeTopicPartitionsStandalone(t *testing.T) {
	s, _, _ := start(t, Config{NodeID: 4}, logtest.Topic("a", 3), logtest.Topic("b", 1), logtest.Topic("c", 2))
	c := dial(t, s.Addr())

	resp := c.do(describeTPReq(2000, nil)).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"a/0", "a/1", "a/2", "b/0", "c/0", "c/1"}, describedTP(resp))
	require.Nil(t, resp.NextCursor)
	p := resp.Topics[0].Partitions[1]
	require.Equal(t, int32(4), p.LeaderID)
	require.Equal(t, []int32{4}, p.Replicas)
	require.Equal(t, []int32{4}, p.ISR)
	require.Empty(t, p.EligibleLeaderReplicas)
	require.Empty(t, p.LastKnownELR)
	require.Empty(t, p.OfflineReplicas)
	require.Equal(t, topicID("a"), resp.Topics[0].TopicID)
	// No authorizer: every operation is allowed.
	require.Equal(t, c.authorizedOpsAll(), resp.Topics[0].AuthorizedOperations)

	// Named topics come back sorted; a missing one and a bad name say so.
	resp = c.do(describeTPReq(2000, nil, "c", "nope", "a", "bad/name")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"a/0", "a/1", "a/2", "bad/name:17", "c/0", "c/1", "nope:3"}, describedTP(resp))
	require.Equal(t, [16]byte{}, resp.Topics[1].TopicID)
}

func (c *testClient) authorizedOpsAll() int32 {
	var bits int32
	for _, op := range topicOps {
		bits |= 1 << op
	}
	return bits
}

// TestDescribeTopicPartitionsPages walks every topic a page at a time, as
// kafka-topics.sh --describe does, and checks the cursors Kafka gives.
func TestDescribeTopicPartitionsPages(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("a", 3), logtest.Topic("b", 1), logtest.Topic("c", 2))
	c := dial(t, s.Addr())
	for _, tc := range []struct {
		limit  int32
		pages  [][]string
		cursor []string
	}{
		{1, [][]string{{"a/0"}, {"a/1"}, {"a/2"}, {"b/0"}, {"c/0"}, {"c/1"}}, []string{"a/1", "a/2", "b/0", "c/0", "c/1", ""}},
		{2, [][]string{{"a/0", "a/1"}, {"a/2", "b/0"}, {"c/0", "c/1"}}, []string{"a/2", "c/0", ""}},
		// A page that ends with a topic: the cursor is the next topic's start.
		{4, [][]string{{"a/0", "a/1", "a/2", "b/0"}, {"c/0", "c/1"}}, []string{"c/0", ""}},
		// 0 and negative limits are 1 (Kafka's floor); above the broker's
		// cap, the cap.
		{0, [][]string{{"a/0"}, {"a/1"}, {"a/2"}, {"b/0"}, {"c/0"}, {"c/1"}}, []string{"a/1", "a/2", "b/0", "c/0", "c/1", ""}},
		{-5, [][]string{{"a/0"}, {"a/1"}, {"a/2"}, {"b/0"}, {"c/0"}, {"c/1"}}, []string{"a/1", "a/2", "b/0", "c/0", "c/1", ""}},
		{1 << 30, [][]string{{"a/0", "a/1", "a/2", "b/0", "c/0", "c/1"}}, []string{""}},
	} {
		var cur *kmsg.DescribeTopicPartitionsRequestCursor
		for i, want := range tc.pages {
			resp := c.do(describeTPReq(tc.limit, cur)).(*kmsg.DescribeTopicPartitionsResponse)
			require.Equal(t, want, describedTP(resp), "limit %d page %d", tc.limit, i)
			require.Equal(t, tc.cursor[i], cursorOf(resp), "limit %d page %d", tc.limit, i)
			if resp.NextCursor != nil {
				cur = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
			}
		}
	}
	// Named topics page the same way, and the cursor must name one of them.
	resp := c.do(describeTPReq(2, nil, "c", "a")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"a/0", "a/1"}, describedTP(resp))
	require.Equal(t, "a/2", cursorOf(resp))
	resp = c.do(describeTPReq(2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "a", Partition: 2}, "c", "a")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"a/2", "c/0"}, describedTP(resp))
	require.Equal(t, "c/1", cursorOf(resp))
	// A cursor past a topic's last partition: nothing of it.
	resp = c.do(describeTPReq(10, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "a", Partition: 7})).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"b/0", "c/0", "c/1"}, describedTP(resp))

	// Bad cursors: INVALID_REQUEST on every topic asked for.
	resp = c.do(describeTPReq(2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b"}, "c", "a")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"c:42", "a:42"}, describedTP(resp))
	resp = c.do(describeTPReq(2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "a", Partition: -1}, "a")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"a:42"}, describedTP(resp))
}

// clusterStates is a ClusterBackend of brokers 1 and 2 (3 is down) whose
// partitions have the states given.
type clusterStates struct {
	capsBase
	states map[string][]partState
}

type partState struct {
	leader, epoch int32
	replicas, isr []int32
}

func (clusterStates) ClusterBrokers() []ClusterBroker {
	return []ClusterBroker{{ID: 1, Host: "127.0.0.1", Port: 1}, {ID: 2, Host: "127.0.0.1", Port: 2}}
}
func (clusterStates) ControllerID() int32 { return 1 }
func (b clusterStates) PartitionState(topic string, i int) (int32, int32, []int32, []int32, bool) {
	ps := b.states[topic]
	if i >= len(ps) {
		return -1, -1, nil, nil, false
	}
	return ps[i].leader, ps[i].epoch, ps[i].replicas, ps[i].isr, true
}

func TestDescribeTopicPartitionsCluster(t *testing.T) {
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 3))
	backend := clusterStates{capsBase: capsBase{Backend: b}, states: map[string][]partState{"t": {
		{leader: 1, epoch: 4, replicas: []int32{1, 2, 3}, isr: []int32{1, 2}},
		{leader: -1, epoch: 9, replicas: []int32{3}, isr: []int32{3}},
		// partition 2 is not in the metadata
	}}}
	s, err := Listen("127.0.0.1:0", backend, Config{NodeID: 1})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	resp := dial(t, s.Addr()).do(describeTPReq(100, nil, "t")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Len(t, resp.Topics, 1)
	ps := resp.Topics[0].Partitions
	require.Len(t, ps, 3)
	require.Equal(t, int32(1), ps[0].LeaderID)
	require.Equal(t, int32(4), ps[0].LeaderEpoch)
	require.Equal(t, []int32{1, 2, 3}, ps[0].Replicas)
	require.Equal(t, []int32{1, 2}, ps[0].ISR)
	require.Equal(t, []int32{3}, ps[0].OfflineReplicas)
	require.Equal(t, int32(-1), ps[1].LeaderID)
	require.Equal(t, int32(9), ps[1].LeaderEpoch)
	require.Equal(t, []int32{3}, ps[1].OfflineReplicas)
	require.Equal(t, errUnknownTopicOrPartition, ps[2].ErrorCode)
	require.Equal(t, int32(-1), ps[2].LeaderID)
}

func TestAuthorizeDescribeTopicPartitions(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpDescribe, acl.Topic("secret")))
	// Asked for all: only what alice may describe, and the page is cut
	// after leaving the others out.
	resp := a.as("alice").do(describeTPReq(1, nil)).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"secret/0"}, describedTP(resp))
	require.Nil(t, resp.NextCursor)
	ops := resp.Topics[0].AuthorizedOperations
	require.NotZero(t, ops&(1<<acl.OpDescribe))
	require.Zero(t, ops&(1<<acl.OpWrite))
	// By name: refused, with no id.
	resp = a.as("alice").do(describeTPReq(10, nil, "orders", "secret")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"secret/0", "orders:29"}, describedTP(resp))
	require.Equal(t, [16]byte{}, resp.Topics[1].TopicID)
	// bob sees nothing, and is told nothing about what exists.
	resp = a.as("bob").do(describeTPReq(10, nil, "orders", "nope")).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"nope:29", "orders:29"}, describedTP(resp))
	resp = a.as("admin").do(describeTPReq(10, nil)).(*kmsg.DescribeTopicPartitionsResponse)
	require.Equal(t, []string{"orders/0", "orders/1", "secret/0"}, describedTP(resp))
}
