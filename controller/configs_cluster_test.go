package controller_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
)

// Dynamic configs altered through a member that is not the active
// controller reach every member, keep their errors' sentinels across the
// forwarding, and survive the loss of the active controller and a restart
// of the whole quorum (from the log and from snapshots).
func TestConfigsAcrossFailoverAndRestart(t *testing.T) {
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
	alter := func(m *controller.Controller, as ...controller.ConfigAlteration) ([]error, uint64) {
		t.Helper()
		for i := 1; ; i++ {
			errs, v, err := m.AlterConfigs(ctx, as)
			if err == nil || i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
				require.NoError(t, err)
				return errs, v
			}
		}
	}
	liveBrokers(ctx, t, follower, 1)
	createTopic(ctx, t, follower, "t", controller.TopicSpec{Partitions: 1, ReplicationFactor: 1})
	errs, v := alter(follower,
		controller.ConfigAlteration{Type: controller.BrokerConfigs, Name: "", Set: map[string]string{"leader.replication.throttled.rate": "1000"}},
		controller.ConfigAlteration{Type: controller.TopicConfigs, Name: "t", Set: map[string]string{"leader.replication.throttled.replicas": "*"}},
		controller.ConfigAlteration{Type: controller.TopicConfigs, Name: "nope", Set: map[string]string{"x": "y"}},
	)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], controller.ErrUnknownTopic, "the sentinel crossed the forwarding")
	require.NotZero(t, v)
	for _, img := range c.converge(ctx, v) {
		require.Equal(t, map[string]string{"leader.replication.throttled.rate": "1000"}, img.BrokerConfigs(""))
		tp, _ := img.Topic("t")
		require.Equal(t, "*", tp.Configs["leader.replication.throttled.replicas"])
	}
	// The same alteration again commits nothing.
	errs, v2 := alter(follower, controller.ConfigAlteration{Type: controller.BrokerConfigs, Set: map[string]string{"leader.replication.throttled.rate": "1000"}})
	require.NoError(t, errs[0])
	require.Zero(t, v2)

	back := lead - 1
	c.stop(back)
	survivor := c.running()[0]
	_, v = alter(survivor, controller.ConfigAlteration{Type: controller.BrokerConfigs, Name: "2",
		Set: map[string]string{"follower.replication.throttled.rate": "7"}})
	for _, m := range c.running() {
		require.NoError(t, m.Snapshot())
	}
	want := c.converge(ctx, v)[0]
	c.start(back)
	got, err := c.nodes[back].Wait(ctx, want.Version()-1)
	require.NoError(t, err)
	require.Equal(t, want.BrokerConfigs("2"), got.BrokerConfigs("2"))
	require.Equal(t, want.BrokerConfigs(""), got.BrokerConfigs(""))

	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	for _, m := range c.running() {
		img, err := m.Wait(ctx, want.Version()-1)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"follower.replication.throttled.rate": "7"}, img.BrokerConfigs("2"))
		require.Equal(t, map[string]string{"leader.replication.throttled.rate": "1000"}, img.BrokerConfigs(""))
		tp, _ := img.Topic("t")
		require.Equal(t, "*", tp.Configs["leader.replication.throttled.replicas"])
	}
}
