package group_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// The driver is tested through the public API, in virtual time: inside a
// testing/synctest bubble (time.AfterFunc and time.Sleep move with the
// bubble's clock, and synctest.Wait says when every goroutine is blocked —
// a Join is pending), some with a grouptest.Clock to drive the Clock seam.

var errUnknownTopic = errors.New("test: unknown topic")

// testTopics: topic → partition count.
var testTopics = map[string]int{"a": 3, "b": 5}

func partitionsOf(m map[string]int) func(string) (int, error) {
	return func(topic string) (int, error) {
		n, ok := m[topic]
		if !ok {
			return 0, errUnknownTopic
		}
		return n, nil
	}
}

func newCoordinator(t testing.TB, cfg group.Config) *group.Coordinator {
	t.Helper()
	if cfg.Partitions == nil {
		cfg.Partitions = partitionsOf(testTopics)
	}
	c, err := group.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

type joined struct {
	resp group.JoinResponse
	err  error
}

// joinAsync starts a Join and returns where its outcome will arrive.
func joinAsync(ctx context.Context, c *group.Coordinator, req group.JoinRequest) <-chan joined {
	ch := make(chan joined, 1)
	go func() {
		resp, err := c.Join(ctx, req)
		ch <- joined{resp, err}
	}()
	return ch
}

// ready returns the outcome of a Join that must have completed.
func ready(t *testing.T, ch <-chan joined) joined {
	t.Helper()
	synctest.Wait()
	select {
	case j := <-ch:
		return j
	default:
		t.Fatal("Join still pending")
		return joined{}
	}
}

// pending asserts that a Join has not completed.
func pending(t *testing.T, ch <-chan joined) {
	t.Helper()
	synctest.Wait()
	select {
	case j := <-ch:
		t.Fatalf("Join completed: %+v, %v", j.resp, j.err)
	default:
	}
}

func req(clientID string, topics ...string) group.JoinRequest {
	return group.JoinRequest{Group: "g", ClientID: clientID, Topics: topics,
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 30 * time.Second}
}

func rejoin(r group.JoinRequest, resp group.JoinResponse) group.JoinRequest {
	r.MemberID = resp.MemberID
	return r
}

// requireGeneration asserts that resps form one generation: the same
// generation and group size, distinct members, and assignments that are
// disjoint and together cover every partition of every subscribed topic.
func requireGeneration(t *testing.T, resps []group.JoinResponse, topics map[string]int) {
	t.Helper()
	require.NotEmpty(t, resps)
	owner := map[group.TopicPartition]string{}
	ids := map[string]bool{}
	for _, r := range resps {
		require.Equal(t, resps[0].Generation, r.Generation, "generation")
		require.Equal(t, len(resps), r.Members, "group size")
		require.False(t, ids[r.MemberID], "member %s twice", r.MemberID)
		ids[r.MemberID] = true
		for _, tp := range r.Assignment {
			require.Empty(t, owner[tp], "%v assigned to %s and %s", tp, owner[tp], r.MemberID)
			owner[tp] = r.MemberID
		}
	}
	var want []group.TopicPartition
	for topic, n := range topics {
		for p := range n {
			want = append(want, group.TopicPartition{Topic: topic, Partition: p})
		}
	}
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(owner)))
}

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

// twoMembers forms generation 2 of members a ([a/0 a/1]) and b ([a/2]) on
// topic a: a joins alone, b's join starts a rebalance, a learns of it from
// its heartbeat and rejoins.
func twoMembers(t *testing.T, c *group.Coordinator) (ra, rb group.JoinRequest, a, b group.JoinResponse) {
	t.Helper()
	ctx := context.Background()
	ra, rb = req("a", "a"), req("b", "a")
	a, err := c.Join(ctx, ra)
	require.NoError(t, err)
	require.Equal(t, int32(1), a.Generation)
	require.Equal(t, 1, a.Members)
	chB := joinAsync(ctx, c, rb)
	pending(t, chB)
	require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrRebalanceInProgress)
	ra = rejoin(ra, a)
	a, err = c.Join(ctx, ra)
	require.NoError(t, err)
	jb := ready(t, chB)
	require.NoError(t, jb.err)
	b = jb.resp
	rb = rejoin(rb, b)
	require.Equal(t, int32(2), a.Generation)
	require.Equal(t, []group.TopicPartition{{"a", 0}, {"a", 1}}, a.Assignment) // "a-…" sorts before "b-…"
	require.Equal(t, []group.TopicPartition{{"a", 2}}, b.Assignment)
	requireGeneration(t, []group.JoinResponse{a, b}, map[string]int{"a": 3})
	return ra, rb, a, b
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
		require.ErrorIs(t, c.Commit(ctx, "g", b.MemberID, b.Generation, map[group.TopicPartition]int64{{"a", 2}: 1}), group.ErrUnknownMember)
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
		require.Equal(t, map[group.TopicPartition]int64{tp0: 12}, c.Committed("g", []group.TopicPartition{tp0, {"a", 1}}))
	})
}

func TestUnknownMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoordinator(t, group.Config{})
		ctx := context.Background()
		offs := map[group.TopicPartition]int64{{"a", 0}: 1}
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
		err = c.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{tp: 2, {"a", 1}: 2})
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
	require.NoError(t, c.Commit(ctx, "other", "", -1, map[group.TopicPartition]int64{{"b", 4}: 7}))
	require.NoError(t, c.Close())

	initial, err := store.Initial()
	require.NoError(t, err)
	c2, err := group.New(group.Config{Store: store, Partitions: partitionsOf(testTopics), Initial: initial})
	require.NoError(t, err)
	defer c2.Close()
	require.Equal(t, want, c2.Committed("g", nil))
	require.Equal(t, map[group.TopicPartition]int64{{"b", 4}: 7}, c2.Committed("other", nil))
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
		"g":    {{"a", 0}: 4, {"a", 1}: -1},
		"gone": {{"a", 0}: -1},
	}})
	require.Equal(t, map[group.TopicPartition]int64{{"a", 0}: 4}, c.Committed("g", nil))
	require.Equal(t, []string{"g"}, c.Groups())
}

func TestCloseFailsPendingJoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := group.New(group.Config{Partitions: partitionsOf(testTopics)})
		require.NoError(t, err)
		ctx := context.Background()
		a, err := c.Join(ctx, req("a", "a"))
		require.NoError(t, err)
		chB := joinAsync(ctx, c, req("b", "a"))
		chC := joinAsync(ctx, c, req("c", "a"))
		pending(t, chB)
		pending(t, chC)
		require.NoError(t, c.Close())
		require.ErrorIs(t, ready(t, chB).err, group.ErrClosed)
		require.ErrorIs(t, ready(t, chC).err, group.ErrClosed)
		require.NoError(t, c.Close(), "Close twice")

		_, err = c.Join(ctx, req("d", "a"))
		require.ErrorIs(t, err, group.ErrClosed)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrClosed)
		require.ErrorIs(t, c.Leave(ctx, "g", a.MemberID), group.ErrClosed)
		require.ErrorIs(t, c.Commit(ctx, "g", a.MemberID, a.Generation, nil), group.ErrClosed)
		// No timer fires after Close: a minute later nothing has changed.
		time.Sleep(time.Minute)
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 3)
		// The bubble ends only when every goroutine it started has: a timer
		// callback or Join left behind would fail the test.
	})
}

// blockingStore blocks every Store until release is closed.
type blockingStore struct {
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Store(string, map[group.TopicPartition]int64) error {
	s.entered <- struct{}{}
	<-s.release
	return nil
}

// TestCloseWaitsForStore: Close returns only after the Store calls in
// progress have; a commit queued behind one fails with ErrClosed.
func TestCloseWaitsForStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{entered: make(chan struct{}, 2), release: make(chan struct{})}
		c, err := group.New(group.Config{Store: store, Partitions: partitionsOf(testTopics)})
		require.NoError(t, err)
		offs := map[group.TopicPartition]int64{{"a", 0}: 1}
		first, second := make(chan error, 1), make(chan error, 1)
		go func() { first <- c.Commit(context.Background(), "g", "", -1, offs) }()
		<-store.entered
		go func() { second <- c.Commit(context.Background(), "g", "", -1, offs) }()
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while Store was in progress")
		default:
		}
		close(store.release)
		<-closed
		require.NoError(t, <-first)
		require.ErrorIs(t, <-second, group.ErrClosed)
		require.Equal(t, offs, c.Committed("g", nil))
	})
}

