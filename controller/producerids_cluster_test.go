package controller_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
)

// allocate asks for a block through m, retrying a lost leadership (the
// block it may have recorded is simply never handed out).
func allocate(ctx context.Context, t testing.TB, m *controller.Controller, id int, epoch int64) controller.ProducerIDBlock {
	t.Helper()
	for i := 1; ; i++ {
		blk, err := m.AllocateProducerIDs(ctx, controller.AllocateProducerIDsRequest{BrokerID: id, BrokerEpoch: epoch})
		if err == nil || i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err)
			return blk
		}
	}
}

// Blocks are disjoint and ascending whichever member is asked, across a
// failover of the active controller and a restart of the whole quorum.
func TestProducerIDBlocksUniqueAcrossFailoverAndRestart(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t, 3)
	lead := c.leader(ctx, c.nodes[0])
	epochs := liveBrokers(ctx, t, c.member(lead), 1, 2, 3)

	var blocks []controller.ProducerIDBlock
	take := func() {
		for _, m := range c.running() { // through the leader and forwarded
			blk := allocate(ctx, t, m, m.ID(), epochs[m.ID()])
			require.Equal(t, controller.ProducerIDBlockSize, blk.Len)
			if n := len(blocks); n > 0 {
				prev := blocks[n-1]
				require.GreaterOrEqual(t, blk.Start, prev.Start+int64(prev.Len), "block %+v overlaps %+v", blk, prev)
			}
			blocks = append(blocks, blk)
		}
	}
	take()
	require.EqualValues(t, 0, blocks[0].Start)

	c.stop(lead - 1)
	take()
	c.start(lead - 1)
	imgs := c.converge(ctx, c.version())
	last := blocks[len(blocks)-1]
	for _, img := range imgs {
		require.GreaterOrEqual(t, img.NextProducerID(), last.Start+int64(last.Len))
	}

	// The whole quorum restarts from snapshots (then the entries after them).
	c.converge(ctx, c.version())
	for _, m := range c.running() {
		require.NoError(t, m.Snapshot())
	}
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	take()

	// Refused requests are sentinels.
	_, err := c.nodes[0].AllocateProducerIDs(ctx, controller.AllocateProducerIDsRequest{BrokerID: 9, BrokerEpoch: 1})
	require.ErrorIs(t, err, controller.ErrUnknownBroker)
	_, err = c.nodes[1].AllocateProducerIDs(ctx, controller.AllocateProducerIDsRequest{BrokerID: 1, BrokerEpoch: epochs[1] + 100})
	require.ErrorIs(t, err, controller.ErrStaleBrokerEpoch)
}
