package group_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

var cgT0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func cgJoinReq(g, member string, topics ...string) group.ConsumerHeartbeatRequest {
	return group.ConsumerHeartbeatRequest{Group: g, MemberID: member, RebalanceTimeout: 30 * time.Second,
		SubscribedTopics: topics, Owned: []group.TopicPartition{}, ClientID: "c", ClientHost: "h"}
}

// consumerClient is a well-behaved KIP-848 member over a Coordinator: it
// holds what it was last assigned and reports it.
type consumerClient struct {
	c     *group.Coordinator
	group string
	id    string
	epoch int32
	held  []group.TopicPartition
}

func (cc *consumerClient) beat(t *testing.T) {
	t.Helper()
	require.NoError(t, cc.tryBeat())
}

func (cc *consumerClient) tryBeat() error {
	resp, err := cc.c.ConsumerHeartbeat(context.Background(), group.ConsumerHeartbeatRequest{Group: cc.group, MemberID: cc.id,
		MemberEpoch: cc.epoch, RebalanceTimeout: -1, Owned: slices.Clone(cc.held), ClientID: "c", ClientHost: "h"})
	if err != nil {
		return err
	}
	cc.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		cc.held = resp.Assignment
	}
	return nil
}

func joinClient(t *testing.T, c *group.Coordinator, g, id string, topics ...string) *consumerClient {
	t.Helper()
	resp, err := c.ConsumerHeartbeat(context.Background(), cgJoinReq(g, id, topics...))
	require.NoError(t, err)
	return &consumerClient{c: c, group: g, id: resp.MemberID, epoch: resp.MemberEpoch, held: resp.Assignment}
}

func settle(t *testing.T, c *group.Coordinator, g string, clients ...*consumerClient) {
	t.Helper()
	for range 10 {
		for _, cc := range clients {
			cc.beat(t)
		}
		if d, _ := c.DescribeConsumerGroup(g); d.State == "Stable" {
			return
		}
	}
	d, _ := c.DescribeConsumerGroup(g)
	t.Fatalf("not stable: %+v", d)
}

// TestConsumerHeartbeatOverOffsetsLog: members of a consumer group get
// their partitions through the Coordinator, commit with their epochs, and
// after a restart over the same log the group is back, its members
// heartbeating on at their epochs.
func TestConsumerHeartbeatOverOffsetsLog(t *testing.T) {
	clk := grouptest.NewClock(cgT0)
	l := &grouptest.Log{}
	open := func() *group.Coordinator {
		c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics), Clock: clk}, l)
		require.NoError(t, err)
		return c
	}
	c := open()
	ctx := context.Background()

	a := joinClient(t, c, "g", "", "a", "b")
	require.NotEmpty(t, a.id, "a v0 join gets a member id")
	require.Len(t, a.held, 8)
	b := joinClient(t, c, "g", "member-b", "a", "b")
	require.Empty(t, b.held, "everything still held by a")
	settle(t, c, "g", a, b)
	require.Len(t, a.held, 4)
	require.Len(t, b.held, 4)

	// Commits: at the member's epoch only.
	tp := b.held[0]
	require.NoError(t, c.Commit(ctx, "g", b.id, b.epoch, map[group.TopicPartition]int64{tp: 42}))
	require.ErrorIs(t, c.Commit(ctx, "g", b.id, b.epoch-1, map[group.TopicPartition]int64{tp: 43}), group.ErrStaleMemberEpoch)
	require.ErrorIs(t, c.Commit(ctx, "g", "stranger", 1, map[group.TopicPartition]int64{tp: 43}), group.ErrUnknownMember)
	require.Equal(t, map[group.TopicPartition]int64{tp: 42}, c.Committed("g", nil))

	ls := c.List()
	require.Equal(t, []group.Listing{{Group: "g", ProtocolType: "consumer", State: "Stable", Type: group.TypeConsumer}}, ls)
	before, ok := c.DescribeConsumerGroup("g")
	require.True(t, ok)
	require.NoError(t, c.Close())

	// A restart: the group and the commit come back.
	c = open()
	defer c.Close()
	after, ok := c.DescribeConsumerGroup("g")
	require.True(t, ok)
	require.Equal(t, before, after)
	require.Equal(t, map[group.TopicPartition]int64{tp: 42}, c.Committed("g", nil))
	a.c, b.c = c, c
	epoch := a.epoch
	a.beat(t)
	require.Equal(t, epoch, a.epoch)

	// b goes silent: its session (45 s) ends and a gets everything.
	for range 12 {
		clk.Advance(5 * time.Second)
		a.beat(t)
	}
	d, _ := c.DescribeConsumerGroup("g")
	require.Len(t, d.Members, 1)
	require.Len(t, a.held, 8)
	_, err := c.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "g", MemberID: b.id, MemberEpoch: b.epoch, RebalanceTimeout: -1})
	require.ErrorIs(t, err, group.ErrUnknownMember)
}

