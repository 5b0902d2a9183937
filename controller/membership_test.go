package controller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
)

// retryLost runs f until it succeeds, retrying while the controller loses
// its leadership (the outcome unknown); after such a loss, done is the
// error of a change that had committed.
func retryLost(t *testing.T, what string, done error, f func() error) {
	t.Helper()
	for i := 1; ; i++ {
		err := f()
		if err == nil || i > 1 && errors.Is(err, done) {
			return
		}
		if i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err, what)
		}
	}
}

// addBroker starts a member that is not among the voters: a broker only.
func (c *cluster) addBroker() *controller.Controller {
	c.t.Helper()
	addr, err := c.net.Reserve()
	require.NoError(c.t, err)
	cfg := c.cfgs[0]
	cfg.NodeID = len(c.cfgs) + 1
	cfg.Dir = c.t.TempDir()
	cfg.RaftAddr = addr
	cfg.Network = c.net.Endpoint(addr)
	c.cfgs = append(c.cfgs, cfg)
	c.nodes = append(c.nodes, nil)
	c.start(len(c.cfgs) - 1)
	return c.nodes[len(c.nodes)-1]
}

// A member whose ID is not among the voters joins the quorum as a Raft
// non-voter: its requests reach the active controller, it applies the
// metadata, and it counts for no majority: with two of the three voters
// down nothing commits although two members run.
func TestBrokerFollowsMetadataAndVotesInNothing(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := c.leader(ctx, c.member(1))
	liveBrokers(ctx, t, c.member(1), 1, 2, 3)

	m4 := c.addBroker()
	require.False(t, m4.Voter())
	epochs := liveBrokers(ctx, t, m4, 4) // Register joins it first
	info := createTopic(ctx, t, m4, "t", controller.TopicSpec{Partitions: 4, ReplicationFactor: 4})
	img := m4.Image()
	for {
		if _, ok := img.Topic("t"); ok {
			break
		}
		var err error
		img, err = m4.Wait(ctx, img.Version())
		require.NoError(t, err)
	}
	require.Len(t, info.Partitions, 4)
	members, err := c.member(leader).Members()
	require.NoError(t, err)
	require.Contains(t, members, controller.QuorumMember{ID: 4, RaftAddr: m4.Addr(), Voter: false})
	voters := 0
	for _, m := range members {
		if m.Voter {
			voters++
		}
	}
	require.Equal(t, 3, voters)
	id, _, err := m4.WaitLeader(ctx)
	require.NoError(t, err)
	require.Equal(t, leader, id)

	// Unregistering is refused while it is a replica.
	require.ErrorIs(t, m4.UnregisterBroker(ctx, 4), controller.ErrBrokerHasReplicas)
	retryLost(t, "delete topic", controller.ErrUnknownTopic, func() error { return m4.DeleteTopic(ctx, "t") })
	_ = epochs

	// Two voters down: one voter and the broker cannot commit.
	var keep int
	for id := 1; id <= 3; id++ {
		if id != leader && keep == 0 {
			keep = id
			continue
		}
		c.stop(id - 1)
	}
	short, cancelShort := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancelShort()
	_, err = m4.CreateTopic(short, "u", controller.TopicSpec{})
	require.Error(t, err, "committed without a majority of the voters")
	_, ok := m4.Image().Topic("u")
	require.False(t, ok)
}

// A stopped broker without replicas is unregistered: gone from the
// metadata and from the Raft configuration.
func TestUnregisterBrokerLeavesQuorum(t *testing.T) {
	c := newCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	liveBrokers(ctx, t, c.member(1), 1, 2, 3)
	m4 := c.addBroker()
	liveBrokers(ctx, t, m4, 4)
	c.stop(3)
	retryLost(t, "unregister", controller.ErrUnknownBroker, func() error { return c.member(2).UnregisterBroker(ctx, 4) })
	require.ErrorIs(t, c.member(1).UnregisterBroker(ctx, 4), controller.ErrUnknownBroker)
	leader := c.leader(ctx, c.member(1))
	members, err := c.member(leader).Members()
	require.NoError(t, err)
	require.Len(t, members, 3)
	for _, m := range members {
		require.True(t, m.Voter)
		require.NotEqual(t, 4, m.ID)
	}
	img, err := c.member(1).Wait(ctx, 0)
	require.NoError(t, err)
	for {
		if _, ok := img.Broker(4); !ok {
			break
		}
		img, err = c.member(1).Wait(ctx, img.Version())
		require.NoError(t, err)
	}
}
