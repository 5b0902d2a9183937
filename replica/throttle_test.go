package replica_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// A reassignment's new replica copies the partition no faster than the
// replication throttle allows, on the leader's side or the follower's
// (Kafka's leader/follower.replication.throttled.rate): 2 MiB at 1 MiB/s,
// less the quota's first burst (10 windows of 20 ms) and a fetch of
// 64 KiB, at the rate plus one fetch per 200 ms, cannot be done in less
// than ~1.3 s (measured: 1.9 s; unthrottled it takes milliseconds); the
// new replica then joins the ISR and
// the move completes. The bound only says "not faster", so a slow machine
// cannot break it. The in-sync follower is not throttled: acks=all
// produces go on during the move.
func TestReplicationThrottleBoundsCatchUp(t *testing.T) {
	for _, side := range []string{"leader", "follower", "dynamic"} {
		t.Run(side, func(t *testing.T) { testReplicationThrottle(t, side) })
	}
}

func testReplicationThrottle(t *testing.T, side string) {
	leaktest.Check(t)
	const rate, size, value = 1 << 20, 2 << 20, 1 << 10
	c := startClusterWith(t, 3, "local", func(cfg *replica.Config) {
		cfg.ReplicationQuotaWindow = 20 * time.Millisecond
		cfg.FetchMaxBytes = 64 << 10
		switch side {
		case "leader":
			cfg.LeaderReplicationThrottledRate = rate
		case "follower":
			cfg.FollowerReplicationThrottledRate = rate
		}
	})
	c.createTopic("big", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := log.NewProducer(c.any(), log.ProducerConfig{Acks: log.AcksAll, Timeout: 30 * time.Second, BatchBytes: 16 << 10}) // batches well under a fetch
	require.NoError(t, err)
	var failed atomic.Int64
	rnd := rand.New(rand.NewPCG(1, 2)) // incompressible values: the log holds size bytes
	for i := range size / value {
		val := make([]byte, value)
		for j := 0; j < value; j += 8 {
			binary.LittleEndian.PutUint64(val[j:], rnd.Uint64())
		}
		prod.SendAsync(log.Record{Topic: "big", Key: fmt.Appendf(nil, "%d", i), Value: val}, func(_ log.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	require.NoError(t, prod.Flush(ctx))
	require.Zero(t, failed.Load())

	st, _ := c.any().Image().Partition("big", 0)
	other := 6 - st.Replicas[0] - st.Replicas[1]
	target := append(slices.Clone(st.Replicas), other)
	if side == "dynamic" {
		// Kafka's dynamic configs, as kafka-reassign-partitions.sh sets
		// them: the rate on every broker (the cluster's default), the
		// leader's side on the current replicas, the follower's on the
		// new one; no static rate.
		tb := replica.ThrottleBackend(c.any())
		require.NoError(t, tb.AlterThrottleConfigs(ctx, kmsg.ConfigResourceTypeBroker, "",
			map[string]string{kafka.LeaderThrottledRateConfig: fmt.Sprint(rate), kafka.FollowerThrottledRateConfig: fmt.Sprint(rate)}, nil, false))
		require.NoError(t, tb.AlterThrottleConfigs(ctx, kmsg.ConfigResourceTypeTopic, "big", map[string]string{
			kafka.LeaderThrottledReplicasConfig:   fmt.Sprintf("0:%d,0:%d", st.Replicas[0], st.Replicas[1]),
			kafka.FollowerThrottledReplicasConfig: fmt.Sprintf("0:%d", other),
		}, nil, false))
	}
	start := time.Now()
	res, err := c.any().AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "big", Partition: 0, Replicas: target}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	// The in-sync follower keeps up: acks=all produces go through meanwhile.
	for range 5 {
		_, err := prod.Send(ctx, log.Record{Topic: "big", Value: []byte("during")})
		require.NoError(t, err)
	}
	c.waitMoved("big", 0, target)
	took := time.Since(start)
	require.NoError(t, prod.Close())
	// Each check of the quota may let one more fetch through: at most a
	// fetch per least span (10 windows, 200 ms) on top of the rate.
	const fetch, span = 64 << 10, 0.2
	secs := (size - rate*span - fetch) / (rate + fetch/span)
	min := time.Duration(float64(time.Second) * secs)
	require.GreaterOrEqual(t, took, min, "the new replica copied %d bytes faster than %d B/s allows", size, rate)
	c.waitInSync("big", 0)
	c.checkIdentical("big", 0)
	if side == "dynamic" {
		// --verify's part: the throttles removed, on every member.
		tb := replica.ThrottleBackend(c.any())
		require.NoError(t, tb.AlterThrottleConfigs(ctx, kmsg.ConfigResourceTypeBroker, "", nil,
			[]string{kafka.LeaderThrottledRateConfig, kafka.FollowerThrottledRateConfig}, false))
		m := c.members[other-1]
		for img := m.Image(); len(img.BrokerConfigs("")) > 0; {
			img, err = m.WaitImage(ctx, img.Version())
			require.NoError(t, err, "the rates removed on member %d", other)
		}
		got, err := replica.ThrottleBackend(m).ThrottleConfigs(kmsg.ConfigResourceTypeBroker, "")
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = replica.ThrottleBackend(m).ThrottleConfigs(kmsg.ConfigResourceTypeTopic, "big")
		require.NoError(t, err)
		require.Len(t, got, 2, "the topic's lists stay until removed")
	}
	t.Logf("%s throttle: %d KiB copied in %v (at least %v at %d KiB/s)", side, size>>10, took.Round(time.Millisecond), min.Round(time.Millisecond), rate>>10)
}