func TestConsumerHeartbeatErrors(t *testing.T) {
	l := &grouptest.Log{}
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, l)
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	_, err = c.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "nope", MemberID: "m", MemberEpoch: 3, RebalanceTimeout: -1})
	require.ErrorIs(t, err, group.ErrGroupNotFound)
	_, err = c.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "", MemberID: "m"})
	require.ErrorIs(t, err, group.ErrInvalidGroup)
	req := cgJoinReq("g", "m", "a")
	req.ServerAssignor = "sticky"
	_, err = c.ConsumerHeartbeat(ctx, req)
	require.ErrorIs(t, err, group.ErrUnsupportedAssignor)
	require.Empty(t, c.ConsumerGroups(), "a failed join leaves no group")
	require.Empty(t, l.Records())

	// A classic group with members keeps its id.
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = c.Join(jctx, group.JoinRequest{Group: "classic", Topics: []string{"a"}})
	require.NoError(t, err)
	_, err = c.ConsumerHeartbeat(ctx, cgJoinReq("classic", "m", "a"))
	require.ErrorIs(t, err, group.ErrGroupNotFound)

	// A store that fails: the heartbeat fails and changes nothing.
	boom := errors.New("disk on fire")
	l.FailWith(boom)
	_, err = c.ConsumerHeartbeat(ctx, cgJoinReq("g", "m", "a"))
	require.ErrorIs(t, err, boom)
	require.Empty(t, c.ConsumerGroups())
	l.FailWith(nil)
	resp, err := c.ConsumerHeartbeat(ctx, cgJoinReq("g", "m", "a"))
	require.NoError(t, err)
	require.Equal(t, int32(1), resp.MemberEpoch)
}

