package replica_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
)

// scalePartitions is the partition count of the scale test: 1,000 behind
// STRATA_SOAK=1 (the figure), fewer in CI, where creating 3,000
// replicas' files on a shared machine costs most of the test.
func scalePartitions() int {
	if os.Getenv("STRATA_SOAK") != "" {
		return 1000
	}
	return 200
}

// steadyGoroutines is the fewest goroutines seen over 20 samples 5 ms
// apart: the members' own, without the short-lived ones (a Raft heartbeat
// RPC, a timer's callback) that come and go around them. Sampling, not
// waiting for an event: nothing announces a steady state.
func steadyGoroutines() int {
	n := runtime.NumGoroutine()
	for range 19 {
		time.Sleep(5 * time.Millisecond)
		n = min(n, runtime.NumGoroutine())
	}
	return n
}

// waitAllInSync waits until every partition of topic is in sync on every
// member (see waitInSync).
func (c *memberCluster) waitAllInSync(topic string, partitions int) {
	c.t.Helper()
	for p := range partitions {
		c.waitInSync(topic, p)
	}
}

// produceEach writes one record with acks=all to each partition of topic
// through member 1, so that every replica has fetched and the HWs moved.
func (c *memberCluster) produceEach(topic string, partitions int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := log.NewProducer(c.member(1), log.ProducerConfig{Acks: log.AcksAll, Timeout: 30 * time.Second, Linger: -1})
	require.NoError(c.t, err)
	defer prod.Close()
	errs := make(chan error, partitions)
	for p := range partitions {
		prod.SendAsync(log.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d", p)}, func(_ log.Record, err error) { errs <- err })
	}
	require.NoError(c.t, prod.Flush(ctx))
	for range partitions {
		require.NoError(c.t, <-errs)
	}
}

// goroutineSlack is how many more goroutines the scale test lets the
// members run with many partitions than with few: O(members), not
// O(partitions). A producer writing to many partitions at once opens more
// connections to each leader (each two goroutines at the server, reader
// and writer), of which a member keeps up to 4 per peer once idle:
// 3 members × 8 is generous.
const goroutineSlack = 3 * 8

// createTopicWithin is createTopic with more time: creating a thousand
// partitions' files on three members of a loaded machine takes seconds.
func (c *memberCluster) createTopicWithin(name string, cfg log.TopicConfig, d time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	require.NoError(c.t, c.any().CreateTopic(ctx, name, cfg))
	for _, b := range c.members {
		if b == nil {
			continue
		}
		img := b.Image()
		for !allLed(img, name) {
			var err error
			img, err = b.WaitImage(ctx, img.Version())
			require.NoError(c.t, err, "topic %s on member %d", name, b.ID())
		}
	}
}

func allLed(img *controller.Image, topic string) bool {
	t, ok := img.Topic(topic)
	if !ok {
		return false
	}
	for _, p := range t.Partitions {
		if p.Leader == controller.NoLeader {
			return false
		}
	}
	return true
}

// TestGoroutinesIndependentOfPartitions: three members replicating 10
// partitions with RF 3, then scalePartitions() more (1,000 in all behind
// STRATA_SOAK=1): the members run as many goroutines with all of them as
// with 10 (a fetcher per source broker, a parked fetch per fetcher, one
// tick loop), give or take goroutineSlack for connections.
func TestGoroutinesIndependentOfPartitions(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "kafka")
	c.createTopic("few", log.TopicConfig{Partitions: 10, ReplicationFactor: 3, MinInSyncReplicas: 2})
	c.produceEach("few", 10)
	c.waitAllInSync("few", 10)
	few := steadyGoroutines()

	n := scalePartitions() - 10
	start := time.Now()
	c.createTopicWithin("many", log.TopicConfig{Partitions: n, ReplicationFactor: 3, MinInSyncReplicas: 2}, time.Minute)
	created := time.Since(start)
	c.produceEach("many", n)
	c.waitAllInSync("many", n)
	c.produceEach("few", 10)
	c.waitAllInSync("few", 10)
	many := steadyGoroutines()
	t.Logf("goroutines: %d with 10 partitions, %d with %d (RF 3 over 3 members; %d partitions created in %v)", few, many, n+10, n, created.Round(time.Millisecond))
	require.LessOrEqual(t, many, few+goroutineSlack, "goroutines grow with the partition count: %d at 10 partitions, %d at %d", few, many, n+10)

	// Every replica holds what its leader does.
	for _, p := range []int{0, n / 2, n - 1} {
		c.checkIdentical("many", p)
	}
}

// BenchmarkReplicationCPU reports what replication costs in steady state
// with RF 3 over three members: the CPU the process (three members and
// the producer) spends per MB produced with acks=all to every partition in
// turn (1 KiB records), and the CPU per second the members spend idle
// afterwards, holding every partition with nothing to replicate (fetchers
// parked at the leaders). One partition is the reference for 1,000, and
// RF 1 (acks=all, nothing to replicate) for RF 3: the difference is what
// replicating costs.
//
//	go test -run '^$' -bench ReplicationCPU -benchtime 100000x ./replica/
func BenchmarkReplicationCPU(b *testing.B) {
	for _, tc := range []struct{ n, rf int }{{1, 1}, {1, 3}, {1000, 1}, {1000, 3}} {
		n := tc.n
		b.Run(fmt.Sprintf("partitions=%d/rf=%d", n, tc.rf), func(b *testing.B) {
			c := startClusterOver(b, 3, "kafka")
			c.createTopicWithin("t", log.TopicConfig{Partitions: n, ReplicationFactor: tc.rf, MinInSyncReplicas: min(2, tc.rf)}, time.Minute)
			c.produceEach("t", n) // every fetcher running, every HW moved
			prod, err := log.NewProducer(c.member(1), log.ProducerConfig{Acks: log.AcksAll, Timeout: 60 * time.Second})
			require.NoError(b, err)
			val := make([]byte, 1024)
			errs := make(chan error, 1)
			b.SetBytes(int64(len(val)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range b.N {
				prod.SendAsync(log.Record{Topic: "t", Partition: i % n, Value: val}, func(_ log.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			require.NoError(b, prod.Flush(context.Background()))
			b.StopTimer()
			cpu := processCPU() - cpu0
			require.NoError(b, prod.Close())
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/(float64(b.N)*float64(len(val))/1e6), "cpu-ms/MB")

			// Idle: everything replicated, nothing produced.
			for p := range n {
				c.waitReplicasInSync("t", p)
			}
			idle0, at := processCPU(), time.Now()
			time.Sleep(time.Second) // measuring a second of idleness, not waiting for anything
			b.ReportMetric(float64(processCPU()-idle0)/float64(time.Millisecond)/time.Since(at).Seconds(), "idle-cpu-ms/s")
		})
	}
}
