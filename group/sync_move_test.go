package group_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// A generation is told to no member before its metadata record is
// durable: the leader's assignment answers the Syncs of the generation —
// the leader's and the followers', waiting or arriving while the record is
// stored — only once the store has returned, as Kafka answers SyncGroup
// from its storeGroup callback. A Sync answered before, the coordinator
// moving meanwhile (the append fails: the partition's leadership went),
// left that member in a generation its next coordinator never saw: kgo's
// TestGroupETL against three members with coordinators moving failed its
// commit in OnPartitionsRevoked with ILLEGAL_GENERATION.

// errMoved is the append's error when the partition's leadership moved.
var errMoved = errors.New("test: not the leader of the partition any more")

// gatedLog is a grouptest.Log whose Append, while the gate is shut,
// waits for its outcome: nil appends, an error fails the append.
type gatedLog struct {
	*grouptest.Log
	gate chan error // nil: open
}

func (l *gatedLog) Append(records []group.Record) error {
	if l.gate != nil {
		if err := <-l.gate; err != nil {
			return err
		}
	}
	return l.Log.Append(records)
}

// stableThenRebalanced forms generation 1 of a alone and generation 2 of
// a (the leader) and b, both stored on c, then has a rejoin (a leader
// asking for a new assignment) and b too: generation 3 awaits a's Sync.
// It returns the Joins of generations 2 and 3.
func stableThenRebalanced(t *testing.T, c *group.Coordinator) (a2, b2, a3, b3 group.JoinResponse) {
	t.Helper()
	ctx := context.Background()
	p := proto("range", "")
	ra, rb := classic("a", p), classic("b", p)
	a1, err := c.Join(ctx, ra)
	require.NoError(t, err)
	_, err = c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a1.MemberID, Generation: 1,
		Assignments: map[string][]byte{a1.MemberID: []byte("A1")}})
	require.NoError(t, err)

	// b joins: generation 2, a leads.
	chB := joinAsync(ctx, c, rb)
	pending(t, chB)
	ra.MemberID = a1.MemberID
	a2, err = c.Join(ctx, ra)
	require.NoError(t, err)
	jb := ready(t, chB)
	require.NoError(t, jb.err)
	b2 = jb.resp
	rb.MemberID = b2.MemberID
	require.Equal(t, int32(2), a2.Generation)
	require.Equal(t, a2.MemberID, a2.Leader)
	chS := syncAsync(ctx, c, group.SyncRequest{Group: "g", MemberID: b2.MemberID, Generation: 2})
	_, err = c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a2.MemberID, Generation: 2,
		Assignments: map[string][]byte{a2.MemberID: []byte("A2"), b2.MemberID: []byte("B2")}})
	require.NoError(t, err)
	s := syncReady(t, chS)
	require.NoError(t, s.err)
	require.Equal(t, "B2", string(s.resp.Assignment))

	// a rejoins: generation 3 once b has rejoined too.
	chA := joinAsync(ctx, c, ra)
	pending(t, chA)
	require.ErrorIs(t, c.Heartbeat(ctx, "g", b2.MemberID, 2), group.ErrRebalanceInProgress)
	b3, err = c.Join(ctx, rb)
	require.NoError(t, err)
	ja := ready(t, chA)
	require.NoError(t, ja.err)
	a3 = ja.resp
	require.Equal(t, int32(3), a3.Generation)
	require.Equal(t, a3.MemberID, a3.Leader)
	return a2, b2, a3, b3
}

// commitsAt asserts that each member can commit, at the group's next
// coordinator c, in the generation it was last told by a Sync.
func commitsAt(t *testing.T, c *group.Coordinator, told map[string]int32) {
	t.Helper()
	for member, gen := range told {
		err := c.Commit(context.Background(), "g", member, gen, map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 1})
		require.NoError(t, err, "member %s, told generation %d by a Sync, commits at the next coordinator", member, gen)
	}
}

// The store of generation 3 fails: the follower's Sync waiting for the
// leader's fails too, and each member commits on at the next coordinator
// in the generation it was last told (2), which that coordinator restored.
func TestSyncFailsWhenGenerationNotStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		a2, b2, a3, b3 := stableThenRebalanced(t, c1)
		told := map[string]int32{a2.MemberID: 2, b2.MemberID: 2}

		chB := syncAsync(ctx, c1, group.SyncRequest{Group: "g", MemberID: b3.MemberID, Generation: 3})
		syncPending(t, chB)
		l.FailWith(errMoved) // the leadership of the partition moves
		_, err := c1.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a3.MemberID, Generation: 3,
			Assignments: map[string][]byte{a3.MemberID: []byte("A3"), b3.MemberID: []byte("B3")}})
		require.ErrorIs(t, err, group.ErrRebalanceInProgress)
		require.ErrorIs(t, err, errMoved)
		s := syncReady(t, chB)
		require.ErrorIs(t, s.err, group.ErrRebalanceInProgress, "b was told generation 3, which was not stored: %+v", s.resp)
		require.NoError(t, c1.Close())

		l.FailWith(nil)
		c2 := openOn(t, l)
		d, ok := c2.Describe("g")
		require.True(t, ok)
		require.Equal(t, int32(2), d.Generation)
		commitsAt(t, c2, told)
	})
}