// TestConsumerHeartbeatConcurrent: members of several groups heartbeat
// at once (run with -race); every group converges.
func TestConsumerHeartbeatConcurrent(t *testing.T) {
	c, err := group.New(group.Config{Partitions: partitionsOf(testTopics)})
	require.NoError(t, err)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	clients := map[string][]*consumerClient{}
	for _, g := range []string{"g1", "g2"} {
		for _, id := range []string{"x", "y", "z"} {
			clients[g] = append(clients[g], joinClient(t, c, g, id, "a", "b"))
		}
	}
	for _, cs := range clients {
		for _, cc := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					if err := cc.tryBeat(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for g, cs := range clients {
		settle(t, c, g, cs...)
		n := 0
		for _, cc := range cs {
			n += len(cc.held)
		}
		require.Equal(t, 8, n)
	}
}

// TestConsumerGroupDelete: an empty consumer group is deleted with its
// commits, durably; one with members is not; a classic member may take
// the id of an empty consumer group (Kafka's offline downgrade), not of
// one with members.
func TestConsumerGroupDelete(t *testing.T) {
	l := &grouptest.Log{}
	open := func() *group.Coordinator {
		c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, l)
		require.NoError(t, err)
		return c
	}
	c := open()
	ctx := context.Background()
	a := joinClient(t, c, "g", "m", "a")
	tp := group.TopicPartition{Topic: "a", Partition: 0}
	require.NoError(t, c.Commit(ctx, "g", a.id, a.epoch, map[group.TopicPartition]int64{tp: 5}))
	require.ErrorIs(t, c.Delete(ctx, "g"), group.ErrNonEmptyGroup)
	_, err := c.Join(ctx, group.JoinRequest{Group: "g", Topics: []string{"a"}})
	require.ErrorIs(t, err, group.ErrInconsistentGroupProtocol)

	_, err = c.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "g", MemberID: a.id, MemberEpoch: -1, RebalanceTimeout: -1})
	require.NoError(t, err)
	d, ok := c.DescribeConsumerGroup("g")
	require.True(t, ok, "an empty consumer group stays")
	require.Equal(t, "Empty", d.State)
	require.NoError(t, c.Delete(ctx, "g"))
	_, ok = c.DescribeConsumerGroup("g")
	require.False(t, ok)
	require.Empty(t, c.Committed("g", nil))
	require.NoError(t, c.Close())

	c = open()
	_, ok = c.DescribeConsumerGroup("g")
	require.False(t, ok, "deleted for good")
	require.Empty(t, c.Committed("g", nil))

	// An empty consumer group's id goes to a classic member.
	a = joinClient(t, c, "h", "m", "a")
	_, err = c.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "h", MemberID: a.id, MemberEpoch: -1, RebalanceTimeout: -1})
	require.NoError(t, err)
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.Join(jctx, group.JoinRequest{Group: "h", Topics: []string{"a"}})
	require.NoError(t, err)
	require.Len(t, resp.Assignment, 3)
	_, ok = c.DescribeConsumerGroup("h")
	require.False(t, ok)
	require.NoError(t, c.Close())
}

// TestConsumerHeartbeatRestarts drives random members through a
// Coordinator over an OffsetsLog that is closed and opened again now and
// then (a broker restart): clients keep their member ids, epochs and
// partitions across it; no partition is ever held by two clients; in the
// end the group is stable with every partition held once. The seed is
// logged; STRATA_SEED=n replays it.
func TestConsumerHeartbeatRestarts(t *testing.T) {
	seed := seedOf(t)
	r := rand.New(rand.NewPCG(seed, 2))
	clk := grouptest.NewClock(cgT0)
	l := &grouptest.Log{}
	open := func() *group.Coordinator {
		c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics), Clock: clk}, l)
		require.NoError(t, err)
		return c
	}
	c := open()
	defer func() { c.Close() }()
	clients := map[string]*consumerClient{}
	checkDisjoint := func() {
		seen := map[group.TopicPartition]string{}
		for id, cc := range clients {
			for _, p := range cc.held {
				require.Empty(t, seen[p], "%v held by %s and %s (seed %d)", p, seen[p], id, seed)
				seen[p] = id
			}
		}
	}
	for step := range 400 {
		clk.Advance(time.Duration(r.IntN(3000)) * time.Millisecond)
		id := fmt.Sprintf("m%d", r.IntN(5))
		cc := clients[id]
		switch op := r.IntN(20); {
		case op == 0:
			require.NoError(t, c.Close(), "step %d", step)
			c = open()
			for _, cc := range clients {
				cc.c = c
			}
		case cc == nil:
			clients[id] = joinClient(t, c, "g", id, "a", "b")
		case op == 1:
			_, err := c.ConsumerHeartbeat(context.Background(), group.ConsumerHeartbeatRequest{Group: "g", MemberID: id, MemberEpoch: -1, RebalanceTimeout: -1})
			require.NoError(t, err, "step %d (seed %d)", step, seed)
			delete(clients, id)
		default:
			if err := cc.tryBeat(); err != nil {
				// Only a member whose session ended in a long gap may fail.
				require.ErrorIs(t, err, group.ErrUnknownMember, "step %d (seed %d)", step, seed)
				delete(clients, id)
			}
		}
		d, _ := c.DescribeConsumerGroup("g")
		for id := range clients {
			if !slices.ContainsFunc(d.Members, func(m group.ConsumerMemberDescription) bool { return m.MemberID == id }) {
				delete(clients, id) // fenced by a timer; it learns so on its next heartbeat
			}
		}
		checkDisjoint()
	}
	var cs []*consumerClient
	for _, cc := range clients {
		cs = append(cs, cc)
	}
	if len(cs) > 0 {
		settle(t, c, "g", cs...)
		n := 0
		for _, cc := range cs {
			n += len(cc.held)
		}
		require.Equal(t, 8, n, "seed %d", seed)
	}
}

