package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/controller"
)

// BenchmarkMetadataWrites measures metadata records per second through a
// 3-member quorum on loopback (raft-boltdb, fsync on every log write): each
// op is one AlterPartition, one partition-change record, by one of W
// concurrent partition leaders. Concurrent requests share Raft entries (the
// event loop puts every waiting request in one entry) and Raft batches
// entries (BatchApplyCh).
func BenchmarkMetadataWrites(b *testing.B) {
	for _, writers := range []int{1, 16, 256, 1024} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchWrites(b, writers)
		})
	}
}

func benchWrites(b *testing.B, writers int) {
	ctx := context.Background()
	c := newCluster(b, 3, func(_ int, cfg *controller.Config) { cfg.Raft = controller.RaftConfig{} }) // LAN defaults: no flapping
	m := c.nodes[0]
	lead := c.member(c.leader(ctx, m))
	epochs := liveBrokers(ctx, b, lead, 1, 2, 3)
	topic := createTopic(ctx, b, lead, "bench", controller.TopicSpec{Partitions: writers, ReplicationFactor: 3})
	v0 := lead.Image().Version()

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func(p controller.PartitionState) {
			defer wg.Done()
			full := slices.Clone(p.ISR)
			for next.Add(1) <= int64(b.N) {
				isr := full
				if len(p.ISR) == len(full) {
					isr = full[:2] // leader and one follower
				}
				got, err := lead.AlterPartition(ctx, controller.AlterPartitionRequest{
					BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], Topic: "bench", Partition: p.Partition,
					LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr,
				})
				if err != nil {
					errs <- err
					return
				}
				p = got
			}
		}(topic.Partitions[w])
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		if errors.Is(err, controller.ErrLeadershipLost) || errors.Is(err, controller.ErrNotController) {
			b.Skipf("leadership moved during the run: %v", err)
		}
		b.Fatal(err)
	}
	entries := lead.Image().Version() - v0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/float64(max(entries, 1)), "records/entry")
}

// BenchmarkFailover kills the active controller of a 3-member quorum (with
// LoopbackRaft timings) and measures the time until a survivor's write is
// committed by the new one; the member then restarts from its directory.
// It runs max(b.N, 10) kills and reports the median and the 90th percentile.
//
//	go test -run '^$' -bench Failover -benchtime 20x ./controller/
func BenchmarkFailover(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newCluster(b, 3)
	registerBroker(ctx, b, c.nodes[0], 1)
	kills := max(b.N, 10)
	var times []time.Duration
	b.ResetTimer()
	for tries := 0; len(times) < kills; tries++ {
		if tries > 3*kills {
			b.Fatalf("only %d kills in %d tries", len(times), tries)
		}
		old := c.leader(ctx, c.nodes[0])
		if c.member(old) == nil {
			b.Fatalf("member 1 names stopped member %d as leader", old)
		}
		// Name the leader as every survivor sees it, so that the kill is of
		// the active controller.
		if id, _, _ := c.member(old).Leader(); id != old {
			continue
		}
		var survivor *controller.Controller
		for _, m := range c.running() {
			if m.ID() != old {
				survivor = m
				break
			}
		}
		begin := time.Now()
		c.stop(old - 1)
		registerBroker(ctx, b, survivor, 1)
		times = append(times, time.Since(begin))

		c.start(old - 1)
		c.converge(ctx, c.version())
	}
	b.StopTimer()
	slices.Sort(times)
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(times[len(times)/2]), "p50-ms")
	b.ReportMetric(ms(times[len(times)*9/10]), "p90-ms")
	b.ReportMetric(ms(times[len(times)-1]), "max-ms")
	b.ReportMetric(float64(len(times)), "kills")
	b.ReportMetric(float64(sum)/float64(len(times)), "ns/op")
}
