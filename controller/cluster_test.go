package controller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/controller/controllertest"
	"github.com/strata-log/strata/internal/leaktest"
)

// cluster is an in-process controller quorum on loopback TCP.
type cluster struct {
	t     testing.TB
	net   *controllertest.Network
	cfgs  []controller.Config
	nodes []*controller.Controller // nil while a member is stopped
}

type clusterOpt func(i int, cfg *controller.Config)

func withClock(clk clock.Clock) clusterOpt {
	return func(_ int, cfg *controller.Config) { cfg.Clock = clk }
}

// testLogger discards, unless STRATA_CONTROLLER_LOG=1 asks for the members'
// logs (Raft's included) on stderr.
func testLogger() *slog.Logger {
	if os.Getenv("STRATA_CONTROLLER_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newCluster starts n members; at the test's end it closes them and checks
// that no goroutine outlives them.
func newCluster(t testing.TB, n int, opts ...clusterOpt) *cluster {
	t.Helper()
	leaktest.Check(t) // before the Cleanup of c.close, so it runs after it
	c := &cluster{t: t, net: controllertest.NewNetwork(), nodes: make([]*controller.Controller, n)}
	peers := make([]controller.Peer, n)
	for i := range peers {
		addr, err := c.net.Reserve()
		require.NoError(t, err)
		peers[i] = controller.Peer{ID: i + 1, RaftAddr: addr}
	}
	for i := range n {
		cfg := controller.Config{
			NodeID:   i + 1,
			Dir:      t.TempDir(),
			RaftAddr: peers[i].RaftAddr,
			Peers:    peers,
			Network:  c.net.Endpoint(peers[i].RaftAddr),
			Logger:   testLogger().With("test", t.Name()),
			Rand:     rand.New(rand.NewPCG(uint64(i), 7)),
			Raft:     controller.LoopbackRaft(),
		}
		for _, o := range opts {
			o(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	t.Cleanup(c.close)
	for i := range n {
		c.start(i)
	}
	return c
}

func (c *cluster) start(i int) {
	c.t.Helper()
	require.Nil(c.t, c.nodes[i], "member %d already running", i+1)
	m, err := controller.Start(c.cfgs[i])
	require.NoError(c.t, err)
	c.nodes[i] = m
}

func (c *cluster) stop(i int) {
	c.t.Helper()
	require.NoError(c.t, c.nodes[i].Close())
	c.nodes[i] = nil
}

func (c *cluster) close() {
	for i, m := range c.nodes {
		if m != nil {
			if err := m.Close(); err != nil {
				c.t.Errorf("close member %d: %v", i+1, err)
			}
			c.nodes[i] = nil
		}
	}
	c.net.Close()
}

// member returns the running member with the given ID.
func (c *cluster) member(id int) *controller.Controller { return c.nodes[id-1] }

// leader waits until the running member m knows a leader and returns it.
func (c *cluster) leader(ctx context.Context, m *controller.Controller) int {
	c.t.Helper()
	id, _, err := m.WaitLeader(ctx)
	require.NoError(c.t, err)
	return id
}

// running returns the running members.
func (c *cluster) running() []*controller.Controller {
	var out []*controller.Controller
	for _, m := range c.nodes {
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// converge waits until every running member has applied version v and
// returns their images.
func (c *cluster) converge(ctx context.Context, v uint64) []*controller.Image {
	c.t.Helper()
	var imgs []*controller.Image
	for _, m := range c.running() {
		img, err := m.Wait(ctx, v-1)
		require.NoError(c.t, err, "member %d", m.ID())
		imgs = append(imgs, img)
	}
	return imgs
}

// version returns the highest version among the running members.
func (c *cluster) version() uint64 {
	var v uint64
	for _, m := range c.running() {
		v = max(v, m.Image().Version())
	}
	return v
}

// requireSameMetadata fails unless the images hold the same brokers and
// topics.
func requireSameMetadata(t testing.TB, want, got *controller.Image) {
	t.Helper()
	require.Equal(t, want.Brokers(), got.Brokers())
	require.Equal(t, want.Topics(), got.Topics())
	for _, name := range want.Topics() {
		a, _ := want.Topic(name)
		b, _ := got.Topic(name)
		require.Equal(t, a, b, "topic %s", name)
	}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The helpers below repeat a change whose outcome a leadership change made
// unknown (ErrLeadershipLost): on a machine shared with other work a CPU
// stall can make the active controller step down at any time, and these
// tests are not about that.
const attempts = 5

// registerBroker registers broker id through m and returns its epoch.
func registerBroker(ctx context.Context, t testing.TB, m *controller.Controller, id int) int64 {
	t.Helper()
	for i := 1; ; i++ {
		epoch, err := m.RegisterBroker(ctx, controller.BrokerRegistration{ID: id, Addr: fmt.Sprintf("broker-%d:9092", id)})
		if err == nil || i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err)
			return epoch
		}
	}
}

func heartbeat(ctx context.Context, t testing.TB, m *controller.Controller, id int, epoch int64) controller.HeartbeatResponse {
	t.Helper()
	for i := 1; ; i++ {
		resp, err := m.Heartbeat(ctx, controller.HeartbeatRequest{BrokerID: id, BrokerEpoch: epoch})
		if err == nil || i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err)
			return resp
		}
	}
}

// liveBrokers registers and unfences brokers through member m.
func liveBrokers(ctx context.Context, t testing.TB, m *controller.Controller, ids ...int) map[int]int64 {
	t.Helper()
	epochs := map[int]int64{}
	for _, id := range ids {
		epoch := registerBroker(ctx, t, m, id)
		require.False(t, heartbeat(ctx, t, m, id, epoch).Fenced)
		epochs[id] = epoch
	}
	return epochs
}

// createTopic creates a topic through m and returns it as committed.
func createTopic(ctx context.Context, t testing.TB, m *controller.Controller, name string, spec controller.TopicSpec) controller.TopicInfo {
	t.Helper()
	for i := 1; ; i++ {
		info, err := m.CreateTopic(ctx, name, spec)
		if err == nil {
			return info
		}
		if i > 1 && errors.Is(err, controller.ErrTopicExists) { // the lost attempt did commit
			img := m.Image()
			for {
				if info, ok := img.Topic(name); ok {
					return info
				}
				img, err = m.Wait(ctx, img.Version())
				require.NoError(t, err)
			}
		}
		if i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err)
		}
	}
}

func deleteTopic(ctx context.Context, t testing.TB, m *controller.Controller, name string) {
	t.Helper()
	for i := 1; ; i++ {
		err := m.DeleteTopic(ctx, name)
		if err == nil || (i > 1 && errors.Is(err, controller.ErrUnknownTopic)) {
			return
		}
		if i == attempts || !errors.Is(err, controller.ErrLeadershipLost) {
			require.NoError(t, err)
		}
	}
}

func TestClusterElectsController(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			ctx := testContext(t)
			c := newCluster(t, n)
			leader := c.leader(ctx, c.nodes[0])
			require.GreaterOrEqual(t, leader, 1)
			require.LessOrEqual(t, leader, n)
			for _, m := range c.nodes {
				id := c.leader(ctx, m)
				require.True(t, id >= 1 && id <= n, "member %d names leader %d", m.ID(), id)
			}

			// Every member can make changes: a follower's requests are forwarded.
			for _, m := range c.nodes {
				registerBroker(ctx, t, m, 100+m.ID())
			}
			imgs := c.converge(ctx, c.version())
			for i, img := range imgs {
				require.Len(t, img.Brokers(), n, "member %d", i+1)
				requireSameMetadata(t, imgs[0], img)
			}
			// Having applied the leader's entries, every member names the same
			// leader. (A busy machine can make leadership move; then the
			// members agree again after the next commit.)
			for try := 1; ; try++ {
				ids := map[int]bool{}
				for _, m := range c.nodes {
					id, addr, ok := m.Leader()
					require.True(t, ok)
					require.Equal(t, c.member(id).Addr(), addr)
					ids[id] = true
				}
				if len(ids) == 1 || try == attempts {
					require.Len(t, ids, 1, "members name different leaders")
					break
				}
				registerBroker(ctx, t, c.nodes[0], 200+try)
				c.converge(ctx, c.version())
			}
		})
	}
}