// While the leader's assignment is being stored, the group still
// completes its rebalance: a follower's Sync arriving then waits, a commit
// is refused (REBALANCE_IN_PROGRESS, as Kafka in CompletingRebalance) and
// a heartbeat is fine; once stored, every Sync is answered, and the next
// coordinator knows the generation.
func TestSyncWaitsForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &gatedLog{Log: &grouptest.Log{}}
		c1 := openOn(t, l)
		_, _, a3, b3 := stableThenRebalanced(t, c1)

		l.gate = make(chan error)
		chA := syncAsync(ctx, c1, group.SyncRequest{Group: "g", MemberID: a3.MemberID, Generation: 3,
			Assignments: map[string][]byte{a3.MemberID: []byte("A3"), b3.MemberID: []byte("B3")}})
		syncPending(t, chA) // its store waits at the gate
		chB := syncAsync(ctx, c1, group.SyncRequest{Group: "g", MemberID: b3.MemberID, Generation: 3})
		syncPending(t, chB)
		d, _ := c1.Describe("g")
		require.Equal(t, group.StateCompletingRebalance, d.State)
		require.NoError(t, c1.Heartbeat(ctx, "g", b3.MemberID, 3))
		require.ErrorIs(t, c1.Commit(ctx, "g", b3.MemberID, 3, map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 1}),
			group.ErrRebalanceInProgress)

		l.gate <- nil // the record is durable
		l.gate = nil
		a, b := syncReady(t, chA), syncReady(t, chB)
		require.NoError(t, a.err)
		require.NoError(t, b.err)
		require.Equal(t, "A3", string(a.resp.Assignment))
		require.Equal(t, "B3", string(b.resp.Assignment))
		d, _ = c1.Describe("g")
		require.Equal(t, group.StateStable, d.State)
		require.NoError(t, c1.Close())

		c2 := openOn(t, l)
		commitsAt(t, c2, map[string]int32{a3.MemberID: 3, b3.MemberID: 3})
	})
}

// The coordinator moves while the leader's assignment is being stored: a
// follower's Sync arriving meanwhile waits, the append fails, and neither
// the leader nor the follower is told generation 3.
func TestSyncDuringStoreFailsWithTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &gatedLog{Log: &grouptest.Log{}}
		c1 := openOn(t, l)
		a2, b2, a3, b3 := stableThenRebalanced(t, c1)

		l.gate = make(chan error)
		chA := syncAsync(ctx, c1, group.SyncRequest{Group: "g", MemberID: a3.MemberID, Generation: 3,
			Assignments: map[string][]byte{a3.MemberID: []byte("A3"), b3.MemberID: []byte("B3")}})
		syncPending(t, chA)
		chB := syncAsync(ctx, c1, group.SyncRequest{Group: "g", MemberID: b3.MemberID, Generation: 3})
		syncPending(t, chB)

		l.gate <- errMoved
		l.gate = nil
		a, b := syncReady(t, chA), syncReady(t, chB)
		require.ErrorIs(t, a.err, group.ErrRebalanceInProgress)
		require.ErrorIs(t, b.err, group.ErrRebalanceInProgress, "b was told generation 3, which was not stored: %+v", b.resp)
		require.NoError(t, c1.Close())

		c2 := openOn(t, l)
		commitsAt(t, c2, map[string]int32{a2.MemberID: 2, b2.MemberID: 2})
	})
}

// The consumer protocol (KIP-848) keeps the same rule: a heartbeat's
// answer — a new member epoch, a new assignment — is given only once the
// records of the change are stored, so whatever epoch a member was told,
// the group's next coordinator knows it and takes the member's commits at
// it. Here a member's epoch moves (another member joins, so it must give
// partitions up) while the coordinator moves: its store fails, or is
// durable, and the member commits at the next coordinator at the epoch it
// was last told.
func TestConsumerEpochToldOnlyOnceStored(t *testing.T) {
	for _, outcome := range []error{errMoved, nil} {
		t.Run(fmt.Sprint("store outcome ", outcome), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				l := &gatedLog{Log: &grouptest.Log{}}
				c1 := openOn(t, l)
				a := joinClient(t, c1, "g", "member-a", "a", "b")
				b := joinClient(t, c1, "g", "member-b", "a", "b")
				settle(t, c1, "g", a, b)
				told := a.epoch
				c := joinClient(t, c1, "g", "member-c", "a", "b") // stored: a and b must give some up
				a.beat(t)                                         // a is told to give some up, and does
				require.Equal(t, told, a.epoch)

				// a's next heartbeat moves it to the group's epoch.
				l.gate = make(chan error)
				done := make(chan error, 1)
				go func() { done <- a.tryBeat() }()
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("a's heartbeat answered (%v, epoch %d) before its records were stored", err, a.epoch)
				default:
				}
				l.gate <- outcome
				l.gate = nil
				err := <-done
				if outcome != nil {
					require.ErrorIs(t, err, errMoved)
					require.Equal(t, told, a.epoch, "a was told an epoch that was not stored")
				} else {
					require.NoError(t, err)
					require.Greater(t, a.epoch, told)
					told = a.epoch
				}
				require.NoError(t, c1.Close())

				c2 := openOn(t, l)
				require.NoError(t, c2.Commit(ctx, "g", a.id, told, map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 1}),
					"a commits at the next coordinator at epoch %d, the last it was told", told)
				d, ok := c2.DescribeConsumerGroup("g")
				require.True(t, ok)
				require.Len(t, d.Members, 3, "c's join was stored: %+v", c)
			})
		})
	}
}
