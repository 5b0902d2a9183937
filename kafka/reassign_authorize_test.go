package kafka

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/acl"
)

// AlterPartitionReassignments needs Alter on the cluster and
// ListPartitionReassignments Describe on it, as in Kafka: bob, with no
// ACL, is refused CLUSTER_AUTHORIZATION_FAILED and reaches no handler;
// carol (Describe) lists but does not alter; alice (Alter) alters.
func TestAuthorizeReassignments(t *testing.T) {
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
	for _, tc := range []struct {
		req     kmsg.Request
		code    func(kmsg.Response) int16
		allowed []string
		refused []string
	}{
		{kmsg.NewPtrAlterPartitionAssignmentsRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode },
			[]string{"alice"}, []string{"bob", "carol"}},
		{kmsg.NewPtrListPartitionReassignmentsRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode },
			[]string{"carol"}, []string{"bob"}},
	} {
		name := kmsg.NameForKey(tc.req.Key())
		r, ok := ruleFor(tc.req.Key())
		require.True(t, ok, "%s has no rule", name)
		for _, who := range tc.refused {
			reached = nil
			resp := r(context.Background(), as(who), tc.req, next).resp
			require.Nil(t, reached, "%s: %s's request reached the handler", name, who)
			require.Equal(t, errClusterAuthorizationFailed, tc.code(resp), "%s as %s", name, who)
		}
		for _, who := range tc.allowed {
			reached = nil
			r(context.Background(), as(who), tc.req, next)
			require.Equal(t, tc.req, reached, "%s: %s's request did not reach the handler", name, who)
		}
	}
}
