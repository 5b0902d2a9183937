package group_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// A Leave is answered once the group's record without the member is
// stored: if the store fails (the coordinator moves), the Leave fails too,
// and the member's client sends it again to the next coordinator, which
// still has the member. Told it had left, the client sent nothing more,
// and the next coordinator kept the member, with its partitions, until its
// session ended — never, while coordinators moved faster than that
// (kgo's TestGroupETL, three members, coordinators moving every 8 s,
// 500000 records: a stage's consumers waited for the partitions of a
// member that had left).
func TestLeaveAnsweredOnceStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &gatedLog{Log: &grouptest.Log{}}
		c1 := openOn(t, l)
		_, _, a, b := twoMembers(t, c1)

		l.gate = make(chan error)
		done := make(chan error, 1)
		go func() { done <- c1.Leave(ctx, "g", b.MemberID) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the Leave was answered (%v) before the removal was stored", err)
		default:
		}
		l.gate <- errMoved // the partition's leadership moved
		l.gate = nil
		require.ErrorIs(t, <-done, errMoved)
		require.NoError(t, c1.Close())

		// The client sends its Leave again, to the next coordinator.
		c2 := openOn(t, l)
		d, ok := c2.Describe("g")
		require.True(t, ok)
		require.ElementsMatch(t, []string{a.MemberID, b.MemberID}, memberIDs(d))
		require.NoError(t, c2.Leave(ctx, "g", b.MemberID))
		require.NoError(t, c2.Close())

		c3 := openOn(t, l)
		d, ok = c3.Describe("g")
		require.True(t, ok)
		require.Equal(t, []string{a.MemberID}, memberIDs(d))
	})
}

// A Leave whose record is never stored, the coordinator closing first,
// fails with ErrClosed.
func TestLeaveFailsWhenClosedBeforeStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &gatedLog{Log: &grouptest.Log{}}
		c1 := openOn(t, l)
		_, _, a, b := twoMembers(t, c1)
		l.gate = make(chan error)
		doneA := make(chan error, 1)
		go func() { doneA <- c1.Leave(ctx, "g", a.MemberID) }() // its store waits at the gate
		synctest.Wait()
		// (Polled: the calls below wait on the coordinator's mutex, which
		// synctest.Wait does not take as blocked.)
		doneB := make(chan error, 1)
		go func() { doneB <- c1.Leave(ctx, "g", b.MemberID) }() // recorded, waiting behind a's
		for d, _ := c1.Describe("g"); len(d.Members) > 0; d, _ = c1.Describe("g") {
			runtime.Gosched()
		}
		closed := make(chan error, 1)
		go func() { closed <- c1.Close() }()
		for !errors.Is(c1.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrClosed) {
			runtime.Gosched()
		}
		l.gate <- errMoved
		l.gate = nil
		require.ErrorIs(t, <-doneA, errMoved)
		require.ErrorIs(t, <-doneB, group.ErrClosed)
		require.NoError(t, <-closed)
	})
}
