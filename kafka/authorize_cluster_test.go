package kafka

import (
	"context"
	"testing"

	"github.com/strata-log/strata/acl"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The quorum, unregister and election APIs need Describe (DescribeQuorum)
// or Alter (the others) on the cluster: bob, with no ACL, is refused
// CLUSTER_AUTHORIZATION_FAILED and his request reaches no handler; alice,
// granted the operation, reaches it; Describe alone does not give Alter.
func TestAuthorizeClusterOperationRules(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpAlter, acl.Cluster()), allowTo("carol", acl.OpDescribe, acl.Cluster()))
	as := func(user string) *conn {
		return &conn{s: a.s, logger: a.s.logger, sasl: &saslState{done: true, user: user}, ip: "127.0.0.1"}
	}
	var reached kmsg.Request
	next := func(_ context.Context, _ *conn, req kmsg.Request) reply {
		reached = req
		resp := req.ResponseKind()
		defaults(resp)
		return reply{resp: resp}
	}
	elect := kmsg.NewPtrElectLeadersRequest()
	elect.SetVersion(0)
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = "orders", []int32{0, 1}
	elect.Topics = []kmsg.ElectLeadersRequestTopic{et}

	for _, tc := range []struct {
		key  int16
		req  kmsg.Request
		code func(kmsg.Response) int16
		who  string // allowed; bob never is
	}{
		{describeQuorumKey, kmsg.NewPtrDescribeQuorumRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode }, "carol"},
		{addRaftVoterKey, kmsg.NewPtrAddRaftVoterRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.AddRaftVoterResponse).ErrorCode }, "alice"},
		{removeRaftVoterKey, kmsg.NewPtrRemoveRaftVoterRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.RemoveRaftVoterResponse).ErrorCode }, "alice"},
		{unregisterBrokerKey, kmsg.NewPtrUnregisterBrokerRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode }, "alice"},
		{electLeadersKey, elect, func(r kmsg.Response) int16 {
			resp := r.(*kmsg.ElectLeadersResponse)
			require.Len(t, resp.Topics, 1)
			require.Len(t, resp.Topics[0].Partitions, 2)
			for _, p := range resp.Topics[0].Partitions {
				require.Equal(t, errClusterAuthorizationFailed, p.ErrorCode)
			}
			return resp.ErrorCode
		}, "alice"},
	} {
		name := kmsg.NameForKey(tc.key)
		r, ok := ruleFor(tc.key)
		require.True(t, ok, "%s has no rule", name)

		reached = nil
		resp := r(context.Background(), as("bob"), tc.req, next).resp
		require.Nil(t, reached, "%s: bob's request reached the handler", name)
		require.Equal(t, errClusterAuthorizationFailed, tc.code(resp), name)

		reached = nil
		r(context.Background(), as(tc.who), tc.req, next)
		require.Equal(t, tc.req, reached, "%s: %s's request did not reach the handler", name, tc.who)

		if tc.who == "alice" {
			reached = nil
			r(context.Background(), as("carol"), tc.req, next)
			require.Nil(t, reached, "%s: Describe on the cluster let carol Alter", name)
		}
	}
}
