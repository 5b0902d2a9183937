package replica_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/replicatest"
	"github.com/strata-log/strata/testnet"
)

// cluster is n members in this process: Raft over testnet (loopback TCP
// whose links can be cut), replication over a LocalNetwork.
type memberCluster struct {
	t       testing.TB
	net     *testnet.Network
	local   *replicatest.LocalNetwork
	peers   []replica.Peer
	dirs    []string
	members []*replica.Broker // index id-1; nil while stopped
	kafka   bool              // replication over the Kafka protocol on testnet, not the LocalNetwork
	// voters: the first voters of peers are the controller voters, the
	// others brokers only (addBroker); 0: all.
	voters int
}

// transports are the two ways members replicate: each cluster test runs
// over both.
var transports = []string{"local", "kafka"}

func startClusterOver(t testing.TB, n int, transport string) *memberCluster {
	t.Helper()
	return startClusterWith(t, n, transport, nil)
}

func node(id int) string { return fmt.Sprintf("member-%d", id) }

func (c *memberCluster) config(id int) replica.Config {
	cfg := replica.Config{
		ID: id, Dir: c.dirs[id-1], Addr: c.peers[id-1].Addr, RaftAddr: c.peers[id-1].RaftAddr, Peers: c.voterPeers(),
		Network:           c.net.Node(node(id)),
		Raft:              controller.LoopbackRaft(),
		HeartbeatInterval: 50 * time.Millisecond,
		SessionTimeout:    600 * time.Millisecond,
		ReplicaLagTime:    2 * time.Second,
		FetchMaxWait:      200 * time.Millisecond,
	}
	if raceEnabled {
		cfg.HeartbeatInterval, cfg.SessionTimeout = 100*time.Millisecond, 2*time.Second
	}
	if !c.kafka {
		cfg.Local = c.local
	}
	if os.Getenv("STRATA_REPLICA_LOG") != "" {
		cfg.Logger = testLogger(c.t)
	}
	return cfg
}

func (c *memberCluster) start(id int) *replica.Broker {
	c.t.Helper()
	return c.startMemberWith(id, nil)
}

func (c *memberCluster) stop(id int) {
	if b := c.members[id-1]; b != nil {
		require.NoError(c.t, b.Close())
		c.members[id-1] = nil
	}
}

func (c *memberCluster) member(id int) *replica.Broker { return c.members[id-1] }

