package group_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
	"github.com/strata-log/strata/internal/leaktest"
)

// TestConcurrentMembers hammers one coordinator from many goroutines on the
// system clock (run it with -race): members of several groups join,
// heartbeat, commit and leave, rejoining whenever told to; each commit
// writes a value from one global counter. The committed offsets must then be
// exactly what the store's records say, in the order stored: commits of a
// group take effect in store order, and a refused commit stores nothing.
func TestConcurrentMembers(t *testing.T) {
	before := runtime.NumGoroutine()
	store := grouptest.NewStore(nil)
	c, err := group.New(group.Config{Store: store, Partitions: partitionsOf(testTopics)})
	require.NoError(t, err)
	var counter struct {
		sync.Mutex
		n int64
	}
	next := func() int64 {
		counter.Lock()
		defer counter.Unlock()
		counter.n++
		return counter.n
	}
	const groups, members, ops = 3, 4, 150
	var wg sync.WaitGroup
	for g := range groups {
		for m := range members {
			wg.Go(func() {
				if err := hammer(c, fmt.Sprint("g", g), fmt.Sprint("m", m), ops, m == 0, next); err != nil {
					t.Error(err)
				}
			})
		}
	}
	// Members finishing early leave, and those still looping rejoin without
	// them; the last one out leaves an empty group.
	wg.Wait()
	initial, err := store.Initial()
	require.NoError(t, err)
	for g := range groups {
		id := fmt.Sprint("g", g)
		require.Equal(t, initial[id], c.Committed(id, nil), "group %s", id)
		d, ok := c.Describe(id)
		require.True(t, ok)
		require.Equal(t, group.StateEmpty, d.State)
	}
	require.NoError(t, c.Close())
	leaktest.Wait(t, before)
}

// hammer is one member of TestConcurrentMembers: ops operations (commits
// and heartbeats; with leaves, a leave every 37), rejoining whenever told to.
// It leaves the group when done.
func hammer(c *group.Coordinator, g, clientID string, ops int, leaves bool, next func() int64) error {
	ctx := context.Background()
	r := req(clientID, "a", "b")
	r.Group = g
	defer func() {
		if r.MemberID != "" {
			_ = c.Leave(ctx, g, r.MemberID)
		}
	}()
	var resp group.JoinResponse
	inGeneration := false
	for i := range ops {
		if !inGeneration {
			// A Join blocks until every member has rejoined; every member
			// loops (or leaves), so each rebalance completes.
			var err error
			resp, err = c.Join(ctx, r)
			if errors.Is(err, group.ErrUnknownMember) {
				r.MemberID = ""
				continue
			}
			if err != nil {
				return fmt.Errorf("join: %w", err)
			}
			r.MemberID, inGeneration = resp.MemberID, true
		}
		var err error
		switch {
		case leaves && i%37 == 36:
			if err := c.Leave(ctx, g, r.MemberID); err != nil && !errors.Is(err, group.ErrUnknownMember) {
				return fmt.Errorf("leave: %w", err)
			}
			r.MemberID, inGeneration = "", false
			continue
		case i%2 == 0:
			offs := map[group.TopicPartition]int64{}
			for _, tp := range resp.Assignment {
				offs[tp] = next()
			}
			err = c.Commit(ctx, g, r.MemberID, resp.Generation, offs)
		default:
			err = c.Heartbeat(ctx, g, r.MemberID, resp.Generation)
		}
		switch {
		case err == nil:
		case errors.Is(err, group.ErrUnknownMember):
			r.MemberID, inGeneration = "", false
		case errors.Is(err, group.ErrRebalanceInProgress), errors.Is(err, group.ErrIllegalGeneration):
			inGeneration = false
		default:
			return err
		}
	}
	return nil
}