func TestForwardedRequestsKeepErrorsAndResults(t *testing.T) {
	ctx := testContext(t)
	c := newCluster(t, 3)
	leaderID := c.leader(ctx, c.nodes[0])
	var follower *controller.Controller
	for _, m := range c.nodes {
		if m.ID() != leaderID {
			follower = m
			break
		}
	}
	epochs := liveBrokers(ctx, t, follower, 1, 2, 3)

	topic := createTopic(ctx, t, follower, "orders", controller.TopicSpec{Partitions: 6, ReplicationFactor: 3, MinInSyncReplicas: 2, Configs: map[string]string{"retention.ms": "60000"}})
	require.Equal(t, "orders", topic.Name)
	require.False(t, topic.ID.IsZero())
	require.Len(t, topic.Partitions, 6)
	require.Equal(t, 3, topic.ReplicationFactor())
	require.Equal(t, map[string]string{"retention.ms": "60000"}, topic.Configs)
	leaders := map[int]int{}
	for _, p := range topic.Partitions {
		require.Equal(t, p.Replicas[0], p.Leader)
		require.Equal(t, p.Replicas, p.ISR)
		leaders[p.Leader]++
	}
	require.Equal(t, map[int]int{1: 2, 2: 2, 3: 2}, leaders, "leaders spread evenly")

	_, err := follower.CreateTopic(ctx, "orders", controller.TopicSpec{})
	require.ErrorIs(t, err, controller.ErrTopicExists)
	_, err = follower.CreateTopic(ctx, "bad/name", controller.TopicSpec{})
	require.ErrorIs(t, err, controller.ErrInvalidTopic)
	_, err = follower.CreateTopic(ctx, "big", controller.TopicSpec{ReplicationFactor: 4})
	require.ErrorIs(t, err, controller.ErrInvalidReplicationFactor)
	require.ErrorIs(t, follower.DeleteTopic(ctx, "nope"), controller.ErrUnknownTopic)
	_, err = follower.Heartbeat(ctx, controller.HeartbeatRequest{BrokerID: 1, BrokerEpoch: epochs[1] + 100})
	require.ErrorIs(t, err, controller.ErrStaleBrokerEpoch)

	// AlterPartition: the leader of partition 0 shrinks its ISR with the
	// current epochs; the same request again is stale.
	p := topic.Partitions[0]
	follower2 := p.ISR[1]
	req := controller.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], Topic: "orders", Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		ISR: []int{p.Leader, follower2},
	}
	got, err := follower.AlterPartition(ctx, req)
	require.NoError(t, err)
	require.Equal(t, p.PartitionEpoch+1, got.PartitionEpoch)
	require.Equal(t, p.LeaderEpoch, got.LeaderEpoch)
	require.ElementsMatch(t, []int{p.Leader, follower2}, got.ISR)
	_, err = follower.AlterPartition(ctx, req)
	require.ErrorIs(t, err, controller.ErrStalePartitionEpoch)

	grown, err := follower.CreatePartitions(ctx, "orders", 9)
	require.NoError(t, err)
	require.Len(t, grown.Partitions, 9)
	require.Equal(t, topic.ID, grown.ID)

	deleteTopic(ctx, t, follower, "orders")
	for _, img := range c.converge(ctx, c.version()) {
		require.Empty(t, img.Topics())
	}
}

