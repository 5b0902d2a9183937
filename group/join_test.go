package group_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// TestJoinConcurrentInitialDelay: 1, 2 or 3 members joining at once form one
// generation (the initial rebalance delay collects them).
func TestJoinConcurrentInitialDelay(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCoordinator(t, group.Config{InitialRebalanceDelay: 3 * time.Second})
				var chs []<-chan joined
				for i := range n {
					chs = append(chs, joinAsync(t.Context(), c, req(fmt.Sprintf("m%d", i), "a", "b")))
				}
				for _, ch := range chs {
					pending(t, ch)
				}
				time.Sleep(3 * time.Second)
				var resps []group.JoinResponse
				for _, ch := range chs {
					j := ready(t, ch)
					require.NoError(t, j.err)
					resps = append(resps, j.resp)
				}
				requireGeneration(t, resps, testTopics)
				require.Equal(t, int32(1), resps[0].Generation)
				d, ok := c.Describe("g")
				require.True(t, ok)
				require.Equal(t, group.StateStable, d.State)
				require.Len(t, d.Members, n)
			})
		})
	}
}

// member runs a consumer's side of the eager protocol: join, heartbeat every
// interval, rejoin when told to; each response goes to out. When ctx ends
// it leaves the group.
func member(ctx context.Context, c *group.Coordinator, r group.JoinRequest, interval time.Duration, out chan<- group.JoinResponse) {
	for {
		resp, err := c.Join(ctx, r)
		if err != nil { // ctx ended or the coordinator closed
			if r.MemberID != "" {
				_ = c.Leave(context.Background(), r.Group, r.MemberID)
			}
			return
		}
		r.MemberID = resp.MemberID
		out <- resp
		for {
			select {
			case <-ctx.Done():
				_ = c.Leave(context.Background(), r.Group, r.MemberID)
				return
			case <-time.After(interval):
			}
			err := c.Heartbeat(ctx, r.Group, r.MemberID, resp.Generation)
			if errors.Is(err, group.ErrUnknownMember) {
				r.MemberID = ""
			}
			if err != nil {
				break // rejoin (a consumer would commit first)
			}
		}
	}
}

// TestJoinConcurrentEager: members started at once, with no initial delay,
// converge on one generation through the eager protocol: whoever joined an
// earlier generation learns of the rebalance from its heartbeat and rejoins.
func TestJoinConcurrentEager(t *testing.T) {
	for n := 1; n <= 3; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCoordinator(t, group.Config{})
				ctx, stop := context.WithCancel(t.Context())
				out := make(chan group.JoinResponse, 100)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() { member(ctx, c, req(fmt.Sprintf("m%d", i), "a", "b"), 3*time.Second, out) })
				}
				latest := map[string]group.JoinResponse{}
				converged := func() bool {
					if len(latest) < n {
						return false
					}
					var top int32
					for _, r := range latest {
						top = max(top, r.Generation)
					}
					var gen []group.JoinResponse
					for _, r := range latest {
						if r.Generation == top {
							gen = append(gen, r)
						}
					}
					return len(gen) == n && gen[0].Members == n
				}
				for !converged() {
					r := <-out
					latest[r.MemberID] = r
				}
				requireGeneration(t, slices.Collect(maps.Values(latest)), testTopics)
				// It is stable: a minute of heartbeats later, nobody has rejoined.
				time.Sleep(time.Minute)
				require.Empty(t, out)
				stop()
				wg.Wait()
				_, ok := c.Describe("g")
				require.False(t, ok, "every member left: the group (without commits) is forgotten")
			})
		})
	}
}

func TestLeaveRebalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{})
		ctx := context.Background()
		ra, _, a, b := twoMembers(t, c)
		require.NoError(t, c.Leave(ctx, "g", b.MemberID))
		require.ErrorIs(t, c.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrUnknownMember)
		require.ErrorIs(t, c.Leave(ctx, "g", b.MemberID), group.ErrUnknownMember)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
		a, err := c.Join(ctx, ra)
		require.NoError(t, err)
		require.Equal(t, int32(3), a.Generation)
		requireGeneration(t, []group.JoinResponse{a}, map[string]int{"a": 3})
		require.NoError(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation))
	})
}

