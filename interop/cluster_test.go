package interop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/testnet"
)

// Kafka clients against a cluster of three replica members in this
// process: Raft, replication and the Kafka clients' connections all over a
// testnet (loopback TCP), the clients given every member's address.
//
// The producers do not ask for idempotence: cluster members do not serve
// InitProducerId yet (producer ids must come from the controller to be
// unique cluster-wide), so kgo runs with DisableIdempotentWrite and a record
// may be stored twice after a failover; the tests count distinct values.

type cluster struct {
	t       *testing.T
	net     *testnet.Network
	peers   []replica.Peer
	dirs    []string
	members []*replica.Broker // index id-1; nil once stopped
}

func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return startClusterWith(t, n, "every member registered", nil, func(controller.BrokerInfo) bool { return true })
}

// startClusterWith starts n members on loopback timings, each member's
// config passed to configure (if set) before it starts, and waits until n
// brokers are unfenced and ready (what says it).
func startClusterWith(t *testing.T, n int, what string, configure func(id int, node *testnet.Node, cfg *replica.Config),
	ready func(controller.BrokerInfo) bool) *cluster {
	t.Helper()
	c := &cluster{t: t, net: testnet.New()}
	t.Cleanup(func() { c.net.Close() })
	for i := 1; i <= n; i++ {
		raft, err := c.net.Node(memberNode(i)).Reserve()
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.net.Node(memberNode(i)).Reserve()
		if err != nil {
			t.Fatal(err)
		}
		c.peers = append(c.peers, replica.Peer{ID: i, Addr: data, RaftAddr: raft})
		c.dirs = append(c.dirs, t.TempDir())
	}
	c.members = make([]*replica.Broker, n)
	t.Cleanup(func() {
		for id := range c.members {
			c.stop(id + 1)
		}
	})
	for i := 1; i <= n; i++ {
		cfg := replica.Config{
			ID: i, Dir: c.dirs[i-1], Addr: c.peers[i-1].Addr, RaftAddr: c.peers[i-1].RaftAddr, Peers: c.peers,
			Network:           c.net.Node(memberNode(i)),
			Raft:              controller.LoopbackRaft(),
			HeartbeatInterval: 50 * time.Millisecond,
			SessionTimeout:    600 * time.Millisecond,
			ReplicaLagTime:    2 * time.Second,
			FetchMaxWait:      200 * time.Millisecond,
		}
		if configure != nil {
			configure(i, c.net.Node(memberNode(i)), &cfg)
		}
		b, err := replica.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.members[i-1] = b
	}
	c.waitImage(what, func(img *controller.Image) bool {
		live := 0
		for _, bi := range img.Brokers() {
			if !bi.Fenced && ready(bi) {
				live++
			}
		}
		return live == n
	})
	return c
}

func memberNode(id int) string { return fmt.Sprintf("member-%d", id) }

// dial is how the clients connect: as the node "client" of the testnet.
func (c *cluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.net.Node("client").DialContext(ctx, network, addr)
}

// saramaDialer is dial for sarama's proxy hook.
type saramaDialer struct{ c *cluster }

func (d saramaDialer) Dial(network, addr string) (net.Conn, error) {
	return d.c.dial(context.Background(), network, addr)
}

func (c *cluster) stop(id int) {
	if b := c.members[id-1]; b != nil {
		if err := b.Close(); err != nil {
			c.t.Errorf("close member %d: %v", id, err)
		}
		c.members[id-1] = nil
	}
}

// any returns a running member.
func (c *cluster) any() *replica.Broker {
	for _, b := range c.members {
		if b != nil {
			return b
		}
	}
	c.t.Fatal("no running member")
	return nil
}

// seeds are the data-plane addresses of every member, stopped or not, as
// a client's configuration would list them.
func (c *cluster) seeds() []string {
	out := make([]string, len(c.peers))
	for i, p := range c.peers {
		out[i] = p.Addr
	}
	return out
}

