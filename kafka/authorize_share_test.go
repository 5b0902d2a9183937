package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/acl"
)

// TestAuthorizeShareGroupAPIs: each share-group API refuses a principal
// without the ACL Kafka checks (Read on the group for the heartbeat, the
// fetch, the acknowledgement and altering offsets; Delete on it for
// deleting offsets; Describe for describing; on topics Describe for the
// subscription, Read for the rest), changing nothing, and lets one with it
// through.
func TestAuthorizeShareGroupAPIs(t *testing.T) {
	a := startAuthz(t, Config{})
	bob, alice := a.as("bob"), a.as("alice")
	shares := a.b.ShareCoordinator()
	heartbeat := func(member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatRequest {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.SetVersion(1)
		req.GroupID, req.MemberID, req.MemberEpoch = "sg", member, epoch
		req.SubscribedTopicNames = topics
		return req
	}
	fetch := func(member string, topics ...string) *kmsg.ShareFetchRequest {
		req := kmsg.NewPtrShareFetchRequest()
		req.SetVersion(2)
		req.GroupID, req.MemberID = kmsg.StringPtr("sg"), kmsg.StringPtr(member)
		req.MaxRecords, req.BatchSize, req.MaxBytes = 10, 10, 1<<20
		for _, name := range topics {
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = topicID(name)
			rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
		}
		return req
	}

	// Without Read on the group: refused, and no group is made.
	r := bob.do(heartbeat("b1", 0, "orders")).(*kmsg.ShareGroupHeartbeatResponse)
	require.Equal(t, errGroupAuthorizationFailed, r.ErrorCode)
	require.False(t, shares.Is("sg"), "a refused heartbeat made the group")
	require.Equal(t, errGroupAuthorizationFailed, bob.do(fetch("b1", "orders")).(*kmsg.ShareFetchResponse).ErrorCode)
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.SetVersion(2)
	ack.GroupID, ack.MemberID = kmsg.StringPtr("sg"), kmsg.StringPtr("b1")
	require.Equal(t, errGroupAuthorizationFailed, bob.do(ack).(*kmsg.ShareAcknowledgeResponse).ErrorCode)

	// Read on the group and on orders, not on secret: subscribing to secret
	// is refused (Describe on it), and fetching it answers its partitions
	// TOPIC_AUTHORIZATION_FAILED while orders is served.
	a.grant(allowTo("alice", acl.OpRead, acl.Group("sg")), allowTo("alice", acl.OpRead, acl.Topic("orders")))
	r = alice.do(heartbeat("a1", 0, "orders", "secret")).(*kmsg.ShareGroupHeartbeatResponse)
	require.Equal(t, errTopicAuthorizationFailed, r.ErrorCode)
	require.False(t, shares.Is("sg"), "a refused heartbeat made the group")
	r = alice.do(heartbeat("a1", 0, "orders")).(*kmsg.ShareGroupHeartbeatResponse)
	require.Equal(t, errNone, r.ErrorCode)
	require.True(t, shares.Is("sg"))
	f := alice.do(fetch("a1", "orders", "secret")).(*kmsg.ShareFetchResponse)
	require.Equal(t, errNone, f.ErrorCode)
	codes := map[[16]byte]int16{}
	for _, rt := range f.Topics {
		for _, rp := range rt.Partitions {
			codes[rt.TopicID] = rp.ErrorCode
		}
	}
	require.Equal(t, map[[16]byte]int16{topicID("orders"): errNone, topicID("secret"): errTopicAuthorizationFailed}, codes)

	// Describing needs Describe on the group (bob has none; Read implies it
	// for alice).
	dg := kmsg.NewPtrShareGroupDescribeRequest()
	dg.SetVersion(1)
	dg.GroupIDs = []string{"sg"}
	require.Equal(t, errGroupAuthorizationFailed, bob.do(dg).(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode)
	g := alice.do(dg).(*kmsg.ShareGroupDescribeResponse).Groups[0]
	require.Equal(t, errNone, g.ErrorCode)
	require.Len(t, g.Members, 1)

	// Deleting offsets needs Delete on the group: alice's Read is not it.
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "sg"
	dt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	dt.Topic = "orders"
	del.Topics = append(del.Topics, dt)
	require.Equal(t, errGroupAuthorizationFailed, alice.do(del).(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode)
	require.Equal(t, errGroupAuthorizationFailed, bob.do(del).(*kmsg.DeleteShareGroupOffsetsResponse).ErrorCode)

	// Altering offsets needs Read on the group, then Read on each topic.
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "sg"
	at := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	at.Topic = "secret"
	at.Partitions = []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}
	alter.Topics = append(alter.Topics, at)
	require.Equal(t, errGroupAuthorizationFailed, bob.do(alter).(*kmsg.AlterShareGroupOffsetsResponse).ErrorCode)
	ar := alice.do(alter).(*kmsg.AlterShareGroupOffsetsResponse)
	require.Equal(t, errTopicAuthorizationFailed, ar.Topics[0].Partitions[0].ErrorCode)
	for tp := range shares.Offsets("sg") {
		require.NotEqual(t, "secret", tp.Topic, "a refused alteration changed secret's share-partition")
	}
}