// manualClock hands its timers to the test, which fires them when it likes.
type manualClock struct {
	mu     sync.Mutex
	timers []*manualTimer
}

type manualTimer struct {
	f       func()
	stopped bool
	fired   bool
}

func (c *manualClock) Now() time.Time { return time.Unix(0, 0) }

func (c *manualClock) AfterFunc(d time.Duration, f func()) group.Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{f: f}
	c.timers = append(c.timers, t)
	return &manualStopper{c, t}
}

type manualStopper struct {
	c *manualClock
	t *manualTimer
}

func (s *manualStopper) Stop() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.t.fired || s.t.stopped {
		return false
	}
	s.t.stopped = true
	return true
}

// take marks every live timer fired and returns their callbacks.
func (c *manualClock) take() []func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var fs []func()
	for _, t := range c.timers {
		if !t.fired && !t.stopped {
			t.fired = true
			fs = append(fs, t.f)
		}
	}
	return fs
}

// TestCloseWaitsForFiredTimers: a timer that fired before Close but whose
// callback has not run yet is waited for; the callback then does nothing.
func TestCloseWaitsForFiredTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &manualClock{}
		c, err := group.New(group.Config{Clock: clock, Partitions: partitionsOf(testTopics)})
		require.NoError(t, err)
		_, err = c.Join(context.Background(), req("a", "a"))
		require.NoError(t, err)
		fired := clock.take() // the session timer: "fired", its callback not yet run
		require.Len(t, fired, 1)
		closed := make(chan struct{})
		go func() { c.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned before a fired timer's callback ran")
		default:
		}
		fired[0]()
		<-closed
		d, _ := c.Describe("g")
		require.Len(t, d.Members, 1, "a callback run after Close changed the group")
	})
}

// TestNoGoroutineLeak: on the system clock, outside any bubble, a
// coordinator with members, pending joins and armed timers leaves no
// goroutine behind after Close.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	c, err := group.New(group.Config{Partitions: partitionsOf(testTopics)})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Join(ctx, req("a", "a"))
	require.NoError(t, err)
	ch := joinAsync(ctx, c, req("b", "a"))
	require.NoError(t, c.Close())
	require.ErrorIs(t, (<-ch).err, group.ErrClosed)
	requireGoroutines(t, before)
}

// requireGoroutines waits (a bounded number of yields) for the goroutine
// count to come back to n.
func requireGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > n; i++ {
		if i == 1000 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		if i > 100 {
			time.Sleep(time.Millisecond)
		}
	}
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
		require.Equal(t, []group.TopicPartition{{"a", 0}, {"a", 1}}, a.Assignment)
		require.Equal(t, []group.TopicPartition{{"a", 2}, {"b", 0}, {"b", 1}, {"b", 2}, {"b", 3}, {"b", 4}}, jb.resp.Assignment)
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
		{{"a", 0}: -1},
		{{"a", -1}: 0},
		{{"", 0}: 0},
		{{long, 0}: 0},
		{{"a", 1 << 31}: 0},
	} {
		require.ErrorIs(t, c.Commit(ctx, "g", "", -1, offs), group.ErrInvalidRequest, "%v", offs)
	}
	require.ErrorIs(t, c.Commit(ctx, "", "", -1, nil), group.ErrInvalidGroup)
	require.Empty(t, c.Groups())

	// Defaults: the zero timeouts are Kafka's; an unknown topic is assigned
	// to no one.
	resp, err := c.Join(ctx, group.JoinRequest{Group: "g", Topics: []string{"a", "nope", "a"}})
	require.NoError(t, err)
	require.Equal(t, []group.TopicPartition{{"a", 0}, {"a", 1}, {"a", 2}}, resp.Assignment)
	require.Regexp(t, `^-`, resp.MemberID, "no client id: the id is a dash and a UUID")
	d, _ := c.Describe("g")
	require.Equal(t, []string{"a", "nope"}, d.Members[0].Topics)
}

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
	requireGoroutines(t, before)
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
		again, err := c.Join(ctx, r)
		require.NoError(t, err)
		require.Equal(t, a, again)
		clock.Advance(10 * time.Second)
		require.ErrorIs(t, c.Heartbeat(ctx, "g", a.MemberID, a.Generation), group.ErrUnknownMember)
	})
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
				offs := map[group.TopicPartition]int64{{"a", 0}: off, {"a", 1}: off}
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