func seedOf(t *testing.T) uint64 {
	seed := rand.Uint64()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("seed %d (STRATA_SEED=%d to replay)", seed, seed)
	return seed
}

// TestConsumerTimerStoreFails: a session that ends while the store fails
// does not fence the member (nothing was stored); the timer tries again
// a second later and then does.
func TestConsumerTimerStoreFails(t *testing.T) {
	clk := grouptest.NewClock(cgT0)
	l := &grouptest.Log{}
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics), Clock: clk}, l)
	require.NoError(t, err)
	defer c.Close()
	joinClient(t, c, "g", "m", "a")
	l.FailWith(errors.New("disk gone"))
	clk.Advance(46 * time.Second)
	d, _ := c.DescribeConsumerGroup("g")
	require.Len(t, d.Members, 1, "the fence could not be stored")
	l.FailWith(nil)
	clk.Advance(time.Second)
	d, _ = c.DescribeConsumerGroup("g")
	require.Empty(t, d.Members)
	require.Equal(t, int32(2), d.Epoch)
}

// TestConsumerGroupTakesEmptyClassicGroup: Kafka's offline upgrade — a
// classic group without members (only commits) becomes a consumer group
// at the first heartbeat, its commits kept.
func TestConsumerGroupTakesEmptyClassicGroup(t *testing.T) {
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, &grouptest.Log{})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	tp := group.TopicPartition{Topic: "a", Partition: 1}
	require.NoError(t, c.Commit(ctx, "g", "", -1, map[group.TopicPartition]int64{tp: 9}))
	a := joinClient(t, c, "g", "m", "a")
	require.Len(t, a.held, 3)
	require.Equal(t, map[group.TopicPartition]int64{tp: 9}, c.Committed("g", nil))
	require.Equal(t, []group.Listing{{Group: "g", ProtocolType: "consumer", State: "Stable", Type: group.TypeConsumer}}, c.List())
	require.ErrorIs(t, c.Commit(ctx, "g", "", -1, map[group.TopicPartition]int64{tp: 10}), group.ErrUnknownMember, "it has members now")
}

// TestConsumerJoinRacesDelete: joins of a new group racing failed joins
// and deletions of it (run with -race): a join that succeeded is never
// lost — its member heartbeats on.
func TestConsumerJoinRacesDelete(t *testing.T) {
	c, err := group.New(group.Config{Partitions: partitionsOf(testTopics)})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	for round := range 50 {
		g := fmt.Sprintf("g%d", round)
		var wg sync.WaitGroup
		joined := make(chan *consumerClient, 1)
		errs := make(chan error, 4)
		wg.Add(3)
		go func() {
			defer wg.Done()
			resp, err := c.ConsumerHeartbeat(ctx, cgJoinReq(g, "m", "a"))
			if err != nil {
				errs <- err
				return
			}
			joined <- &consumerClient{c: c, group: g, id: resp.MemberID, epoch: resp.MemberEpoch, held: resp.Assignment}
		}()
		go func() {
			defer wg.Done()
			// Another member joins (a static one).
			req := cgJoinReq(g, "s", "a")
			req.InstanceID = "i"
			if _, err := c.ConsumerHeartbeat(ctx, req); err != nil && !errors.Is(err, group.ErrUnreleasedInstanceID) {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			if err := c.Delete(ctx, g); err != nil && !errors.Is(err, group.ErrGroupNotFound) && !errors.Is(err, group.ErrNonEmptyGroup) {
				errs <- err
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		cc := <-joined
		require.NoError(t, cc.tryBeat(), "round %d: the member that joined is in the group", round)
	}
}