// waitImage waits until every running member has applied metadata that
// satisfies cond.
func (c *cluster) waitImage(what string, cond func(*controller.Image) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, b := range c.members {
		if b == nil {
			continue
		}
		for img := b.Image(); !cond(img); {
			var err error
			if img, err = b.WaitImage(ctx, img.Version()); err != nil {
				c.t.Fatalf("member %d: waiting for %s: %v", b.ID(), what, err)
			}
		}
	}
}

func (c *cluster) leader(topic string, p int) int {
	st, ok := c.any().Image().Partition(topic, p)
	if !ok {
		c.t.Fatalf("no partition %s-%d", topic, p)
	}
	return st.Leader
}

// createOffsetsTopic makes the first group call, whose FindCoordinator
// creates __consumer_offsets, and waits until every member knows a leader
// for each of its partitions.
func (c *cluster) createOffsetsTopic(ctx context.Context, adm *kadm.Client) {
	c.t.Helper()
	if _, err := adm.FetchOffsets(ctx, "probe"); err != nil {
		c.t.Fatalf("first group call: %v", err)
	}
	c.waitImage(log.OffsetsTopic+" led", func(img *controller.Image) bool {
		ot, ok := img.Topic(log.OffsetsTopic)
		for _, st := range ot.Partitions {
			ok = ok && st.Leader != controller.NoLeader
		}
		return ok
	})
}

// groupLedBy returns a group whose coordinator is member id: the leader
// of the group's __consumer_offsets partition; false if id leads none.
func (c *cluster) groupLedBy(id int) (string, bool) {
	c.t.Helper()
	img := c.any().Image()
	ot, ok := img.Topic(log.OffsetsTopic)
	if !ok {
		c.t.Fatalf("no %s", log.OffsetsTopic)
	}
	for i := range 1000 {
		g := fmt.Sprintf("g%d", i)
		if ot.Partitions[replica.GroupPartition(g, len(ot.Partitions))].Leader == id {
			return g, true
		}
	}
	return "", false
}

// clusterRun is one Kafka client library in the failover scenario.
type clusterRun struct {
	// produce sends values (acks=all) and returns those acknowledged.
	produce func(ctx context.Context, t *testing.T, c *cluster, values []string) []string
	// member starts a group member sending the values it consumes to out.
	member func(ctx context.Context, t *testing.T, c *cluster, group string, out chan<- string) (stop func())
}

