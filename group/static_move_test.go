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

// openDelayed is openOn with an initial rebalance delay of 1 s.
func openDelayed(t *testing.T, l group.OffsetsLog) *group.Coordinator {
	t.Helper()
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics), InitialRebalanceDelay: time.Second}, l)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// stableWithStatic forms a stable generation of a (the leader) and the
// static member "host-1" on c, stored, and returns the static member's
// Join request and answer.
func stableWithStatic(t *testing.T, c *group.Coordinator) (rs group.JoinRequest, s group.JoinResponse) {
	t.Helper()
	ctx := context.Background()
	rs = classic("b-static", proto("range", "S"))
	rs.GroupInstanceID = "host-1"
	chA, chS := joinAsync(ctx, c, classic("a", proto("range", "A"))), joinAsync(ctx, c, rs)
	time.Sleep(time.Second) // the initial rebalance delay (openDelayed)
	a, js := ready(t, chA), ready(t, chS)
	require.NoError(t, a.err)
	require.NoError(t, js.err)
	require.Equal(t, a.resp.MemberID, a.resp.Leader)
	_, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.resp.MemberID, Generation: a.resp.Generation,
		Assignments: map[string][]byte{a.resp.MemberID: []byte("A"), js.resp.MemberID: []byte("S-part")}})
	require.NoError(t, err)
	return rs, js.resp
}

// A static member's new instance (KIP-345: a Join with the instance id and
// no member id) takes the old one's place under a new member id with no
// rebalance; the Join is answered once the group's record with the new id
// is stored, as Kafka answers it from its storeGroup callback. Answered
// before, the coordinator moving meanwhile, the member held an id the next
// coordinator never heard of (its heartbeats and commits there
// UNKNOWN_MEMBER_ID). If the store fails, so does the Join, and the
// instance joins again at the next coordinator, where it takes the place
// of the id that coordinator has.
func TestStaticReplacementAnsweredOnceStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &gatedLog{Log: &grouptest.Log{}}
		c1 := openDelayed(t, l)
		rs, s := stableWithStatic(t, c1)

		l.gate = make(chan error)
		ch := joinAsync(ctx, c1, rs) // the restarted instance: no member id
		pending(t, ch)
		l.gate <- nil // stored
		l.gate = nil
		again := ready(t, ch)
		require.NoError(t, again.err)
		require.NotEqual(t, s.MemberID, again.resp.MemberID)
		require.Equal(t, s.Generation, again.resp.Generation, "no rebalance")

		// Once more, and this time the coordinator moves before the
		// record is stored: the Join fails.
		l.gate = make(chan error)
		ch = joinAsync(ctx, c1, rs)
		pending(t, ch)
		l.gate <- errMoved
		l.gate = nil
		failed := ready(t, ch)
		require.ErrorIs(t, failed.err, errMoved)
		require.NoError(t, c1.Close())

		// The next coordinator has the id stored before; the instance
		// joins again there and takes its place.
		c2 := openDelayed(t, l)
		d, ok := c2.Describe("g")
		require.True(t, ok)
		require.Contains(t, memberIDs(d), again.resp.MemberID)
		third, err := c2.Join(ctx, rs)
		require.NoError(t, err)
		require.NotEqual(t, again.resp.MemberID, third.MemberID)
		got, err := c2.Sync(ctx, group.SyncRequest{Group: "g", MemberID: third.MemberID, Generation: third.Generation})
		require.NoError(t, err)
		require.Equal(t, []byte("S-part"), got.Assignment)
	})
}