func TestKillControllerElectsAnotherWithoutLosingMetadata(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			ctx := testContext(t)
			c := newCluster(t, n)
			old := c.leader(ctx, c.nodes[0])
			m := c.member(old)
			liveBrokers(ctx, t, m, 1, 2, 3)
			for i := range 5 {
				createTopic(ctx, t, m, fmt.Sprintf("t%d", i), controller.TopicSpec{Partitions: 3, ReplicationFactor: 3})
			}
			before := m.Image() // everything in it was acknowledged as committed

			c.stop(old - 1)
			survivor := c.running()[0]
			// A write through a survivor succeeds once a new controller is up.
			createTopic(ctx, t, survivor, "after", controller.TopicSpec{Partitions: 1, ReplicationFactor: 3})
			newLeader, _, ok := survivor.Leader()
			require.True(t, ok)
			require.NotEqual(t, old, newLeader)

			imgs := c.converge(ctx, c.version())
			for _, img := range imgs {
				for _, name := range before.Topics() {
					want, _ := before.Topic(name)
					got, ok := img.Topic(name)
					require.True(t, ok, "topic %s lost", name)
					require.Equal(t, want, got)
				}
				require.Equal(t, before.Brokers(), img.Brokers())
				_, ok := img.Topic("after")
				require.True(t, ok)
			}

			// The old controller comes back as a follower with the same metadata.
			c.start(old - 1)
			imgs = c.converge(ctx, c.version())
			for _, img := range imgs {
				requireSameMetadata(t, imgs[0], img)
			}
		})
	}
}