// TestLeaveRebalancesThree: of three members, one leaves; the other two
// rejoin concurrently and split its partitions.
func TestLeaveRebalancesThree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		var chs []<-chan joined
		var reqs []group.JoinRequest
		for _, id := range []string{"x", "y", "z"} {
			reqs = append(reqs, req(id, "a", "b"))
			chs = append(chs, joinAsync(ctx, c, reqs[len(reqs)-1]))
		}
		time.Sleep(time.Second)
		var resps []group.JoinResponse
		for i, ch := range chs {
			j := ready(t, ch)
			require.NoError(t, j.err)
			resps = append(resps, j.resp)
			reqs[i] = rejoin(reqs[i], j.resp)
		}
		requireGeneration(t, resps, testTopics)

		require.NoError(t, c.Leave(ctx, "g", resps[1].MemberID))
		chs = nil
		for _, i := range []int{0, 2} {
			require.ErrorIs(t, c.Heartbeat(ctx, "g", resps[i].MemberID, resps[i].Generation), group.ErrRebalanceInProgress)
			chs = append(chs, joinAsync(ctx, c, reqs[i]))
		}
		var next []group.JoinResponse
		for _, ch := range chs {
			j := ready(t, ch)
			require.NoError(t, j.err)
			next = append(next, j.resp)
		}
		requireGeneration(t, next, testTopics)
		require.Equal(t, resps[0].Generation+1, next[0].Generation)
	})
}

// TestSessionTimeout: a member that stops heartbeating is removed after its
// session timeout, on a fake clock; the survivor rebalances and takes its
// partitions.
func TestSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := grouptest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		c := newCoordinator(t, group.Config{Clock: clock})
		ctx := context.Background()
		ra, _, a, b := twoMembers(t, c) // both sessions end at 10 s
		for range 2 {
			clock.Advance(4 * time.Second)
			require.NoError(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation))
		}
		clock.Advance(2*time.Second - time.Nanosecond)
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 2)
		require.Equal(t, group.StateStable, d.State)
		clock.Advance(time.Nanosecond) // 10 s: b's session ends
		d, _ = c.Describe("g")
		require.Len(t, d.Members, 1)
		require.Equal(t, group.StatePreparingRebalance, d.State)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrUnknownMember)
		require.ErrorIs(t, c.Commit(ctx, "g", b.MemberID, b.Generation, map[group.TopicPartition]int64{{Topic: "a", Partition: 2}: 1}), group.ErrUnknownMember)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
		a, err := c.Join(ctx, ra)
		require.NoError(t, err)
		require.Equal(t, int32(3), a.Generation)
		requireGeneration(t, []group.JoinResponse{a}, map[string]int{"a": 3})

		// Alone, a too times out if it falls silent: the group empties.
		clock.Advance(9 * time.Second)
		require.NoError(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation))
		clock.Advance(10*time.Second - time.Nanosecond)
		d, _ = c.Describe("g")
		require.Len(t, d.Members, 1)
		clock.Advance(time.Nanosecond)
		_, ok := c.Describe("g")
		require.False(t, ok)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrUnknownMember)
	})
}

// TestSessionTimeoutSystemClock: the same on the system clock, in the
// bubble's virtual time.
func TestSessionTimeoutSystemClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{})
		ctx := context.Background()
		_, _, a, b := twoMembers(t, c)
		for range 2 {
			time.Sleep(4 * time.Second)
			require.NoError(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation))
		}
		time.Sleep(4 * time.Second) // 12 s: b's session ended at 10 s
		require.ErrorIs(t, c.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrUnknownMember)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
	})
}