// testClusterFailover: the scenario. Two group members consume a topic of
// the cluster while a producer writes to it; mid-run the member that leads
// one of its partitions and coordinates the group is stopped. Every acknowledged
// record is consumed, the offsets committed before the stop survive on the
// new coordinator, and the group commits to the end.
func testClusterFailover(t *testing.T, run clusterRun) {
	const topic, parts, n = "orders", 3, 400
	c := startCluster(t, 3)
	ctx := testCtx(t, 90*time.Second)
	if err := c.any().CreateTopic(ctx, topic, log.TopicConfig{Partitions: parts, ReplicationFactor: 3, MinInSyncReplicas: 2}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClusterKgo(t, c))
	c.createOffsetsTopic(ctx, adm)
	// The victim leads a partition of the topic and coordinates the group.
	victim, part, group := 0, 0, ""
	for p := range parts {
		if g, ok := c.groupLedBy(c.leader(topic, p)); ok {
			victim, part, group = c.leader(topic, p), p, g
			break
		}
	}
	if group == "" {
		t.Fatalf("no leader of %s leads a partition of %s", topic, log.OffsetsTopic)
	}

	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("value-%03d", i)
	}
	acked := run.produce(ctx, t, c, vals[:n/2])
	if len(acked) != n/2 {
		t.Fatalf("%d of %d records acknowledged before any failure", len(acked), n/2)
	}

	consumed := make(chan string, 64)
	stops := []func(){run.member(ctx, t, c, group, consumed), run.member(ctx, t, c, group, consumed)}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	seen := map[string]bool{}
	await := func(want []string) {
		t.Helper()
		for {
			missing := 0
			for _, v := range want {
				if !seen[v] {
					missing++
				}
			}
			if missing == 0 {
				return
			}
			select {
			case v := <-consumed:
				seen[v] = true
			case <-ctx.Done():
				t.Fatalf("the group consumed %d distinct records; %d acknowledged ones missing", len(seen), missing)
			}
		}
	}
	await(acked[:n/4])
	before := committedOffsets(ctx, t, adm, group, topic, true)

	// Stop the leader of partition 0, the group's coordinator, while the
	// producer writes the second half.
	produced := make(chan []string, 1)
	go func() { produced <- run.produce(ctx, t, c, vals[n/2:]) }()
	c.stop(victim)
	more := <-produced
	t.Logf("after the stop of member %d: %d of %d records acknowledged", victim, len(more), n/2)
	acked = append(acked, more...)
	await(acked)

	if next := c.leader(topic, part); next == victim {
		t.Fatalf("member %d still leads %s-%d", victim, topic, part)
	}
	// A fresh admin client: kgo keeps a coordinator it cannot dial until
	// its metadata drops the stopped broker.
	adm = kadm.NewClient(newClusterKgo(t, c))
	after := committedOffsets(ctx, t, adm, group, topic, false)
	for p, off := range before {
		if after[p] < off {
			t.Fatalf("partition %d: committed %d after the coordinator's stop, %d before", p, after[p], off)
		}
	}
	drainStrings(ctx, consumed)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	awaitCommitted(ctx, t, adm, group, topic, ends)

	// The admin APIs find the group at its new coordinator: DescribeGroups
	// there, ListGroups (sent to every broker) from whichever runs it.
	dg := awaitGroup(ctx, t, adm, group, "stable with both members", func(dg kadm.DescribedGroup) bool {
		return dg.State == "Stable" && len(dg.Members) == 2
	})
	if int(dg.Coordinator.NodeID) == victim {
		t.Fatalf("group %s described by member %d, which was stopped", group, victim)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed[group]; !ok || int(lg.Coordinator) != int(dg.Coordinator.NodeID) {
		t.Fatalf("ListGroups: %+v, want %s at member %d", listed, group, dg.Coordinator.NodeID)
	}
}

// committedOffsets returns the group's committed offsets of topic, by
// partition; nonEmpty waits (polling: nothing announces a commit to a
// client) until there is at least one.
func committedOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, nonEmpty bool) map[int32]int64 {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		os, err := adm.FetchOffsets(ctx, group)
		out := map[int32]int64{}
		if err == nil {
			os.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.Err == nil && o.At >= 0 {
					out[o.Partition] = o.At
				}
			})
			if len(out) > 0 || !nonEmpty {
				return out
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no committed offsets of %s: %v", group, err)
		case <-tick.C:
		}
	}
}