func TestRestartedMemberRejoinsFromItsDir(t *testing.T) {
	ctx := testContext(t)
	// Snapshots keep only 2 entries of log: a member that missed more needs
	// the leader's snapshot (InstallSnapshot, then Restore).
	c := newCluster(t, 3, func(_ int, cfg *controller.Config) { cfg.Raft.TrailingLogs = 2 })
	lead := c.member(c.leader(ctx, c.nodes[0]))
	liveBrokers(ctx, t, lead, 1, 2, 3)
	createTopic(ctx, t, lead, "a", controller.TopicSpec{Partitions: 4, ReplicationFactor: 2})

	// Member 'back' snapshots, takes more entries, stops, misses some, restarts.
	back := 0
	if c.nodes[back] == lead {
		back = 1
	}
	c.converge(ctx, c.version())
	require.NoError(t, c.nodes[back].Snapshot())
	createTopic(ctx, t, lead, "b", controller.TopicSpec{Partitions: 2, ReplicationFactor: 3})
	c.converge(ctx, c.version())
	c.stop(back)
	createTopic(ctx, t, lead, "c", controller.TopicSpec{Partitions: 1, ReplicationFactor: 1})
	deleteTopic(ctx, t, lead, "a")
	registerBroker(ctx, t, lead, 5)
	registerBroker(ctx, t, lead, 6)
	want := c.converge(ctx, c.version())[0]
	for _, m := range c.running() {
		require.NoError(t, m.Snapshot())
	}

	c.start(back)
	got, err := c.nodes[back].Wait(ctx, want.Version()-1)
	require.NoError(t, err)
	require.Equal(t, want.Version(), got.Version())
	requireSameMetadata(t, want, got)

	// The whole quorum restarts from its directories: no bootstrap, same metadata.
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	registerBroker(ctx, t, c.nodes[0], 4)
	for _, img := range c.converge(ctx, c.version()) {
		require.Equal(t, want.Topics(), img.Topics())
		for _, name := range want.Topics() {
			a, _ := want.Topic(name)
			b, _ := img.Topic(name)
			require.Equal(t, a, b)
		}
		require.Len(t, img.Brokers(), 6)
	}
}

