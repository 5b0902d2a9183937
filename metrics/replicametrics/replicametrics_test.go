package replicametrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/metrics/replicametrics"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/replicatest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/testnet"
)

// isrHooks is a Recorder that also tells isr every ISR change reported
// and keeps the largest produce purgatory size reported.
type isrHooks struct {
	*metrics.Recorder
	isr         chan isrChange
	maxProduces *atomic.Int64
}

func (h isrHooks) Purgatory(name string, size int) {
	h.Recorder.Purgatory(name, size)
	if name == "Produce" && int64(size) > h.maxProduces.Load() {
		h.maxProduces.Store(int64(size)) // one producer: no race to lose
	}
}

type isrChange struct {
	size   int
	shrink bool
}

func (h isrHooks) ISRChanged(topic string, partition, size int, shrink bool) {
	h.Recorder.ISRChanged(topic, partition, size, shrink)
	h.isr <- isrChange{size, shrink}
}

// cluster is three members in this process: Raft over testnet,
// replication over a LocalNetwork (whose data links can be cut alone).
type cluster struct {
	t       *testing.T
	local   *replicatest.LocalNetwork
	members []*replica.Broker
	hooks   []isrHooks
}

func startCluster(t *testing.T) *cluster {
	net := testnet.New()
	t.Cleanup(func() { net.Close() })
	c := &cluster{t: t, local: replicatest.NewLocalNetwork()}
	var peers []replica.Peer
	for id := 1; id <= 3; id++ {
		addr, err := net.Node(fmt.Sprint("member-", id)).Reserve()
		require.NoError(t, err)
		peers = append(peers, replica.Peer{ID: id, Addr: "127.0.0.1:0", RaftAddr: addr})
	}
	for id := 1; id <= 3; id++ {
		h := isrHooks{metrics.NewRecorder(), make(chan isrChange, 16), new(atomic.Int64)}
		b, err := replica.Start(replica.Config{
			ID: id, Dir: t.TempDir(), Addr: peers[id-1].Addr, RaftAddr: peers[id-1].RaftAddr, Peers: peers,
			Network: net.Node(fmt.Sprint("member-", id)), Local: c.local, Raft: controller.LoopbackRaft(),
			// A session long enough that no member is fenced on a loaded
			// machine (-race): the ISR changes here are the leader's.
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second,
			ReplicaLagTime: 500 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond,
			Metrics: h, Logger: testLogger(t),
		})
		require.NoError(t, err)
		c.members = append(c.members, b)
		c.hooks = append(c.hooks, h)
	}
	t.Cleanup(func() {
		for _, b := range c.members {
			if b != nil {
				require.NoError(t, b.Close())
			}
		}
	})
	return c
}

// waitImage waits until cond holds for the metadata b has applied.
func (c *cluster) waitImage(b *replica.Broker, what string, cond func(*controller.Image) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	img := b.Image()
	for !cond(img) {
		var err error
		if img, err = b.WaitImage(ctx, img.Version()); err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
	}
}

func (c *cluster) waitISR(b *replica.Broker, n int) {
	c.t.Helper()
	c.waitImage(b, fmt.Sprintf("an ISR of %d", n), func(img *controller.Image) bool {
		st, ok := img.Partition("t", 0)
		return ok && st.Leader != controller.NoLeader && len(st.ISR) == n
	})
}

func (c *cluster) awaitISRChange(id int) isrChange {
	c.t.Helper()
	select {
	case ch := <-c.hooks[id-1].isr:
		return ch
	case <-time.After(20 * time.Second):
		var states []string
		for _, b := range c.members {
			if b != nil {
				st, _ := b.Image().Partition("t", 0)
				states = append(states, fmt.Sprintf("member %d sees %+v brokers %+v", b.ID(), st, b.Image().Brokers()))
			}
		}
		c.t.Fatalf("member %d reported no ISR change: %s", id, strings.Join(states, "; "))
		return isrChange{}
	}
}

func produce(t *testing.T, b *replica.Broker, value string) {
	t.Helper()
	var bd batch.Builder
	bd.Append(time.Now().UnixMilli(), nil, []byte(value), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := b.Produce(ctx, log.TopicPartition{Topic: "t"}, append([]byte(nil), bd.Bytes()...), log.AcksAll)
	require.NoError(t, err)
}

func scrape(b *replica.Broker, r *metrics.Recorder) string {
	replicametrics.Collect(b, r)
	var sb strings.Builder
	r.Snapshot().WritePrometheus(&sb)
	return sb.String()
}

// A follower cut off from its leader leaves the ISR: the leader reports
// the shrink and one under-replicated partition; healed, it rejoins (an
// expansion, none under-replicated); stopped, it leaves again.
func TestUnderReplicatedPartitions(t *testing.T) {
	leaktest.Check(t)
	c := startCluster(t)
	c.waitImage(c.members[0], "3 live brokers", func(img *controller.Image) bool {
		live := 0
		for _, bi := range img.Brokers() {
			if !bi.Fenced {
				live++
			}
		}
		return live == 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.members[0].CreateTopic(ctx, "t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2}))
	for _, b := range c.members {
		c.waitISR(b, 3)
	}
	st, _ := c.members[0].Image().Partition("t", 0)
	l := st.Leader
	f := l%3 + 1 // a follower
	leader, rec := c.members[l-1], c.hooks[l-1].Recorder
	produce(t, leader, "a")

	m := scrape(leader, rec)
	require.Contains(t, m, `kafka_cluster_partition_insyncreplicascount{topic="t",partition="0"} 3`)
	require.Contains(t, m, "kafka_server_replicamanager_underreplicatedpartitions 0\n")
	fm := scrape(c.members[f-1], c.hooks[f-1].Recorder)
	require.Contains(t, fm, `kafka_log_log_logendoffset{topic="t",partition="0"} `, "a follower reports its log")
	require.NotContains(t, fm, "kafka_cluster_partition_insyncreplicascount", "but not the replica gauges")

	// Cut off, the follower falls behind with the next append and leaves
	// the ISR after the lag time.
	c.local.Cut(l, f)
	produce(t, leader, "b") // acks=all: waits for the shrink
	require.Equal(t, isrChange{2, true}, c.awaitISRChange(l))
	require.EqualValues(t, 1, c.hooks[l-1].maxProduces.Load(), "the produce waited in the produce purgatory")
	c.waitISR(leader, 2)
	m = scrape(leader, rec)
	require.Contains(t, m, "kafka_server_replicamanager_underreplicatedpartitions 1\n")
	require.Contains(t, m, `kafka_cluster_partition_underreplicated{topic="t",partition="0"} 1`)
	require.Contains(t, m, "kafka_server_replicamanager_isrshrinks_total 1\n")
	require.Contains(t, m, `kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation="Produce"} 0`, "and left it")

	c.local.HealAll()
	require.Equal(t, isrChange{3, false}, c.awaitISRChange(l))
	c.waitISR(leader, 3)
	m = scrape(leader, rec)
	require.Contains(t, m, "kafka_server_replicamanager_underreplicatedpartitions 0\n")
	require.Contains(t, m, "kafka_server_replicamanager_isrexpands_total 1\n")

	// A stopped follower: the controller takes it out of the ISR.
	require.NoError(t, c.members[f-1].Close())
	c.members[f-1] = nil
	c.waitISR(leader, 2)
	m = scrape(leader, rec)
	require.Contains(t, m, "kafka_server_replicamanager_underreplicatedpartitions 1\n")
}

// testLogger logs to t with STRATA_REPLICA_LOG set, else nowhere.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("STRATA_REPLICA_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