// drainStrings takes what members consume until ctx ends, so that none is
// blocked (and stops committing) on a full channel.
func drainStrings(ctx context.Context, ch <-chan string) {
	go func() {
		for {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
}

func newClusterKgo(t *testing.T, c *cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.Dialer(c.dial)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKgoClusterFailover: kgo produces (acks=all) and consumes in a group
// across the stop of a partition leader that coordinates the group.
func TestKgoClusterFailover(t *testing.T) {
	testClusterFailover(t, clusterRun{
		produce: func(ctx context.Context, t *testing.T, c *cluster, values []string) []string {
			cl := newClusterKgo(t, c, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.RecordDeliveryTimeout(20*time.Second), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			defer cl.Close()
			var acked []string
			for _, v := range values {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr(); err == nil {
					acked = append(acked, v)
				} else {
					t.Logf("kgo produce %s: %v", v, err)
				}
			}
			return acked
		},
		member: func(ctx context.Context, t *testing.T, c *cluster, group string, out chan<- string) func() {
			cl := newClusterKgo(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100*time.Millisecond),
				kgo.AutoCommitInterval(100*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for pctx.Err() == nil {
					fs := cl.PollFetches(pctx)
					fs.EachError(func(topic string, p int32, err error) {
						switch {
						case errors.Is(err, context.Canceled), kerr.IsRetriable(err):
						case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.RebalanceInProgress):
							// The new coordinator knows the group's offsets, not
							// its members: kgo rejoins.
							t.Logf("kgo group (it rejoins): %v", err)
						default:
							t.Errorf("kgo fetch %s/%d: %v", topic, p, err)
						}
					})
					for _, r := range fs.Records() {
						select {
						case out <- string(r.Value):
						case <-pctx.Done():
							return
						}
					}
				}
			}()
			return func() { cancel(); <-done; cl.Close() }
		},
	})
}

// TestSaramaClusterFailover: sarama's SyncProducer (acks=all) and a
// sarama ConsumerGroup across the same failover.
func TestSaramaClusterFailover(t *testing.T) {
	config := func(c *cluster) *sarama.Config {
		cfg := saramaConfig()
		cfg.Version = sarama.V2_1_0_0
		cfg.Net.Proxy.Enable, cfg.Net.Proxy.Dialer = true, saramaDialer{c}
		cfg.Metadata.Retry.Max, cfg.Metadata.Retry.Backoff = 20, 50*time.Millisecond
		return cfg
	}
	testClusterFailover(t, clusterRun{
		produce: func(ctx context.Context, t *testing.T, c *cluster, values []string) []string {
			cfg := config(c)
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Partitioner = sarama.NewRoundRobinPartitioner
			cfg.Producer.Retry.Max, cfg.Producer.Retry.Backoff = 20, 50*time.Millisecond
			p, err := sarama.NewSyncProducer(c.seeds(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var acked []string
			for _, v := range values {
				if ctx.Err() != nil {
					break
				}
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "orders", Value: sarama.StringEncoder(v)}); err == nil {
					acked = append(acked, v)
				} else {
					t.Logf("sarama produce %s: %v", v, err)
				}
			}
			return acked
		},
		member: func(ctx context.Context, t *testing.T, c *cluster, group string, out chan<- string) func() {
			cfg := config(c)
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			cfg.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
			cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
			cfg.Consumer.Group.Rebalance.Retry.Max, cfg.Consumer.Group.Rebalance.Retry.Backoff = 20, 50*time.Millisecond
			cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
			cfg.Consumer.Return.Errors = true
			g, err := sarama.NewConsumerGroup(c.seeds(), group, cfg)
			if err != nil {
				t.Fatal(err)
			}
			relay := make(chan *sarama.ConsumerMessage)
			gctx, cancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Add(3)
			go func() {
				defer wg.Done()
				for gctx.Err() == nil {
					if err := g.Consume(gctx, []string{"orders"}, saramaHandler{relay}); err != nil {
						if errors.Is(err, sarama.ErrClosedConsumerGroup) {
							return
						}
						t.Logf("sarama consume (retried): %v", err)
						select { // a back-off, not a wait for an event
						case <-time.After(50 * time.Millisecond):
						case <-gctx.Done():
						}
					}
				}
			}()
			go func() {
				defer wg.Done()
				for err := range g.Errors() {
					t.Logf("sarama group (it retries): %v", err) // the coordinator's stop shows here
				}
			}()
			go func() {
				defer wg.Done()
				for {
					select {
					case m := <-relay:
						select {
						case out <- string(m.Value):
						case <-gctx.Done():
							return
						}
					case <-gctx.Done():
						return
					}
				}
			}()
			return func() {
				cancel()
				if err := g.Close(); err != nil {
					t.Errorf("close sarama group: %v", err)
				}
				wg.Wait()
			}
		},
	})
}
