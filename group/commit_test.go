package group_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

func TestCommitStaleGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := grouptest.NewStore(nil)
		c := newCoordinator(t, group.Config{Store: store})
		ctx := context.Background()
		ra, rb := req("a", "a"), req("b", "a")
		a1, err := c.Join(ctx, ra)
		require.NoError(t, err)
		tp0 := group.TopicPartition{Topic: "a", Partition: 0}
		require.NoError(t, c.Commit(ctx, "g", a1.MemberID, a1.Generation, map[group.TopicPartition]int64{tp0: 10}))

		chB := joinAsync(ctx, c, rb)
		pending(t, chB)
		// While the rebalance is in progress a may still commit (it should,
		// before rejoining).
		require.NoError(t, c.Commit(ctx, "g", a1.MemberID, a1.Generation, map[group.TopicPartition]int64{tp0: 11}))
		a2, err := c.Join(ctx, rejoin(ra, a1))
		require.NoError(t, err)
		ready(t, chB)

		batches := store.Batches()
		err = c.Commit(ctx, "g", a1.MemberID, a1.Generation, map[group.TopicPartition]int64{tp0: 99})
		require.ErrorIs(t, err, group.ErrIllegalGeneration)
		require.Equal(t, map[group.TopicPartition]int64{tp0: 11}, c.Committed("g", nil))
		require.Equal(t, batches, store.Batches(), "a refused commit reached the store")

		require.NoError(t, c.Commit(ctx, "g", a2.MemberID, a2.Generation, map[group.TopicPartition]int64{tp0: 12}))
		require.Equal(t, map[group.TopicPartition]int64{tp0: 12}, c.Committed("g", []group.TopicPartition{tp0, {Topic: "a", Partition: 1}}))
	})
}

func TestUnknownMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{})
		ctx := context.Background()
		offs := map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 1}
		// Of a group that does not exist.
		require.ErrorIs(t, c.Heartbeat(ctx, "nope", "m", 1), group.ErrUnknownMember)
		require.ErrorIs(t, c.Leave(ctx, "nope", "m"), group.ErrUnknownMember)
		require.ErrorIs(t, c.Commit(ctx, "nope", "m", 1, offs), group.ErrUnknownMember)
		_, err := c.Join(ctx, group.JoinRequest{Group: "nope", MemberID: "m", Topics: []string{"a"}})
		require.ErrorIs(t, err, group.ErrUnknownMember)
		require.Empty(t, c.Groups(), "refused requests created a group")

		// Of a group that exists.
		a, err := c.Join(ctx, req("a", "a"))
		require.NoError(t, err)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", "m", a.Generation), group.ErrUnknownMember)
		require.ErrorIs(t, c.Leave(ctx, "g", "m"), group.ErrUnknownMember)
		require.ErrorIs(t, c.Commit(ctx, "g", "m", a.Generation, offs), group.ErrUnknownMember)
		require.ErrorIs(t, c.Commit(ctx, "g", "", -1, offs), group.ErrUnknownMember, "a non-member commit to a group with members")
		r := req("a", "a")
		r.MemberID = "m"
		_, err = c.Join(ctx, r)
		require.ErrorIs(t, err, group.ErrUnknownMember)
		require.Empty(t, c.Committed("g", nil))
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 1)
		require.Equal(t, a.Generation, d.Generation)
	})
}

// TestSimpleCommit: a non-member (member "" generation -1) may commit to a
// group without members, as Kafka allows for consumers that assign
// partitions themselves.
func TestSimpleCommit(t *testing.T) {
	c := newCoordinator(t, group.Config{})
	tp := group.TopicPartition{Topic: "a", Partition: 1}
	require.NoError(t, c.Commit(t.Context(), "solo", "", -1, map[group.TopicPartition]int64{tp: 5}))
	require.Equal(t, map[group.TopicPartition]int64{tp: 5}, c.Committed("solo", nil))
	require.Equal(t, []string{"solo"}, c.Groups())
	d, ok := c.Describe("solo")
	require.True(t, ok)
	require.Equal(t, group.StateEmpty, d.State)
}

func TestCommitStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := grouptest.NewStore(nil)
		c := newCoordinator(t, group.Config{Store: store})
		ctx := context.Background()
		a, err := c.Join(ctx, req("a", "a"))
		require.NoError(t, err)
		tp := group.TopicPartition{Topic: "a", Partition: 0}
		require.NoError(t, c.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{tp: 1}))

		errDisk := errors.New("disk on fire")
		store.FailWith(errDisk)
		err = c.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{tp: 2, {Topic: "a", Partition: 1}: 2})
		require.ErrorIs(t, err, errDisk)
		require.Equal(t, map[group.TopicPartition]int64{tp: 1}, c.Committed("g", nil))
		require.Equal(t, 1, store.Batches())

		store.FailWith(nil)
		require.NoError(t, c.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{tp: 3}))
		require.Equal(t, map[group.TopicPartition]int64{tp: 3}, c.Committed("g", nil))
	})
}

