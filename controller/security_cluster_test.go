package controller_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
)

func topicACL(principal, topic string, op acl.Operation) acl.Binding {
	return acl.Binding{
		ResourceType: acl.ResourceTopic, ResourceName: topic, PatternType: acl.PatternLiteral,
		Principal: principal, Host: "*", Operation: op, Permission: acl.PermissionAllow,
	}
}

// requireSameSecurity fails unless the images hold the same ACLs, SCRAM
// credentials and quotas.
func requireSameSecurity(t testing.TB, want, got *controller.Image) {
	t.Helper()
	require.Equal(t, want.ACLs().Bindings(), got.ACLs().Bindings())
	require.Equal(t, want.SCRAMUsers(), got.SCRAMUsers())
	for _, u := range want.SCRAMUsers() {
		for _, c := range u.Credentials {
			a, _ := want.SCRAMCredential(c.Mechanism, u.Name)
			b, ok := got.SCRAMCredential(c.Mechanism, u.Name)
			require.True(t, ok)
			require.Equal(t, a, b)
		}
	}
	require.Equal(t, want.ClientQuotas().Entities(), got.ClientQuotas().Entities())
	for _, e := range want.ClientQuotas().Entities() {
		require.Equal(t, want.ClientQuotas().Quotas(e), got.ClientQuotas().Quotas(e))
	}
}

// ACLs, SCRAM credentials and quotas changed through a member that is not
// the active controller are committed by it and reach every member; they
// survive the loss of the active controller, a member that comes back
// from its directory and one that needs the leader's snapshot.
func TestSecurityMetadataAcrossFailoverAndRestart(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t, 3, func(_ int, cfg *controller.Config) { cfg.Raft.TrailingLogs = 2 })
	lead := c.leader(ctx, c.nodes[0])
	var follower *controller.Controller
	for _, m := range c.running() {
		if m.ID() != lead {
			follower = m
			break
		}
	}
	retry := func(f func() error) {
		t.Helper()
		for i := 1; ; i++ {
			err := f()
			if err == nil || i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
				require.NoError(t, err)
				return
			}
		}
	}
	var v uint64
	retry(func() error {
		errs, ver, err := follower.CreateACLs(ctx, []acl.Binding{
			topicACL("User:alice", "orders", acl.OpRead),
			topicACL("User:alice", "orders", acl.OpWrite),
			{ResourceType: acl.ResourceTopic}, // invalid: refused alone
		})
		if err == nil {
			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
			require.ErrorIs(t, errs[2], acl.ErrInvalidBinding, "the error kept its sentinel across the forwarding")
			require.NotZero(t, ver)
			v = ver
		}
		return err
	})
	cred := log.SCRAMCredential{Salt: []byte("salt"), Iterations: 4096, StoredKey: []byte("stored"), ServerKey: []byte("server")}
	retry(func() error {
		failed, ver, err := follower.AlterSCRAMCredentials(ctx, []log.SCRAMChange{
			{User: "alice", Mechanism: log.SCRAMSHA256, Credential: &cred},
			{User: "bob", Mechanism: log.SCRAMSHA512}, // bob has none
		})
		if err == nil {
			require.Len(t, failed, 1)
			require.ErrorIs(t, failed["bob"], log.ErrSCRAMCredentialNotFound)
			v = ver
		}
		return err
	})
	alice := log.QuotaEntity{User: log.QuotaNamed("alice")}
	retry(func() error {
		errs, ver, err := follower.AlterClientQuotas(ctx, []log.QuotaAlteration{
			{Entity: alice, Ops: []log.QuotaOp{{Key: log.QuotaProducerByteRate, Value: 1024}}},
			{Entity: alice, Ops: []log.QuotaOp{{Key: "bogus", Value: 1}}},
		})
		if err == nil {
			require.NoError(t, errs[0])
			require.ErrorIs(t, errs[1], log.ErrInvalidQuota)
			v = ver
		}
		return err
	})
	imgs := c.converge(ctx, v)
	for _, img := range imgs {
		require.Len(t, img.ACLs().Bindings(), 2)
		got, ok := img.SCRAMCredential(log.SCRAMSHA256, "alice")
		require.True(t, ok)
		require.Equal(t, cred, got)
		q, _, ok := img.ClientQuotas().Lookup(log.QuotaProducerByteRate, "alice", "any")
		require.True(t, ok)
		require.Equal(t, 1024.0, q)
		requireSameSecurity(t, imgs[0], img)
	}

	// The active controller stops: the survivors keep everything, and a
	// change through one of them commits under the new controller.
	back := lead - 1
	c.stop(back)
	survivor := c.running()[0]
	retry(func() error {
		deleted, ver, err := survivor.DeleteACLs(ctx, []acl.Filter{{
			ResourceType: acl.ResourceTopic, PatternType: acl.PatternAny, Operation: acl.OpWrite, Permission: acl.PermissionAny,
		}})
		if err == nil && ver != 0 {
			require.Equal(t, [][]acl.Binding{{topicACL("User:alice", "orders", acl.OpWrite)}}, deleted)
			v = ver
		}
		return err
	})
	for _, m := range c.running() {
		require.NoError(t, m.Snapshot()) // TrailingLogs 2: the old controller will need this snapshot
	}
	want := c.converge(ctx, v)[0]
	require.Equal(t, []acl.Binding{topicACL("User:alice", "orders", acl.OpRead)}, want.ACLs().Bindings())

	c.start(back)
	got, err := c.nodes[back].Wait(ctx, want.Version()-1)
	require.NoError(t, err)
	requireSameSecurity(t, want, got)

	// The whole quorum restarts from its directories.
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	for _, m := range c.running() {
		img, err := m.Wait(ctx, want.Version()-1)
		require.NoError(t, err)
		requireSameSecurity(t, want, img)
	}
}
