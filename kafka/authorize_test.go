package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authz is a server with SASL PLAIN users admin (a super user), alice and
// bob, ACLs enforced, and topics orders (2 partitions) and secret.
type authz struct {
	t *testing.T
	s *Server
	b *log.Broker
}

func startAuthz(t *testing.T, cfg Config) *authz {
	t.Helper()
	cfg.SASL = &SASLConfig{Plain: func(u string) (string, bool) {
		return u + "-pw", u == "admin" || u == "alice" || u == "bob"
	}}
	if cfg.Authorizer == nil {
		cfg.Authorizer = &acl.Config{SuperUsers: []string{acl.User("admin")}}
	}
	s, b, _ := start(t, cfg, logtest.Topic("orders", 2), logtest.Topic("secret", 1))
	return &authz{t: t, s: s, b: b}
}

// as is a connection logged in as user.
func (a *authz) as(user string) *testClient {
	a.t.Helper()
	c := dial(a.t, a.s.Addr())
	require.Equal(a.t, errNone, handshake(c, 1, "PLAIN").ErrorCode)
	require.Equal(a.t, errNone, authenticate(c, 2, []byte("\x00"+user+"\x00"+user+"-pw")).ErrorCode)
	return c
}

func (a *authz) grant(bs ...acl.Binding) {
	a.t.Helper()
	errs, err := a.b.CreateACLs(context.Background(), bs)
	require.NoError(a.t, err)
	for _, err := range errs {
		require.NoError(a.t, err)
	}
}

func allowTo(user string, op acl.Operation, r acl.Resource) acl.Binding {
	return acl.Binding{ResourceType: r.Type, ResourceName: r.Name, PatternType: acl.PatternLiteral,
		Principal: acl.User(user), Host: "*", Operation: op, Permission: acl.PermissionAllow}
}

func (a *authz) end(topic string, p int) int64 {
	a.t.Helper()
	off, err := a.b.ListOffset(context.Background(), log.TopicPartition{Topic: topic, Partition: p}, log.LatestOffset)
	require.NoError(a.t, err)
	return off
}

