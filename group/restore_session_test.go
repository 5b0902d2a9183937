package group_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// A member that stopped without leaving (a static member shutting down)
// while the group rebalances is removed a session timeout after the
// rebalance was stored, although the group's coordinator moves more often
// than that: each new coordinator counts its session from the record, not
// from its own load (never less than MinSessionTimeout from the load).
// Restarted at each load, its session never ended, the rebalance, waiting
// for it, never completed, and the members' JoinGroups failed after
// kgo's retry timeout (TestGroupETL, cooperative-sticky/static, three
// members, coordinators moving every 8 s).
func TestStoppedMemberExpiresAcrossMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		ra, rb, rd := req("a", "a"), req("b", "a"), req("d", "a") // sessions of 10 s
		a, err := c1.Join(ctx, ra)
		require.NoError(t, err)
		ra = rejoin(ra, a)
		chB := joinAsync(ctx, c1, rb)
		pending(t, chB)
		require.ErrorIs(t, c1.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
		a, err = c1.Join(ctx, ra)
		require.NoError(t, err)
		b := ready(t, chB)
		require.NoError(t, b.err)
		rb = rejoin(rb, b.resp)
		chD := joinAsync(ctx, c1, rd)
		pending(t, chD)
		require.ErrorIs(t, c1.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
		chB = joinAsync(ctx, c1, rb)
		a, err = c1.Join(ctx, ra)
		require.NoError(t, err)
		d, b := ready(t, chD), ready(t, chB)
		require.NoError(t, d.err)
		require.NoError(t, b.err)
		require.Equal(t, 3, a.Members)

		// d leaves: the group is stored rebalancing; b stops (no heartbeat,
		// no leave) from now on.
		stored := time.Now()
		require.NoError(t, c1.Leave(ctx, "g", d.resp.MemberID))

		// The coordinator moves every 7 s; a joins again at each.
		c := c1
		var chA <-chan joined
		for move := 1; move <= 2; move++ {
			time.Sleep(7*time.Second - time.Since(stored)%(7*time.Second))
			require.NoError(t, c.Close())
			if chA != nil {
				require.ErrorIs(t, ready(t, chA).err, group.ErrClosed)
			}
			c = openOn(t, l)
			chA = joinAsync(ctx, c, ra)
			if move == 1 {
				// b's session ends 10 s after the record (13 s: 6 s after
				// this load, the least a restored member gets).
				pending(t, chA)
				time.Sleep(13*time.Second - time.Since(stored) + time.Millisecond)
				j := ready(t, chA)
				require.NoError(t, j.err, "the rebalance completed without b")
				require.Equal(t, 1, j.resp.Members)
				require.Equal(t, a.MemberID, j.resp.MemberID)
				chA = nil
				d, ok := c.Describe("g")
				require.True(t, ok)
				require.Equal(t, []string{a.MemberID}, memberIDs(d))
			}
		}
		// The next coordinator has b gone too: a heartbeats on.
		j := ready(t, chA)
		require.NoError(t, j.err)
		require.Equal(t, 1, j.resp.Members)
	})
}
