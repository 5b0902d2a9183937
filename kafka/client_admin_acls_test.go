package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

// aclScenario is one program's ACL code, run unchanged against any
// log.ACLAdmin; it returns what it saw.
func aclScenario(t *testing.T, a log.ACLAdmin) [][]acl.Binding {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	allow := func(user string, rt acl.ResourceType, name string, pt acl.PatternType, op acl.Operation) acl.Binding {
		return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: acl.User(user),
			Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow}
	}
	bs := []acl.Binding{
		allow("alice", acl.ResourceTopic, "orders", acl.PatternLiteral, acl.OpRead),
		allow("alice", acl.ResourceGroup, "g", acl.PatternLiteral, acl.OpRead),
		{ResourceType: acl.ResourceTopic, ResourceName: "", PatternType: acl.PatternLiteral, Principal: "alice"}, // invalid
		allow("bob", acl.ResourceTopic, "ord", acl.PatternPrefixed, acl.OpWrite),
	}
	errs, err := a.CreateACLs(ctx, bs)
	require.NoError(t, err)
	require.Len(t, errs, 4)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], acl.ErrInvalidBinding)
	require.NoError(t, errs[3])

	var seen [][]acl.Binding
	all, err := a.DescribeACLs(ctx, acl.AnyFilter)
	require.NoError(t, err)
	require.ElementsMatch(t, []acl.Binding{bs[0], bs[1], bs[3]}, all)
	seen = append(seen, all)

	// Match: every pattern that applies to topic "orders".
	name := "orders"
	f := acl.Filter{ResourceType: acl.ResourceTopic, ResourceName: &name, PatternType: acl.PatternMatch,
		Operation: acl.OpAny, Permission: acl.PermissionAny}
	onOrders, err := a.DescribeACLs(ctx, f)
	require.NoError(t, err)
	require.ElementsMatch(t, []acl.Binding{bs[0], bs[3]}, onOrders)
	seen = append(seen, onOrders)

	_, err = a.DescribeACLs(ctx, acl.Filter{})
	require.ErrorIs(t, err, acl.ErrInvalidFilter)
	_, err = a.DeleteACLs(ctx, []acl.Filter{acl.AnyFilter, {}})
	require.ErrorIs(t, err, acl.ErrInvalidFilter)
	left, err := a.DescribeACLs(ctx, acl.AnyFilter)
	require.NoError(t, err)
	require.Len(t, left, 3, "an invalid filter removes nothing")

	bob := acl.User("bob")
	byBob := acl.AnyFilter
	byBob.Principal = &bob
	deleted, err := a.DeleteACLs(ctx, []acl.Filter{byBob})
	require.NoError(t, err)
	require.Equal(t, [][]acl.Binding{{bs[3]}}, deleted)
	left, err = a.DescribeACLs(ctx, acl.AnyFilter)
	require.NoError(t, err)
	require.ElementsMatch(t, []acl.Binding{bs[0], bs[1]}, left)
	seen = append(seen, left)
	return seen
}

// The same ACL code against a log.Broker and against a Client of a
// served one: the same bindings, the same errors.
func TestClientACLsSameAsBroker(t *testing.T) {
	leaktest.Check(t)
	_, direct, _ := start(t, Config{})
	want := aclScenario(t, direct)

	s, served, _ := start(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer c.Close()
	got := aclScenario(t, c)
	require.Equal(t, want, got)
	require.Equal(t, direct.ACLs().Bindings(), served.ACLs().Bindings())
}