func TestAuthorizeProduce(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpWrite, acl.Topic("orders")))
	for i, v := range []int16{3, 9, 13} {
		resp := a.as("bob").do(produceReq(v, -1, "orders", 0, records("x"))).(*kmsg.ProduceResponse)
		require.Equal(t, errTopicAuthorizationFailed, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		require.Equal(t, int64(i), a.end("orders", 0))

		resp = a.as("alice").do(produceReq(v, -1, "orders", 0, records("x"))).(*kmsg.ProduceResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		resp = a.as("alice").do(produceReq(v, -1, "secret", 0, records("x"))).(*kmsg.ProduceResponse)
		require.Equal(t, errTopicAuthorizationFailed, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		require.Equal(t, int64(0), a.end("secret", 0))
	}
	require.Equal(t, int64(3), a.end("orders", 0))
	// Two topics, one refused: the other is written.
	req := produceReq(9, -1, "orders", 1, records("y"))
	req.Topics = append(req.Topics, produceReq(9, -1, "secret", 0, records("y")).Topics...)
	resp := a.as("alice").do(req).(*kmsg.ProduceResponse)
	require.Len(t, resp.Topics, 2)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	require.Equal(t, map[string]int16{"orders": errNone, "secret": errTopicAuthorizationFailed}, codes)
	require.Equal(t, int64(1), a.end("orders", 1))
	require.Equal(t, int64(0), a.end("secret", 0))
	// acks=0: the refused produce closes the connection, as a failed one does.
	c := a.as("bob")
	c.send(produceReq(9, 0, "orders", 0, records("z")))
	c.closed()
	require.Equal(t, int64(3), a.end("orders", 0))
	// The super user needs no ACL.
	resp = a.as("admin").do(produceReq(9, -1, "secret", 0, records("x"))).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
}

func TestAuthorizeFetchAndListOffsets(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpRead, acl.Topic("orders")))
	admin := a.as("admin")
	require.Equal(t, errNone, admin.do(produceReq(9, -1, "orders", 0, records("a", "b"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	for _, v := range []int16{4, 12, 13, 16} {
		resp := a.as("bob").do(fetchReq(v, "orders", 0, 0, 0)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		require.Equal(t, errTopicAuthorizationFailed, p.ErrorCode, "v%d", v)
		require.Empty(t, p.RecordBatches)

		resp = a.as("alice").do(fetchReq(v, "orders", 0, 0, 0)).(*kmsg.FetchResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		require.Equal(t, []string{"a", "b"}, values(t, resp.Topics[0].Partitions[0].RecordBatches))
	}
	// One fetch of an allowed and a refused topic: the records of the
	// allowed one are spliced in place.
	req := fetchReq(12, "secret", 0, 0, 0)
	req.Topics = append(req.Topics, fetchReq(12, "orders", 0, 0, 0).Topics...)
	resp := a.as("alice").do(req).(*kmsg.FetchResponse)
	require.Len(t, resp.Topics, 2)
	for _, rt := range resp.Topics {
		if rt.Topic == "orders" {
			require.Equal(t, []string{"a", "b"}, values(t, rt.Partitions[0].RecordBatches))
		} else {
			require.Equal(t, errTopicAuthorizationFailed, rt.Partitions[0].ErrorCode)
		}
	}
	// A follower's fetch needs ClusterAction.
	req = fetchReq(12, "orders", 0, 0, 0)
	req.ReplicaID = 2
	resp = a.as("alice").do(req).(*kmsg.FetchResponse)
	require.Equal(t, errTopicAuthorizationFailed, resp.Topics[0].Partitions[0].ErrorCode)

	lo := func(c *testClient, topic string) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(5)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	require.Equal(t, errTopicAuthorizationFailed, lo(a.as("bob"), "orders").ErrorCode)
	// Read implies Describe.
	p := lo(a.as("alice"), "orders")
	require.Equal(t, errNone, p.ErrorCode)
	require.Equal(t, int64(2), p.Offset)
}

func TestAuthorizeMetadata(t *testing.T) {
	a := startAuthz(t, Config{AutoCreateTopics: true})
	a.grant(allowTo("alice", acl.OpRead, acl.Topic("orders")),
		allowTo("alice", acl.OpDescribe, acl.Topic("new1")),
		allowTo("alice", acl.OpCreate, acl.Topic("new2")),
		allowTo("alice", acl.OpDescribe, acl.Topic("new2")))
	names := func(resp *kmsg.MetadataResponse) map[string]int16 {
		out := map[string]int16{}
		for _, t := range resp.Topics {
			out[*t.Topic] = t.ErrorCode
		}
		return out
	}
	// Every topic: only those the client may describe.
	require.Empty(t, names(a.as("bob").do(metadataV9()).(*kmsg.MetadataResponse)))
	require.Equal(t, map[string]int16{"orders": errNone}, names(a.as("alice").do(metadataV9()).(*kmsg.MetadataResponse)))
	require.Len(t, names(a.as("admin").do(metadataV9()).(*kmsg.MetadataResponse)), 2)
	v0 := kmsg.NewPtrMetadataRequest()
	require.Empty(t, names(a.as("bob").do(v0).(*kmsg.MetadataResponse)))

	ask := func(c *testClient, topics ...string) *kmsg.MetadataResponse {
		req := metadataV9()
		req.AllowAutoTopicCreation = true
		req.IncludeTopicAuthorizedOperations = true
		req.IncludeClusterAuthorizedOperations = true
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		return c.do(req).(*kmsg.MetadataResponse)
	}
	resp := ask(a.as("bob"), "orders", "secret", "nosuch")
	require.Equal(t, map[string]int16{"orders": errTopicAuthorizationFailed, "secret": errTopicAuthorizationFailed, "nosuch": errTopicAuthorizationFailed}, names(resp))
	require.NotContains(t, a.b.Topics(), "nosuch")

	// new1 may be described but not created; new2 may be created.
	resp = ask(a.as("alice"), "orders", "secret", "new1", "new2")
	require.Equal(t, map[string]int16{"orders": errNone, "secret": errTopicAuthorizationFailed, "new1": errTopicAuthorizationFailed, "new2": errNone}, names(resp))
	require.ElementsMatch(t, []string{"orders", "secret", "new2"}, a.b.Topics())
	for _, rt := range resp.Topics {
		if *rt.Topic == "orders" {
			require.Equal(t, int32(1<<acl.OpRead|1<<acl.OpDescribe), rt.AuthorizedOperations)
		}
	}
	require.Equal(t, int32(0), resp.AuthorizedOperations)
	resp = ask(a.as("admin"), "orders")
	require.Equal(t, int32(1<<acl.OpCreate|1<<acl.OpClusterAction|1<<acl.OpDescribeConfigs|1<<acl.OpAlterConfigs|1<<acl.OpIdempotentWrite|1<<acl.OpAlter|1<<acl.OpDescribe), resp.AuthorizedOperations)
	// By id, refused: the name is not told.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = topicID("secret")
	req.Topics = append(req.Topics, rt)
	mresp := a.as("alice").do(req).(*kmsg.MetadataResponse)
	require.Len(t, mresp.Topics, 1)
	require.Equal(t, errTopicAuthorizationFailed, mresp.Topics[0].ErrorCode)
	require.Nil(t, mresp.Topics[0].Topic)
}

func TestAuthorizeTopicAdmin(t *testing.T) {
	a := startAuthz(t, Config{})
	bob, alice := a.as("bob"), a.as("alice")

	// CreateTopics: Create on the topic or the cluster.
	resp := bob.do(createReq(7, false, newTopic("t1", 1, 1))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errTopicAuthorizationFailed, resp.Topics[0].ErrorCode)
	require.NotContains(t, a.b.Topics(), "t1")
	a.grant(allowTo("alice", acl.OpCreate, acl.Topic("t1")), allowTo("bob", acl.OpCreate, acl.Cluster()))
	resp = alice.do(createReq(7, false, newTopic("t1", 1, 1), newTopic("t2", 1, 1))).(*kmsg.CreateTopicsResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
		if rt.Topic == "t1" {
			// Created, but its configs need DescribeConfigs.
			require.Equal(t, errTopicAuthorizationFailed, rt.ConfigErrorCode)
			require.Empty(t, rt.Configs)
		}
	}
	require.Equal(t, map[string]int16{"t1": errNone, "t2": errTopicAuthorizationFailed}, codes)
	require.NotContains(t, a.b.Topics(), "t2")
	resp = bob.do(createReq(7, false, newTopic("t2", 1, 1))).(*kmsg.CreateTopicsResponse)
	require.Equal(t, errNone, resp.Topics[0].ErrorCode)

	// CreatePartitions: Alter on the topic.
	cp := bob.do(createPartitionsReq(3, false, growTo("t1", 3))).(*kmsg.CreatePartitionsResponse)
	require.Equal(t, errTopicAuthorizationFailed, cp.Topics[0].ErrorCode)
	n, _ := a.b.Partitions(context.Background(), "t1")
	require.Equal(t, 1, n)
	a.grant(allowTo("alice", acl.OpAlter, acl.Topic("t1")))
	cp = alice.do(createPartitionsReq(3, false, growTo("t1", 3))).(*kmsg.CreatePartitionsResponse)
	require.Equal(t, errNone, cp.Topics[0].ErrorCode)
	n, _ = a.b.Partitions(context.Background(), "t1")
	require.Equal(t, 3, n)

	// DescribeConfigs and IncrementalAlterConfigs: DescribeConfigs and
	// AlterConfigs on the topic, on the cluster for the broker.
	dc := func(c *testClient, typ kmsg.ConfigResourceType, name string) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = typ, name
		req.Resources = append(req.Resources, r)
		return c.do(req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
	}
	require.Equal(t, errTopicAuthorizationFailed, dc(bob, kmsg.ConfigResourceTypeTopic, "t1"))
	require.Equal(t, errClusterAuthorizationFailed, dc(bob, kmsg.ConfigResourceTypeBroker, "1"))
	a.grant(allowTo("alice", acl.OpAlterConfigs, acl.Topic("t1")))
	require.Equal(t, errNone, dc(alice, kmsg.ConfigResourceTypeTopic, "t1")) // implied
	alter := alterReq(1, false, alterOps(kmsg.ConfigResourceTypeTopic, "t1", kmsg.IncrementalAlterConfigOpSet, "retention.ms", "1000"))
	ar := bob.do(alter).(*kmsg.IncrementalAlterConfigsResponse)
	require.Equal(t, errTopicAuthorizationFailed, ar.Resources[0].ErrorCode)
	cfg, err := a.b.TopicConfig("t1")
	require.NoError(t, err)
	require.NotEqual(t, time.Second, cfg.RetentionTime)
	ar = alice.do(alter).(*kmsg.IncrementalAlterConfigsResponse)
	require.Equal(t, errNone, ar.Resources[0].ErrorCode)
	cfg, _ = a.b.TopicConfig("t1")
	require.Equal(t, time.Second, cfg.RetentionTime)

	// DeleteRecords: Delete on the topic.
	require.Equal(t, errNone, a.as("admin").do(produceReq(9, -1, "t1", 0, records("a", "b"))).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	start := func() int64 {
		off, err := a.b.ListOffset(context.Background(), log.TopicPartition{Topic: "t1"}, log.EarliestOffset)
		require.NoError(t, err)
		return off
	}
	dr := bob.do(deleteRecordsReq(2, "t1", map[int32]int64{0: 1})).(*kmsg.DeleteRecordsResponse)
	require.Equal(t, errTopicAuthorizationFailed, dr.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(0), start())

	// DeleteTopics: Delete on the topic.
	del := func(c *testClient, v int16, name string) int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 5000
		req.TopicNames = []string{name}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
	}
	require.Equal(t, errTopicAuthorizationFailed, del(bob, 5, "t1"))
	require.Equal(t, errTopicAuthorizationFailed, del(bob, 6, "t1"))
	require.Contains(t, a.b.Topics(), "t1")

	a.grant(allowTo("alice", acl.OpDelete, acl.Topic("t1")))
	dr = alice.do(deleteRecordsReq(2, "t1", map[int32]int64{0: 1})).(*kmsg.DeleteRecordsResponse)
	require.Equal(t, errNone, dr.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(1), start())
	require.Equal(t, errNone, del(alice, 6, "t1"))
	require.NotContains(t, a.b.Topics(), "t1")
}

func TestAuthorizeInitProducerIDAndCluster(t *testing.T) {
	a := startAuthz(t, Config{})
	ipid := func(c *testClient) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.SetVersion(4)
		return c.do(req).(*kmsg.InitProducerIDResponse)
	}
	r := ipid(a.as("bob"))
	require.Equal(t, errClusterAuthorizationFailed, r.ErrorCode)
	require.Equal(t, int64(-1), r.ProducerID)
	// Write on some topic is enough (Kafka 3+), or IdempotentWrite.
	a.grant(allowTo("alice", acl.OpWrite, acl.Topic("orders")), allowTo("bob", acl.OpIdempotentWrite, acl.Cluster()))
	require.Equal(t, errNone, ipid(a.as("alice")).ErrorCode)
	require.Equal(t, errNone, ipid(a.as("bob")).ErrorCode)
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.SetVersion(4)
	txn.TransactionalID = kmsg.StringPtr("app")
	require.Equal(t, errTransactionalIDAuthorizationFailed, a.as("alice").do(txn).(*kmsg.InitProducerIDResponse).ErrorCode)

	dc := func(c *testClient) *kmsg.DescribeClusterResponse {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(1)
		req.IncludeClusterAuthorizedOperations = true
		return c.do(req).(*kmsg.DescribeClusterResponse)
	}
	resp := dc(a.as("alice"))
	require.Equal(t, errClusterAuthorizationFailed, resp.ErrorCode)
	require.Empty(t, resp.Brokers)
	// IdempotentWrite does not imply Describe.
	require.Equal(t, errClusterAuthorizationFailed, dc(a.as("bob")).ErrorCode)
	a.grant(allowTo("alice", acl.OpDescribe, acl.Cluster()))
	resp = dc(a.as("alice"))
	require.Equal(t, errNone, resp.ErrorCode)
	require.Len(t, resp.Brokers, 1)
	require.Equal(t, int32(1<<acl.OpDescribe), resp.ClusterAuthorizedOperations)
}

func TestAuthorizeGroups(t *testing.T) {
	a := startAuthz(t, Config{})
	gc := a.b.GroupCoordinator()
	require.NotNil(t, gc)
	committed := func(g string) int {
		return len(gc.CommittedWithMetadata(g, nil))
	}
	bob, alice, admin := a.as("bob"), a.as("alice"), a.as("admin")

	// The group protocol needs Read on the group.
	j := bob.do(joinReq(5, "g", "", 10*time.Second, 10*time.Second, "orders")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errGroupAuthorizationFailed, j.ErrorCode)
	require.Equal(t, errGroupAuthorizationFailed, bob.do(syncReq(5, "g", "m", 1, nil)).(*kmsg.SyncGroupResponse).ErrorCode)
	require.Equal(t, errGroupAuthorizationFailed, bob.do(heartbeatReq(4, "g", "m", 1)).(*kmsg.HeartbeatResponse).ErrorCode)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(5)
	leave.Group = "g"
	require.Equal(t, errGroupAuthorizationFailed, bob.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode)
	a.grant(allowTo("alice", acl.OpRead, acl.Group("g")))
	j = alice.do(joinReq(5, "g", "", 10*time.Second, 10*time.Second, "orders")).(*kmsg.JoinGroupResponse)
	require.Equal(t, errMemberIDRequired, j.ErrorCode) // past the check: KIP-394's first answer

	// FindCoordinator: Describe on the group, one key or several.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey = "g"
	require.Equal(t, errGroupAuthorizationFailed, bob.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode)
	require.Equal(t, errNone, alice.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode)
	fc4 := kmsg.NewPtrFindCoordinatorRequest()
	fc4.SetVersion(4)
	fc4.CoordinatorKeys = []string{"g", "other"}
	codes := map[string]int16{}
	for _, c := range alice.do(fc4).(*kmsg.FindCoordinatorResponse).Coordinators {
		codes[c.Key] = c.ErrorCode
	}
	require.Equal(t, map[string]int16{"g": errNone, "other": errGroupAuthorizationFailed}, codes)

	// OffsetCommit: Read on the group, then on each topic.
	cr := bob.do(commitReq(8, "g", "", -1, "orders", 5)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errGroupAuthorizationFailed, cr.Topics[0].Partitions[0].ErrorCode)
	cr = alice.do(commitReq(8, "g", "", -1, "orders", 5)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errTopicAuthorizationFailed, cr.Topics[0].Partitions[0].ErrorCode)
	require.Zero(t, committed("g"))
	a.grant(allowTo("alice", acl.OpRead, acl.Topic("orders")))
	cr = alice.do(commitReq(8, "g", "", -1, "orders", 5, 6)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errNone, cr.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, 2, committed("g"))
	// The admin commits to secret too; alice may not see those.
	cr = admin.do(commitReq(8, "g", "", -1, "secret", 9)).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errNone, cr.Topics[0].Partitions[0].ErrorCode)

	// OffsetFetch: Describe on the group; topics alice may not describe
	// are refused or, asked for all, left out.
	of := func(c *testClient, v int16, topics ...string) *kmsg.OffsetFetchResponse {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(v)
		if v < 8 {
			req.Group = "g"
			for _, name := range topics {
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = name, []int32{0}
				req.Topics = append(req.Topics, rt)
			}
		} else {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			for _, name := range topics {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = name, []int32{0}
				g.Topics = append(g.Topics, rt)
			}
			other := kmsg.NewOffsetFetchRequestGroup()
			other.Group = "other"
			req.Groups = append(req.Groups, g, other)
		}
		return c.do(req).(*kmsg.OffsetFetchResponse)
	}
	require.Equal(t, errGroupAuthorizationFailed, of(bob, 5).ErrorCode)
	r := of(alice, 5) // all topics
	require.Equal(t, errNone, r.ErrorCode)
	require.Len(t, r.Topics, 1)
	require.Equal(t, "orders", r.Topics[0].Topic)
	r = of(alice, 5, "orders", "secret")
	got := map[string]int16{}
	for _, t := range r.Topics {
		got[t.Topic] = t.Partitions[0].ErrorCode
	}
	require.Equal(t, map[string]int16{"orders": errNone, "secret": errTopicAuthorizationFailed}, got)
	r = of(alice, 8)
	require.Len(t, r.Groups, 2)
	for _, g := range r.Groups {
		if g.Group == "g" {
			require.Equal(t, errNone, g.ErrorCode)
			require.Len(t, g.Topics, 1)
			require.Equal(t, "orders", g.Topics[0].Topic)
		} else {
			require.Equal(t, errGroupAuthorizationFailed, g.ErrorCode)
		}
	}
	r = of(admin, 8)
	require.Len(t, r.Groups[0].Topics, 2)

	// DescribeGroups: Describe on each group, and the operations.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups = []string{"g", "other"}
	dg.IncludeAuthorizedOperations = true
	dr := alice.do(dg).(*kmsg.DescribeGroupsResponse)
	require.Len(t, dr.Groups, 2)
	for _, g := range dr.Groups {
		if g.Group == "g" {
			require.Equal(t, errNone, g.ErrorCode)
			require.Equal(t, int32(1<<acl.OpRead|1<<acl.OpDescribe), g.AuthorizedOperations)
		} else {
			require.Equal(t, errGroupAuthorizationFailed, g.ErrorCode)
		}
	}

	// ListGroups: the groups alice may describe; all with Describe on
	// the cluster.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(4)
	require.Empty(t, bob.do(lg).(*kmsg.ListGroupsResponse).Groups)
	require.Len(t, alice.do(lg).(*kmsg.ListGroupsResponse).Groups, 1)

	// DeleteGroups: Delete on the group.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.SetVersion(2)
	del.Groups = []string{"g"}
	require.Equal(t, errGroupAuthorizationFailed, alice.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode)
	require.Equal(t, 3, committed("g"))
	require.Equal(t, errNone, admin.do(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode)
	require.Zero(t, committed("g"))
}

func TestACLAPIs(t *testing.T) {
	a := startAuthz(t, Config{})
	bob, admin := a.as("bob"), a.as("admin")
	keys := apiKeys(t, bob)
	for _, k := range []int16{describeACLsKey, createACLsKey, deleteACLsKey} {
		require.Equal(t, [2]int16{0, 3}, keys[k], kmsg.NameForKey(k))
	}
	create := func(v int16, bs ...acl.Binding) *kmsg.CreateACLsRequest {
		req := kmsg.NewPtrCreateACLsRequest()
		req.SetVersion(v)
		for _, b := range bs {
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			c.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			c.Principal, c.Host = b.Principal, b.Host
			c.Operation, c.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			req.Creations = append(req.Creations, c)
		}
		return req
	}
	read := allowTo("bob", acl.OpRead, acl.Topic("orders"))
	prefixed := allowTo("bob", acl.OpWrite, acl.Topic("ord"))
	prefixed.PatternType = acl.PatternPrefixed
	bad := read
	bad.Principal = "bob"

	// bob may not alter ACLs: nothing is created.
	cr := bob.do(create(3, read)).(*kmsg.CreateACLsResponse)
	require.Equal(t, errClusterAuthorizationFailed, cr.Results[0].ErrorCode)
	require.Zero(t, a.b.ACLs().Len())
	for _, v := range []int16{1, 2, 3} {
		cr = admin.do(create(v, read, prefixed, bad)).(*kmsg.CreateACLsResponse)
		require.Len(t, cr.Results, 3)
		require.Equal(t, errNone, cr.Results[0].ErrorCode)
		require.Equal(t, errNone, cr.Results[1].ErrorCode)
		require.Equal(t, errInvalidRequest, cr.Results[2].ErrorCode)
	}
	require.Equal(t, []acl.Binding{read, prefixed}, a.b.ACLs().Bindings())
	// Now enforced: bob reads orders.
	fr := bob.do(fetchReq(12, "orders", 0, 0, 0)).(*kmsg.FetchResponse)
	require.Equal(t, errNone, fr.Topics[0].Partitions[0].ErrorCode)

	describe := func(c *testClient, v int16, pt kmsg.ACLResourcePatternType, name *string) *kmsg.DescribeACLsResponse {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.SetVersion(v)
		req.ResourceType, req.ResourcePatternType, req.ResourceName = kmsg.ACLResourceTypeAny, pt, name
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return c.do(req).(*kmsg.DescribeACLsResponse)
	}
	require.Equal(t, errClusterAuthorizationFailed, describe(bob, 3, kmsg.ACLResourcePatternTypeAny, nil).ErrorCode)
	d := describe(admin, 3, kmsg.ACLResourcePatternTypeAny, nil)
	require.Equal(t, errNone, d.ErrorCode)
	require.Len(t, d.Resources, 2)
	d = describe(admin, 3, kmsg.ACLResourcePatternTypeMatch, kmsg.StringPtr("orders"))
	require.Len(t, d.Resources, 2) // the literal and the prefix that matches it
	d = describe(admin, 2, kmsg.ACLResourcePatternTypePrefixed, kmsg.StringPtr("ord"))
	require.Len(t, d.Resources, 1)
	require.Equal(t, "ord", d.Resources[0].ResourceName)
	require.Equal(t, kmsg.ACLOperationWrite, d.Resources[0].ACLs[0].Operation)
	d = describe(admin, 3, 0, nil) // UNKNOWN pattern type
	require.Equal(t, errInvalidRequest, d.ErrorCode)

	deleteReq := func(v int16, pt kmsg.ACLResourcePatternType) *kmsg.DeleteACLsRequest {
		req := kmsg.NewPtrDeleteACLsRequest()
		req.SetVersion(v)
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, pt
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		req.Filters = append(req.Filters, f)
		return req
	}
	dl := bob.do(deleteReq(3, kmsg.ACLResourcePatternTypePrefixed)).(*kmsg.DeleteACLsResponse)
	require.Equal(t, errClusterAuthorizationFailed, dl.Results[0].ErrorCode)
	require.Equal(t, 2, a.b.ACLs().Len())
	dl = admin.do(deleteReq(3, kmsg.ACLResourcePatternTypePrefixed)).(*kmsg.DeleteACLsResponse)
	require.Equal(t, errNone, dl.Results[0].ErrorCode)
	require.Len(t, dl.Results[0].MatchingACLs, 1)
	require.Equal(t, "ord", dl.Results[0].MatchingACLs[0].ResourceName)
	require.Equal(t, []acl.Binding{read}, a.b.ACLs().Bindings())
	dl = admin.do(deleteReq(1, 0)).(*kmsg.DeleteACLsResponse)
	require.Equal(t, errInvalidRequest, dl.Results[0].ErrorCode)
	require.Equal(t, 1, a.b.ACLs().Len())
}

// Without Config.Authorizer nothing is checked: a user with no ACL does
// everything, as before.
func TestNoAuthorizerAllowsAll(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("orders", 1))
	_, err := b.CreateACLs(context.Background(), []acl.Binding{{ResourceType: acl.ResourceTopic, ResourceName: "orders",
		PatternType: acl.PatternLiteral, Principal: acl.Anonymous, Host: "*", Operation: acl.OpAll, Permission: acl.PermissionDeny}})
	require.NoError(t, err)
	c := dial(t, s.Addr())
	resp := c.do(produceReq(9, -1, "orders", 0, records("x"))).(*kmsg.ProduceResponse)
	require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
	require.Equal(t, groupOperations, c.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0].AuthorizedOperations)
}

// An API without a rule needs ClusterAction; refused, the connection is
// closed.
func TestGuardWithoutRule(t *testing.T) {
	a := startAuthz(t, Config{})
	served := 0
	next := func(context.Context, *conn, kmsg.Request) reply { served++; return reply{} }
	h := a.s.guard(9999, next)
	c := &conn{s: a.s, logger: a.s.logger, sasl: &saslState{done: true, user: "bob"}, ip: "127.0.0.1"}
	rep := h(context.Background(), c, nil)
	require.True(t, rep.closeAfter)
	require.Zero(t, served)
	c.sasl.user = "admin"
	h(context.Background(), c, nil)
	require.Equal(t, 1, served)
	a.grant(allowTo("bob", acl.OpClusterAction, acl.Cluster()))
	c.sasl.user = "bob"
	h(context.Background(), c, nil)
	require.Equal(t, 2, served)
}

// KIP-848's group APIs: Read on the group and Describe on the topics
// subscribed to; ConsumerGroupDescribe Describe on each group.
func TestAuthorizeConsumerGroupAPIs(t *testing.T) {
	a := startAuthz(t, Config{})
	join := func(topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
		req := cgHeartbeatReq(1, "g", "m1", 0)
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return req
	}
	bob, alice := a.as("bob"), a.as("alice")
	require.Equal(t, errGroupAuthorizationFailed, bob.do(join("orders")).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	a.grant(allowTo("alice", acl.OpRead, acl.Group("g")), allowTo("alice", acl.OpRead, acl.Topic("orders")))
	require.Equal(t, errTopicAuthorizationFailed, alice.do(join("orders", "secret")).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode)
	dg := kmsg.NewPtrConsumerGroupDescribeRequest()
	dg.Groups = []string{"g"}
	dg.IncludeAuthorizedOperations = true
	r := alice.do(join("orders")).(*kmsg.ConsumerGroupHeartbeatResponse)
	require.Equal(t, errNone, r.ErrorCode)
	require.Equal(t, 2, countAssigned(r.Assignment))

	require.Equal(t, errGroupAuthorizationFailed, bob.do(dg).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode)
	g := alice.do(dg).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	require.Equal(t, errNone, g.ErrorCode)
	require.Len(t, g.Members, 1)
	require.Equal(t, int32(1<<acl.OpRead|1<<acl.OpDescribe), g.AuthorizedOperations)
}

// Every API a server may serve has its authorization rule: a new API
// without one would need ClusterAction (guard), which clients do not
// have. Add its rule to authorizeRules (authorize_data.go), as Kafka's
// KafkaApis checks it.
func TestEveryAPIHasARule(t *testing.T) {
	gc := logtest.New(t, logtest.InMemory()).GroupCoordinator()
	s, err := Listen("127.0.0.1:0", capsAll{capsBase: capsBase{gc: gc}}, Config{SASL: &SASLConfig{Plain: func(string) (string, bool) { return "", false }}})
	require.NoError(t, err)
	defer s.Close()
	for _, a := range s.apis {
		if a == nil {
			continue
		}
		_, ok := ruleFor(a.key)
		require.True(t, ok, "%s (key %d) has no authorization rule", kmsg.NameForKey(a.key), a.key)
	}
}
