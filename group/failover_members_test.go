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

// memberIDs returns the ids of a described group's members.
func memberIDs(d group.Description) []string {
	ids := make([]string, 0, len(d.Members))
	for _, m := range d.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// A member that leaves a stable group is gone for the partition's next
// coordinator too: the group's metadata is stored again without it, so a
// coordinator loaded after the move (a cluster member that became the
// leader of the group's partition of __consumer_offsets) does not restore
// it and the rebalance it started completes as soon as the members that
// stayed have joined again — not a session timeout later, when the next
// coordinator would drop the member that had left. Coordinators that move
// more often than the session timeout (a loaded cluster fencing its
// members) restored it again and again and the rebalance never ended: kgo's
// TestGroupETL against three members saw JoinGroup fail with
// COORDINATOR_NOT_AVAILABLE after its retry timeout (the session timeout).
func TestLeftMemberNotRestoredAfterMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		ra, _, a, b := twoMembers(t, c1)
		require.NoError(t, c1.Leave(ctx, "g", b.MemberID))
		d, ok := c1.Describe("g")
		require.True(t, ok)
		require.Equal(t, group.StatePreparingRebalance, d.State)
		require.NoError(t, c1.Close()) // the partition's leadership moves

		c2 := openOn(t, l)
		d, ok = c2.Describe("g")
		require.True(t, ok)
		require.Equal(t, []string{a.MemberID}, memberIDs(d), "the member that left is not restored")
		require.Equal(t, a.Generation, d.Generation)
		require.Equal(t, group.StatePreparingRebalance, d.State, "restored rebalancing, as it was")

		// a rejoins at the new coordinator: a generation of one, at once.
		start := time.Now()
		a2, err := c2.Join(ctx, ra)
		require.NoError(t, err)
		require.Less(t, time.Since(start), time.Second, "waited for the member that left (session %v)", ra.SessionTimeout)
		require.Equal(t, a.Generation+1, a2.Generation)
		requireGeneration(t, []group.JoinResponse{a2}, map[string]int{"a": 3})
	})
}

// A member whose session expires is gone for the next coordinator too, and
// one that joins during a rebalance, not yet in a generation, is not
// restored as a member of the last one (it would get no assignment back
// and keep none).
func TestExpiredMemberNotRestoredAfterMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		ra, _, a, b := twoMembers(t, c1)
		// b stops heartbeating; a keeps its session alive until b's expires.
		deadline := time.Now().Add(ra.SessionTimeout + time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(time.Second) // virtual time (synctest): a's heartbeat interval
			if err := c1.Heartbeat(ctx, "g", a.MemberID, a.Generation); err != nil {
				require.ErrorIs(t, err, group.ErrRebalanceInProgress)
				break
			}
		}
		d, _ := c1.Describe("g")
		require.Equal(t, []string{a.MemberID}, memberIDs(d), "b's session expired")
		// A new member joins the rebalance; its Join waits for a's.
		chC := joinAsync(ctx, c1, req("c", "a"))
		pending(t, chC)
		require.NoError(t, c1.Close())
		require.ErrorIs(t, ready(t, chC).err, group.ErrClosed)

		c2 := openOn(t, l)
		d, ok := c2.Describe("g")
		require.True(t, ok)
		require.Equal(t, []string{a.MemberID}, memberIDs(d), "neither the expired member %s nor the joining one", b.MemberID)
	})
}

// A group stored while a rebalance is in progress comes back rebalancing:
// the members that stayed are told to join again even though the last
// coordinator did not reach them, so that the partitions of the member
// that left are assigned. Restored Stable instead, the others heartbeat
// on with their old assignments and the partitions the leaver owned stay
// with no one (kgo's TestTxnEtl on three members, coordinators moving:
// a partition of 7 never consumed again).
func TestRebalanceInProgressSurvivesMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		_, _, a, b := twoMembers(t, c1)
		require.NoError(t, c1.Leave(ctx, "g", b.MemberID)) // b owned a/2
		require.NoError(t, c1.Close())                     // before a's next heartbeat

		c2 := openOn(t, l)
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
		a2, err := c2.Join(ctx, rejoin(req("a", "a"), a))
		require.NoError(t, err)
		require.Equal(t, a.Generation+1, a2.Generation)
		requireGeneration(t, []group.JoinResponse{a2}, map[string]int{"a": 3}) // a/2 too
		d, _ := c2.Describe("g")
		require.Equal(t, group.StateStable, d.State)
		require.NoError(t, c2.Close())

		// The generation that rebalance formed is what the next one loads.
		c3 := openOn(t, l)
		require.NoError(t, c3.Heartbeat(ctx, "g", a2.MemberID, a2.Generation))
	})
}

// A generation that a moving coordinator formed but never stored (it
// moved between the Join and the leader's Sync) is answered
// ErrRebalanceInProgress at the next coordinator, which rebalances: its
// members' Syncs and Heartbeats were ErrIllegalGeneration, which kgo takes
// for its group session failing (TestTxnEtl on three members with the
// coordinators moving). An older generation stays ErrIllegalGeneration.
func TestLostGenerationRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		join := func(c *group.Coordinator, id string) group.JoinResponse {
			t.Helper()
			r, err := c.Join(ctx, group.JoinRequest{Group: "g", MemberID: id, ClientID: "m", ProtocolType: "consumer",
				Protocols: []group.Protocol{{Name: "p"}}, SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second})
			require.NoError(t, err)
			return r
		}
		a := join(c1, "")
		_, err := c1.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
			Assignments: map[string][]byte{a.MemberID: []byte("all")}})
		require.NoError(t, err)    // generation 1, stored
		a2 := join(c1, a.MemberID) // the leader asks for a new assignment: generation 2, not synced
		require.Equal(t, a.Generation+1, a2.Generation)
		require.NoError(t, c1.Close())

		c2 := openOn(t, l)
		d, _ := c2.Describe("g")
		require.Equal(t, a.Generation, d.Generation)
		_, err = c2.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a2.Generation})
		require.ErrorIs(t, err, group.ErrRebalanceInProgress)
		d, _ = c2.Describe("g")
		require.Equal(t, group.StatePreparingRebalance, d.State)
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", a.MemberID, a2.Generation), group.ErrRebalanceInProgress)
		require.ErrorIs(t, c2.Heartbeat(ctx, "g", a.MemberID, a.Generation-1), group.ErrIllegalGeneration)
		a3 := join(c2, a.MemberID)
		require.Equal(t, a.Generation+1, a3.Generation)
	})
}