func TestSilentBrokerIsFenced(t *testing.T) {
	ctx := testContext(t)
	clk := clocktest.New(time.Unix(1_000_000, 0))
	c := newCluster(t, 3, withClock(clk))
	m := c.nodes[0]
	epochs := liveBrokers(ctx, t, m, 1, 2, 3)
	topic := createTopic(ctx, t, m, "t", controller.TopicSpec{Partitions: 6, ReplicationFactor: 2})
	led := map[int]controller.PartitionState{}
	for _, p := range topic.Partitions {
		if p.Leader == 2 {
			led[p.Partition] = p
		}
	}
	require.NotEmpty(t, led, "broker 2 leads something")
	created := c.version() // broker 2 is unfenced in every image from here on

	// Time goes by in steps of one second; brokers 1 and 3 heartbeat at
	// every step, broker 2 stays silent. Its session (9 s) expires first.
	start := clk.Now()
	var img *controller.Image
	for step := 1; ; step++ {
		require.Less(t, step, 60, "broker 2 never fenced")
		clk.Advance(time.Second)
		for _, id := range []int{1, 3} {
			heartbeat(ctx, t, m, id, epochs[id])
		}
		if step < 9 {
			continue
		}
		// Broker 2's session has expired: watch the metadata for its fence.
		// (Only if leadership moved, and the new controller gave every
		// broker a fresh session, does this wait time out; then time goes on.)
		if img = waitFenced(ctx, t, m, 2, created); img != nil {
			break
		}
	}
	require.GreaterOrEqual(t, clk.Now().Sub(start), 9*time.Second, "fenced before its session expired")
	for _, id := range []int{1, 3} {
		b, _ := img.Broker(id)
		require.False(t, b.Fenced, "broker %d", id)
	}
	for _, before := range topic.Partitions {
		after, _ := img.Partition("t", before.Partition)
		require.NotContains(t, after.ISR, 2, "partition %d", before.Partition)
		if _, wasLed := led[before.Partition]; wasLed {
			require.NotEqual(t, 2, after.Leader)
			require.Contains(t, before.ISR, after.Leader, "new leader from the ISR")
			require.Equal(t, before.LeaderEpoch+1, after.LeaderEpoch)
			require.Equal(t, before.PartitionEpoch+1, after.PartitionEpoch)
		} else if containsInt(before.ISR, 2) {
			require.Equal(t, before.Leader, after.Leader)
			require.Equal(t, before.LeaderEpoch, after.LeaderEpoch)
			require.Equal(t, before.PartitionEpoch+1, after.PartitionEpoch)
		} else {
			require.Equal(t, before, after)
		}
	}

	// Broker 2's next heartbeat unfences it; it stays out of the ISRs until
	// a leader adds it back.
	require.False(t, heartbeat(ctx, t, m, 2, epochs[2]).Fenced)
}

