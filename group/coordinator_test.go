package group_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
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
	require.Equal(t, []group.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}, a.Assignment) // "a-…" sorts before "b-…"
	require.Equal(t, []group.TopicPartition{{Topic: "a", Partition: 2}}, b.Assignment)
	requireGeneration(t, []group.JoinResponse{a, b}, map[string]int{"a": 3})
	return ra, rb, a, b
}