// any returns a running member other than the ones given.
func (c *memberCluster) any(not ...int) *replica.Broker {
	for _, b := range c.members {
		if b != nil && !contains(not, b.ID()) {
			return b
		}
	}
	c.t.Fatal("no running member")
	return nil
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// waitImage waits until cond holds for the metadata a member has applied.
func (c *memberCluster) waitImage(b *replica.Broker, what string, cond func(*controller.Image) bool) *controller.Image {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	img := b.Image()
	for !cond(img) {
		var err error
		if img, err = b.WaitImage(ctx, img.Version()); err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	return img
}

func (c *memberCluster) waitLive(n int) {
	c.t.Helper()
	c.waitImage(c.any(), fmt.Sprintf("%d live brokers", n), func(img *controller.Image) bool {
		live := 0
		for _, bi := range img.Brokers() {
			if !bi.Fenced {
				live++
			}
		}
		return live >= n
	})
}

// retryUnknownOutcome calls f again while it fails because the controller
// lost leadership while committing (ErrLeadershipLost, outcome unknown) or
// is not the controller: for a change that is the same when made twice (a
// reassignment to a target), as Kafka's admin client retries NOT_CONTROLLER.
// Seen on a loaded CI machine.
func retryUnknownOutcome(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || ctx.Err() != nil ||
			!errors.Is(err, controller.ErrLeadershipLost) && !errors.Is(err, controller.ErrNotController) {
			return err
		}
		select { // back off as a client does; the election needs time
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// createTopic creates a topic and waits until every running member knows it.
func (c *memberCluster) createTopic(name string, cfg log.TopicConfig) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A controller that loses leadership while committing the topic answers
	// ErrLeadershipLost (outcome unknown), as Kafka's answers NOT_CONTROLLER
	// or a timeout: ask again, as Kafka's admin client does, and take "exists"
	// after such a retry as done. Seen on a loaded CI machine.
	err := c.any().CreateTopic(ctx, name, cfg)
	for retried := false; err != nil && ctx.Err() == nil; retried = true {
		if retried && errors.Is(err, log.ErrTopicExists) {
			err = nil
			break
		}
		if !errors.Is(err, controller.ErrLeadershipLost) && !errors.Is(err, controller.ErrNotController) {
			break
		}
		select { // back off as a client does; the election needs time
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		err = c.any().CreateTopic(ctx, name, cfg)
	}
	require.NoError(c.t, err)
	for _, b := range c.members {
		if b != nil {
			c.waitImage(b, "topic "+name, func(img *controller.Image) bool {
				t, ok := img.Topic(name)
				if !ok {
					return false
				}
				for _, p := range t.Partitions {
					if p.Leader == controller.NoLeader {
						return false
					}
				}
				return true
			})
		}
	}
}

func (c *memberCluster) leader(topic string, p int) int {
	c.t.Helper()
	st, ok := c.any().Image().Partition(topic, p)
	require.True(c.t, ok)
	return st.Leader
}

// waitInSync waits until every running replica of topic-p ends where the
// leader does and has its HW (waitReplicasInSync).
func (c *memberCluster) waitInSync(topic string, p int) {
	c.t.Helper()
	c.waitReplicasInSync(topic, p)
}

func (c *memberCluster) describe(topic string, p int) string {
	var out string
	st, _ := c.any().Image().Partition(topic, p)
	out += fmt.Sprintf("leader %d epoch %d isr %v; ", st.Leader, st.LeaderEpoch, st.ISR)
	for _, b := range c.members {
		if b == nil {
			continue
		}
		if rp, err := b.Partition(topic, p); err == nil {
			out += fmt.Sprintf("[%d: end %d hw %d epochs %v] ", b.ID(), rp.EndOffset(), rp.HighWatermark(), rp.EpochEntries())
		}
	}
	return out
}

// checkIdentical checks that every running replica's log is the leader's,
// byte for byte (so batch for batch), up to the leader's HW.
func (c *memberCluster) checkIdentical(topic string, p int) {
	c.t.Helper()
	c.checkReplicasIdentical(topic, p)
}

func readAll(t testing.TB, p *log.Partition, upTo int64) []byte {
	t.Helper()
	var out []byte
	for off := p.StartOffset(); off < upTo; {
		bs, err := p.Slice(off, 1<<20, upTo)
		require.NoError(t, err)
		raw, err := bs.Bytes()
		bs.Release()
		require.NoError(t, err)
		if len(raw) == 0 {
			break
		}
		out = append(out, raw...)
		recs, err := log.DecodeRecords(raw)
		require.NoError(t, err)
		off = recs[len(recs)-1].Offset + 1
	}
	return out
}

// consumeAll reads topic-p from offset 0 through member b until it has n
// records, and returns their values.
func consumeAll(t *testing.T, b *replica.Broker, topic string, n int) []string {
	t.Helper()
	cons, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{topic}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var vals []string
	for len(vals) < n {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err, "after %d records", len(vals))
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
	}
	return vals
}

func TestReplicatesAcksAll(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testReplicatesAcksAll(t, tr) })
	}
}

func testReplicatesAcksAll(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})

	// Produce through a member that leads partition 0 or not: routing.
	prod, err := log.NewProducer(c.member(2), log.ProducerConfig{Acks: log.AcksAll, Timeout: 5 * time.Second})
	require.NoError(t, err)
	const n = 200
	for i := range n {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % 2, Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
	for p := range 2 {
		c.waitInSync("t", p)
		c.checkIdentical("t", p)
	}
	// Every member serves consumers (routed to the leader).
	for id := 1; id <= 3; id++ {
		require.Len(t, consumeAll(t, c.member(id), "t", n), n)
	}
}