// TestRebalanceTimeout: a member that keeps heartbeating but does not rejoin
// is dropped when the rebalance times out; the members that did rejoin get
// the new generation then.
func TestRebalanceTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := grouptest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		c := newCoordinator(t, group.Config{Clock: clock})
		ctx := context.Background()
		ra, _, a, b := twoMembers(t, c)
		chC := joinAsync(ctx, c, req("c", "a")) // rebalance deadline: 30 s from now
		pending(t, chC)
		chA := joinAsync(ctx, c, ra)
		for range 7 { // b: alive, never rejoining
			clock.Advance(4 * time.Second)
			require.ErrorIs(t, c.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrRebalanceInProgress)
			pending(t, chA)
			pending(t, chC)
		}
		clock.Advance(2*time.Second - time.Nanosecond)
		pending(t, chA)
		clock.Advance(time.Nanosecond) // 30 s
		ja, jc := ready(t, chA), ready(t, chC)
		require.NoError(t, ja.err)
		require.NoError(t, jc.err)
		require.Equal(t, a.Generation+1, ja.resp.Generation)
		requireGeneration(t, []group.JoinResponse{ja.resp, jc.resp}, map[string]int{"a": 3})
		require.ErrorIs(t, c.Heartbeat(ctx, "g", b.MemberID, b.Generation), group.ErrUnknownMember)
	})
}

func TestJoinContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{InitialRebalanceDelay: time.Second})
		ctx := context.Background()
		ra := req("a", "a")
		chA := joinAsync(ctx, c, ra)
		time.Sleep(time.Second)
		ja := ready(t, chA)
		require.NoError(t, ja.err)
		a := ja.resp

		// A first join withdrawn: the member is forgotten.
		bctx, cancelB := context.WithCancel(ctx)
		chB := joinAsync(bctx, c, req("b", "a"))
		pending(t, chB)
		cancelB()
		require.ErrorIs(t, ready(t, chB).err, context.Canceled)
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 1)
		require.Equal(t, group.StatePreparingRebalance, d.State) // a must still rejoin
		a, err := c.Join(ctx, rejoin(ra, a))
		require.NoError(t, err)
		require.Equal(t, int32(2), a.Generation)
		require.Equal(t, 1, a.Members)

		// The only member's first join, withdrawn: nothing is left.
		solo, cancelSolo := context.WithCancel(ctx)
		r := req("s", "a")
		r.Group = "solo"
		chS := joinAsync(solo, c, r)
		pending(t, chS) // (the initial delay below holds it)
		cancelSolo()
		require.ErrorIs(t, ready(t, chS).err, context.Canceled)
		_, ok := c.Describe("solo")
		require.False(t, ok)

		// A Join with a context already done does nothing.
		done, cancel := context.WithCancel(ctx)
		cancel()
		_, err = c.Join(done, req("c", "a"))
		require.ErrorIs(t, err, context.Canceled)
		d, _ = c.Describe("g")
		require.Len(t, d.Members, 1)
	})
}

func TestJoinSameSubscriptionKeepsGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{})
		ctx := context.Background()
		ra, rb, a, b := twoMembers(t, c)
		again, err := c.Join(ctx, rb)
		require.NoError(t, err)
		require.Equal(t, b, again)
		// A new subscription rebalances.
		rb.Topics = []string{"a", "b"}
		chB := joinAsync(ctx, c, rb)
		pending(t, chB)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
		a, err = c.Join(ctx, ra)
		require.NoError(t, err)
		jb := ready(t, chB)
		require.NoError(t, jb.err)
		require.Equal(t, int32(3), a.Generation)
		require.Equal(t, []group.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}, a.Assignment)
		require.Equal(t, []group.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "b", Partition: 0}, {Topic: "b", Partition: 1}, {Topic: "b", Partition: 2}, {Topic: "b", Partition: 3}, {Topic: "b", Partition: 4}}, jb.resp.Assignment)
	})
}

