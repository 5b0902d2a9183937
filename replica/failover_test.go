package replica_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/segment/batch"
)

// produce sends values through b with acks=all and returns their offsets.
func produce(t *testing.T, b *replica.Broker, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	prod, err := log.NewProducer(b, log.ProducerConfig{Acks: log.AcksAll, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer prod.Close()
	for i := from; i < from+n; i++ {
		_, err := prod.Send(ctx, log.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)})
		require.NoError(t, err)
	}
}

func values(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("v%d", i)
	}
	return out
}

// waitLeaderNot waits until member b sees a leader of topic-p other than old.
func (c *memberCluster) waitLeaderNot(b *replica.Broker, topic string, p, old int) int {
	img := c.waitImage(b, "a new leader", func(img *controller.Image) bool {
		st, ok := img.Partition(topic, p)
		return ok && st.Leader != old && st.Leader != controller.NoLeader
	})
	st, _ := img.Partition(topic, p)
	return st.Leader
}

// waitISR waits until every running member has applied an ISR of n
// members for topic-p.
func (c *memberCluster) waitISR(topic string, p, n int) {
	for _, b := range c.members {
		if b == nil {
			continue
		}
		c.waitImage(b, fmt.Sprintf("ISR of %d", n), func(img *controller.Image) bool {
			st, ok := img.Partition(topic, p)
			return ok && len(st.ISR) == n
		})
	}
}

func TestLeaderStopFailoverAndRestartWithData(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testLeaderStopFailoverAndRestartWithData(t, tr) })
	}
}

func testLeaderStopFailoverAndRestartWithData(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	old := c.leader("t", 0)
	produce(t, c.any(old), "t", 0, 100)

	start := time.Now()
	c.stop(old) // controlled shutdown
	nl := c.waitLeaderNot(c.any(old), "t", 0, old)
	t.Logf("leader %d → %d in %v", old, nl, time.Since(start))
	require.Equal(t, values(100), consumeAll(t, c.any(old), "t", 100), "acknowledged records lost")
	produce(t, c.any(old), "t", 100, 100)

	c.start(old)
	c.waitISR("t", 0, 3)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
	require.Equal(t, values(200), consumeAll(t, c.member(old), "t", 200))
}

func TestRestartWithEmptyDataDir(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testRestartWithEmptyDataDir(t, tr) })
	}
}

func testRestartWithEmptyDataDir(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	l := c.leader("t", 0)
	produce(t, c.member(l), "t", 0, 100)
	f := c.any(l).ID()
	c.stop(f)
	require.NoError(t, os.RemoveAll(filepath.Join(c.dirs[f-1], "data")))
	produce(t, c.member(l), "t", 100, 50)
	c.start(f)
	c.waitISR("t", 0, 3)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
	p, err := c.member(f).Partition("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 150, p.EndOffset())
}

func TestMinInSyncReplicas(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testMinInSyncReplicas(t, tr) })
	}
}

func testMinInSyncReplicas(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 3})
	l := c.leader("t", 0)
	produce(t, c.member(l), "t", 0, 10)

	f := c.any(l).ID()
	c.stop(f)
	c.waitISR("t", 0, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.member(l).Produce(ctx, log.TopicPartition{Topic: "t"}, oneBatch(t, "refused"), log.AcksAll)
	require.ErrorIs(t, err, log.ErrNotEnoughReplicas)
	// acks=1 still goes.
	_, err = c.member(l).Produce(ctx, log.TopicPartition{Topic: "t"}, oneBatch(t, "leader-only"), log.AcksLeader)
	require.NoError(t, err)

	c.start(f)
	c.waitISR("t", 0, 3)
	produce(t, c.member(l), "t", 10, 10)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
}

func TestCutOffLeaderAcknowledgesNothing(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testCutOffLeaderAcknowledgesNothing(t, tr) })
	}
}

func testCutOffLeaderAcknowledgesNothing(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	old := c.leader("t", 0)
	produce(t, c.member(old), "t", 0, 20)

	c.net.Isolate(node(old))
	c.local.Isolate(old)
	// The old leader still believes it leads, and cannot get anything acknowledged.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	tp := log.TopicPartition{Topic: "t"}
	_, err := c.member(old).Produce(ctx, tp, oneBatch(t, "zombie"), log.AcksAll)
	require.Error(t, err, "a leader cut off acknowledged an acks=all produce")
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, log.ErrNotLeader) || errors.Is(err, log.ErrNotEnoughReplicas), "%v", err)

	// The others elect a new leader and go on.
	nl := c.waitLeaderNot(c.any(old), "t", 0, old)
	produce(t, c.member(nl), "t", 20, 20)

	// Healed, the old leader truncates its unacknowledged record and follows.
	c.net.HealAll()
	c.local.HealAll()
	c.waitISR("t", 0, 3)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
	got := consumeAll(t, c.member(old), "t", 40)
	require.Equal(t, values(40), got)
	require.False(t, slices.Contains(got, "zombie"))
}

func oneBatch(t *testing.T, value string) []byte {
	t.Helper()
	var bd batch.Builder
	bd.Append(time.Now().UnixMilli(), nil, []byte(value), nil)
	return append([]byte(nil), bd.Bytes()...)
}

// A follower that cannot fetch (its data link to the leader cut, the
// controller still reachable) leaves the ISR after ReplicaLagTime, while
// acks=all goes on with the two others; healed, it catches up and rejoins.
func TestLaggingFollowerLeavesAndRejoinsISR(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local") // the local network cuts the data plane alone
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	l := c.leader("t", 0)
	produce(t, c.member(l), "t", 0, 10)
	f := c.any(l).ID()

	c.local.Cut(l, f)
	start := time.Now()
	// A follower at the leader's end is in sync however long it is silent
	// (Kafka's rule): it falls behind with the next append, whose acks=all
	// produce waits until the ISR has shrunk without it.
	produce(t, c.member(l), "t", 10, 10)
	c.waitISR("t", 0, 2)
	shrunk := time.Since(start)
	require.GreaterOrEqual(t, shrunk, c.config(l).ReplicaLagTime, "ISR shrank before the lag time")
	st, _ := c.member(l).Image().Partition("t", 0)
	require.NotContains(t, st.ISR, f)

	c.local.HealAll()
	c.waitISR("t", 0, 3)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
	t.Logf("ISR shrank %v after the cut", shrunk.Round(time.Millisecond))
}