// TestCommitsDurableAcrossRestart: what a coordinator committed, read back
// from the store's records as a broker does at open, is what the next
// coordinator starts with.
func TestCommitsDurableAcrossRestart(t *testing.T) {
	store := grouptest.NewStore(nil)
	ctx := t.Context()
	c, err := group.New(group.Config{Store: store, Partitions: partitionsOf(testTopics)})
	require.NoError(t, err)
	a, err := c.Join(ctx, req("a", "a", "b"))
	require.NoError(t, err)
	want := map[group.TopicPartition]int64{}
	for i, tp := range a.Assignment {
		for off := range int64(3) {
			offs := map[group.TopicPartition]int64{tp: off*10 + int64(i)}
			require.NoError(t, c.Commit(ctx, "g", a.MemberID, a.Generation, offs))
			want[tp] = off*10 + int64(i)
		}
	}
	require.NoError(t, c.Commit(ctx, "other", "", -1, map[group.TopicPartition]int64{{Topic: "b", Partition: 4}: 7}))
	require.NoError(t, c.Close())

	initial, err := store.Initial()
	require.NoError(t, err)
	c2, err := group.New(group.Config{Store: store, Partitions: partitionsOf(testTopics), Initial: initial})
	require.NoError(t, err)
	defer c2.Close()
	require.Equal(t, want, c2.Committed("g", nil))
	require.Equal(t, map[group.TopicPartition]int64{{Topic: "b", Partition: 4}: 7}, c2.Committed("other", nil))
	require.Equal(t, []string{"g", "other"}, c2.Groups())
	// A restarted member is new to the group (members are not persisted).
	_, err = c2.Join(ctx, rejoin(req("a", "a", "b"), a))
	require.ErrorIs(t, err, group.ErrUnknownMember)
	// Initial was copied: changing it changes nothing.
	initial["g"][group.TopicPartition{Topic: "a", Partition: 0}] = 12345
	require.Equal(t, want, c2.Committed("g", nil))
}

func TestInitialSkipsTombstones(t *testing.T) {
	c := newCoordinator(t, group.Config{Initial: map[string]map[group.TopicPartition]int64{
		"g":    {{Topic: "a", Partition: 0}: 4, {Topic: "a", Partition: 1}: -1},
		"gone": {{Topic: "a", Partition: 0}: -1},
	}})
	require.Equal(t, map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 4}, c.Committed("g", nil))
	require.Equal(t, []string{"g"}, c.Groups())
}

// yieldingStore lets other goroutines run after each Store, widening the
// window between a commit's Store and its taking effect.
type yieldingStore struct{ inner *grouptest.Store }

func (s yieldingStore) Store(g string, offsets map[group.TopicPartition]int64) error {
	err := s.inner.Store(g, offsets)
	runtime.Gosched()
	return err
}

// TestCommitOrderMatchesStore: concurrent commits of the same partitions
// (non-member commits, or one member committing from several goroutines)
// take effect in the order they were stored, so what the coordinator shows
// is what a restart reads back.
func TestCommitOrderMatchesStore(t *testing.T) {
	store := grouptest.NewStore(nil)
	c := newCoordinator(t, group.Config{Store: yieldingStore{store}})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				off := int64(w*1000 + i)
				offs := map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: off, {Topic: "a", Partition: 1}: off}
				if err := c.Commit(context.Background(), "g", "", -1, offs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	initial, err := store.Initial()
	require.NoError(t, err)
	require.Equal(t, initial["g"], c.Committed("g", nil))
	require.Equal(t, 8*200, store.Batches())
}

// TestCommitsSerialized: while one commit of a group is in Store, the next
// waits for it (so they take effect in store order); a commit of another
// group does not wait.
func TestCommitsSerialized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{entered: make(chan struct{}, 3), release: make(chan struct{})}
		c := newCoordinator(t, group.Config{Store: store})
		tp := group.TopicPartition{Topic: "a", Partition: 0}
		errs := make(chan error, 3)
		commit := func(g string, off int64) {
			errs <- c.Commit(context.Background(), g, "", -1, map[group.TopicPartition]int64{tp: off})
		}
		go commit("g", 1)
		<-store.entered
		go commit("g", 2)
		synctest.Wait()
		require.Empty(t, store.entered, "a second commit of the group entered Store")
		go commit("other", 3)
		<-store.entered // another group's commit is not held up
		close(store.release)
		for range 3 {
			require.NoError(t, <-errs)
		}
		require.Len(t, store.entered, 1) // the second commit of g, once the first was done
		require.Equal(t, map[group.TopicPartition]int64{tp: 2}, c.Committed("g", nil))
		require.Equal(t, map[group.TopicPartition]int64{tp: 3}, c.Committed("other", nil))
	})
}

// TestCommitWaitRespectsContext: a commit queued behind a slow one gives up
// when its ctx ends, and changes nothing.
func TestCommitWaitRespectsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{entered: make(chan struct{}, 2), release: make(chan struct{})}
		c := newCoordinator(t, group.Config{Store: store})
		tp := group.TopicPartition{Topic: "a", Partition: 0}
		first := make(chan error, 1)
		go func() { first <- c.Commit(context.Background(), "g", "", -1, map[group.TopicPartition]int64{tp: 1}) }()
		<-store.entered
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := c.Commit(ctx, "g", "", -1, map[group.TopicPartition]int64{tp: 2})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		close(store.release)
		require.NoError(t, <-first)
		require.Equal(t, map[group.TopicPartition]int64{tp: 1}, c.Committed("g", nil))
	})
}