// waitFenced watches m's metadata from version from on until broker id is
// fenced, for up to two seconds; it returns nil if that did not happen.
func waitFenced(ctx context.Context, t testing.TB, m *controller.Controller, id int, from uint64) *controller.Image {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	img, err := m.Wait(ctx, from-1)
	if err != nil {
		require.ErrorIs(t, err, context.DeadlineExceeded)
		return nil
	}
	for {
		if b, _ := img.Broker(id); b.Fenced {
			return img
		}
		var err error
		if img, err = m.Wait(ctx, img.Version()); err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			return nil
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestCutOffMemberCannotCommit(t *testing.T) {
	t.Run("leader", func(t *testing.T) {
		ctx := testContext(t)
		c := newCluster(t, 3)
		old := c.member(c.leader(ctx, c.nodes[0]))
		liveBrokers(ctx, t, old, 1)
		c.converge(ctx, c.version())

		c.net.Isolate(old.Addr())
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err := old.CreateTopic(short, "lost", controller.TopicSpec{})
		cancel()
		require.Error(t, err, "an isolated controller committed a change")
		require.True(t, errors.Is(err, controller.ErrLeadershipLost) || errors.Is(err, controller.ErrNotController), "%v", err)

		// The majority elects a controller of its own and commits.
		var majority []*controller.Controller
		for _, m := range c.running() {
			if m != old {
				majority = append(majority, m)
			}
		}
		createTopic(ctx, t, majority[0], "kept", controller.TopicSpec{})
		newID, _, _ := majority[0].Leader()
		require.NotEqual(t, old.ID(), newID)
		for _, m := range majority {
			img, err := m.Wait(ctx, c.version()-1)
			require.NoError(t, err)
			require.Equal(t, []string{"kept"}, img.Topics())
		}

		// Healed, the old controller follows and drops what it never committed.
		c.net.HealAll()
		v := majority[0].Image().Version()
		registerBroker(ctx, t, majority[0], 2)
		target := c.version()
		require.Greater(t, target, v)
		imgs := c.converge(ctx, target)
		for _, img := range imgs {
			require.Equal(t, []string{"kept"}, img.Topics())
			requireSameMetadata(t, imgs[0], img)
		}
	})
	t.Run("follower", func(t *testing.T) {
		ctx := testContext(t)
		c := newCluster(t, 3)
		lead := c.member(c.leader(ctx, c.nodes[0]))
		liveBrokers(ctx, t, lead, 1)
		c.converge(ctx, c.version())
		var cut *controller.Controller
		for _, m := range c.nodes {
			if m != lead {
				cut = m
				break
			}
		}
		before := cut.Image().Version()
		c.net.Isolate(cut.Addr())
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := cut.CreateTopic(short, "lost", controller.TopicSpec{})
		cancel()
		require.ErrorIs(t, err, controller.ErrNotController)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var nc *controller.NotControllerError
		require.ErrorAs(t, err, &nc)
		// It names the leader it could not reach, or none once its Raft
		// heartbeat timeout made it a candidate.
		if nc.LeaderID != 0 {
			require.Equal(t, lead.ID(), nc.LeaderID, "%v", err)
			require.Equal(t, lead.Addr(), nc.LeaderAddr)
		}
		require.Equal(t, before, cut.Image().Version())
		createTopic(ctx, t, lead, "kept", controller.TopicSpec{})
		v := c.version()
		for _, m := range c.running() {
			if m == cut {
				continue
			}
			img, err := m.Wait(ctx, v-1)
			require.NoError(t, err)
			require.Equal(t, []string{"kept"}, img.Topics())
		}
		require.Equal(t, before, cut.Image().Version(), "the cut-off member applied something")
	})
}

func TestCloseLeaksNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		ctx := testContext(t)
		c := newCluster(t, 3)
		m := c.member(c.leader(ctx, c.nodes[0]))
		liveBrokers(ctx, t, m, 1, 2)
		createTopic(ctx, t, c.nodes[2], "t", controller.TopicSpec{Partitions: 2, ReplicationFactor: 2})
		c.close()
	}()
	leaktest.Wait(t, base)
}

func TestStartRejectsBadConfig(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	for name, cfg := range map[string]controller.Config{
		"no node id":               {Dir: dir, RaftAddr: "127.0.0.1:0"},
		"no dir":                   {NodeID: 1, RaftAddr: "127.0.0.1:0"},
		"no addr":                  {NodeID: 1, Dir: dir},
		"bad addr":                 {NodeID: 1, Dir: dir, RaftAddr: "nope"},
		"broker at a voter's addr": {NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:7002", Peers: []controller.Peer{{ID: 2, RaftAddr: "127.0.0.1:7002"}}},
		"no voters":                {NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:7001", Peers: []controller.Peer{}},
		"duplicate peer":           {NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:7001", Peers: []controller.Peer{{ID: 1, RaftAddr: "127.0.0.1:7001"}, {ID: 1, RaftAddr: "127.0.0.1:7002"}}},
		"port 0 with peers":        {NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:0", Peers: []controller.Peer{{ID: 1, RaftAddr: "127.0.0.1:0"}, {ID: 2, RaftAddr: "127.0.0.1:7002"}}},
		"session <= heartbeat":     {NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:0", HeartbeatInterval: 3 * time.Second, SessionTimeout: 2 * time.Second},
		"raft lease > heartbeat":   {NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:0", Raft: controller.RaftConfig{HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond, LeaderLeaseTimeout: time.Second}},
	} {
		_, err := controller.Start(cfg)
		require.ErrorIs(t, err, controller.ErrInvalidConfig, name)
	}
}

func TestSecondStartOnSameDirFails(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	cfg := controller.Config{NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:0", Raft: controller.LoopbackRaft(), Logger: testLogger()}
	first, err := controller.Start(cfg)
	require.NoError(t, err)
	defer first.Close()
	_, err = controller.Start(cfg)
	require.Error(t, err, "two members on one Dir")
}
