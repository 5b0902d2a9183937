package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/segment/batch"
)

// Producer ids come from blocks the controller records: unique across
// members, across a block boundary, across a member's restart and a
// failover of the active controller, and over the Kafka protocol too.
func TestProducerIDsUniqueClusterWide(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[int64]int{} // id → member that gave it
	take := func(b *replica.Broker, n int) {
		t.Helper()
		for range n {
			pid, err := b.InitProducerID(ctx)
			require.NoError(t, err)
			require.Zero(t, pid.Epoch)
			prev, dup := seen[pid.ID]
			require.False(t, dup, "id %d given by %d and again by %d", pid.ID, prev, b.ID())
			seen[pid.ID] = b.ID()
		}
	}
	for id := 1; id <= 3; id++ {
		take(c.member(id), 3)
	}
	take(c.member(3), controller.ProducerIDBlockSize) // past its first block

	// Over the Kafka protocol (InitProducerId is served by members).
	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{c.member(2).Addr()}})
	require.NoError(t, err)
	pid, err := kc.InitProducerID(ctx)
	require.NoError(t, err)
	require.NoError(t, kc.Close())
	require.NotContains(t, seen, pid.ID)
	seen[pid.ID] = 2

	// A restarted member gets a new block; so does everyone after the
	// active controller moves.
	c.stop(1)
	c.start(1)
	take(c.member(1), 3)
	ctl, ok := c.member(2).Controller()
	require.True(t, ok)
	c.stop(ctl)
	for id := 1; id <= 3; id++ {
		if id != ctl {
			take(c.member(id), 3)
		}
	}
	c.start(ctl)
	take(c.member(ctl), 3)
	var top int64
	for id := range seen {
		top = max(top, id)
	}
	// Every id given is below the next one the metadata records (once the
	// restarted member has applied the latest block).
	c.waitImage(c.member(ctl), "the blocks recorded", func(img *controller.Image) bool { return top < img.NextProducerID() })
}

// An idempotent producer that retries a batch at the new leader after a
// failover gets the first append's offsets back: the follower rebuilt the
// producer state from the batches it replicated.
func TestIdempotentRetryAfterFailoverIsNotDuplicated(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testIdempotentRetryAfterFailover(t, tr) })
	}
}

func testIdempotentRetryAfterFailover(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old := c.leader("t", 0)
	via := c.any(old)
	pid, err := via.InitProducerID(ctx)
	require.NoError(t, err)
	tp := log.TopicPartition{Topic: "t"}
	idem := func(seq int32, vals ...string) []byte {
		var bd batch.Builder
		bd.SetProducer(pid.ID, pid.Epoch, seq)
		for _, v := range vals {
			bd.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
		}
		return append([]byte(nil), bd.Bytes()...)
	}
	first, second := idem(0, "v0", "v1", "v2"), idem(3, "v3", "v4")
	res, err := via.ProduceBatch(ctx, tp, first, log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 0, res.BaseOffset)
	res, err = via.ProduceBatch(ctx, tp, second, log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 3, res.BaseOffset)
	c.waitInSync("t", 0)

	c.stop(old)
	nl := c.waitLeaderNot(via, "t", 0, old)
	// The retry of an acknowledged batch (its answer lost, say) at the new leader.
	res, err = c.member(nl).ProduceBatch(ctx, tp, second, log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 3, res.BaseOffset, "the retried batch was appended again")
	res, err = via.ProduceBatch(ctx, tp, idem(5, "v5"), log.AcksAll)
	require.NoError(t, err)
	require.EqualValues(t, 5, res.BaseOffset)
	p, err := c.member(nl).Partition("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 6, p.EndOffset())
	require.Equal(t, values(6), consumeAll(t, via, "t", 6))

	c.start(old)
	c.waitISR("t", 0, 3)
	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
}