func TestMemberIDs(t *testing.T) {
	c := newCoordinator(t, group.Config{})
	ids := map[string]bool{}
	for i := range 3 {
		r := req("client", "a")
		r.Group = fmt.Sprint("g", i)
		resp, err := c.Join(t.Context(), r)
		require.NoError(t, err)
		require.Regexp(t, `^client-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, resp.MemberID)
		require.False(t, ids[resp.MemberID])
		ids[resp.MemberID] = true
	}
}

func TestValidation(t *testing.T) {
	_, err := group.New(group.Config{})
	require.ErrorIs(t, err, group.ErrInvalidConfig, "no Partitions")
	_, err = group.New(group.Config{Partitions: partitionsOf(nil), MinSessionTimeout: time.Minute, MaxSessionTimeout: time.Second})
	require.ErrorIs(t, err, group.ErrInvalidConfig)
	_, err = group.New(group.Config{Partitions: partitionsOf(nil), InitialRebalanceDelay: -1})
	require.ErrorIs(t, err, group.ErrInvalidConfig)

	c := newCoordinator(t, group.Config{})
	ctx := t.Context()
	long := string(make([]byte, group.MaxNameLen+1))
	for _, tc := range []struct {
		name string
		req  group.JoinRequest
		want error
	}{
		{"empty group", group.JoinRequest{Topics: []string{"a"}}, group.ErrInvalidGroup},
		{"long group", group.JoinRequest{Group: long}, group.ErrInvalidGroup},
		{"session too short", group.JoinRequest{Group: "g", SessionTimeout: time.Second}, group.ErrInvalidSessionTimeout},
		{"session too long", group.JoinRequest{Group: "g", SessionTimeout: time.Hour}, group.ErrInvalidSessionTimeout},
		{"negative session", group.JoinRequest{Group: "g", SessionTimeout: -time.Second}, group.ErrInvalidSessionTimeout},
		{"negative rebalance", group.JoinRequest{Group: "g", RebalanceTimeout: -time.Second}, group.ErrInvalidRequest},
		{"empty topic", group.JoinRequest{Group: "g", Topics: []string{""}}, group.ErrInvalidRequest},
		{"long topic", group.JoinRequest{Group: "g", Topics: []string{long}}, group.ErrInvalidRequest},
	} {
		_, err := c.Join(ctx, tc.req)
		require.ErrorIs(t, err, tc.want, tc.name)
	}
	for _, offs := range []map[group.TopicPartition]int64{
		{{Topic: "a", Partition: 0}: -1},
		{{Topic: "a", Partition: -1}: 0},
		{{Topic: "", Partition: 0}: 0},
		{{Topic: long, Partition: 0}: 0},
		{{Topic: "a", Partition: 1 << 31}: 0},
	} {
		require.ErrorIs(t, c.Commit(ctx, "g", "", -1, offs), group.ErrInvalidRequest, "%v", offs)
	}
	require.ErrorIs(t, c.Commit(ctx, "", "", -1, nil), group.ErrInvalidGroup)
	require.Empty(t, c.Groups())

	// Defaults: the zero timeouts are Kafka's; an unknown topic is assigned
	// to no one.
	resp, err := c.Join(ctx, group.JoinRequest{Group: "g", Topics: []string{"a", "nope", "a"}})
	require.NoError(t, err)
	require.Equal(t, []group.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "a", Partition: 2}}, resp.Assignment)
	require.Regexp(t, `^-`, resp.MemberID, "no client id: the id is a dash and a UUID")
	d, _ := c.Describe("g")
	require.Equal(t, []string{"a", "nope"}, d.Members[0].Topics)
}

// TestShorterSessionOnRejoin: a member that rejoins with a shorter session
// timeout is held to it (its armed timer is moved earlier).
func TestShorterSessionOnRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := grouptest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		c := newCoordinator(t, group.Config{Clock: clock})
		ctx := context.Background()
		r := req("a", "a")
		r.SessionTimeout = time.Minute
		a, err := c.Join(ctx, r)
		require.NoError(t, err)
		r = rejoin(r, a)
		r.SessionTimeout = 10 * time.Second
		again, err := c.Join(ctx, r) // the leader's rejoin: a new generation
		require.NoError(t, err)
		require.Equal(t, a.Generation+1, again.Generation)
		require.Equal(t, a.Assignment, again.Assignment)
		clock.Advance(10 * time.Second)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, again.Generation), group.ErrUnknownMember)
	})
}
