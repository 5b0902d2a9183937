package replica_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// defaults undoes the test timings of memberCluster.config: the member
// runs with Config's defaults (Raft's, the broker session's, the ISR lag).
func defaults(cfg *replica.Config) {
	cfg.Raft = controller.RaftConfig{}
	cfg.HeartbeatInterval, cfg.SessionTimeout = 0, 0
	cfg.ReplicaLagTime, cfg.FetchMaxWait = 0, 0
}

// BenchmarkHandover measures a graceful handover with every default: three
// members (Raft over testnet, replication over the Kafka protocol), a
// producer with acks=all on a member that does not lead the partition, and
// the Close of the member that leads it — the active controller whenever it
// leads one of the topic's three partitions, the hard case, since its
// Close hands Raft leadership over too. Each iteration is one Close; the
// gap is the producer's stall: the longest time without an
// acknowledgement from the start of the Close until a record sent after
// the Close returned is acknowledged (the first acknowledgement of a
// record sent after the Close began often comes from the old leader, a
// millisecond later, before it is fenced: that measures nothing). The
// closed member is then started again and the
// ISRs wait to be whole. It reports p50 and max in ms, and how many of the
// stops were of the active controller (the target: 20 stops, p50
// ≤ 150 ms, max ≤ 1 s).
//
//	go test -run '^$' -bench Handover -benchtime 20x ./replica/
func BenchmarkHandover(b *testing.B) {
	c := startClusterWith(b, 3, "kafka", defaults)
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})

	var (
		mu      sync.Mutex
		via     *replica.Broker // the member the producer is to talk to
		to      int             // the partition it produces to
		using   *replica.Broker // the member of the produce last started
		ackedAt time.Time       // when the last produce was acknowledged
		sentAt  time.Time       // when that produce started
		after   time.Time       // the start of the Close under way
		acks    []time.Time     // the acknowledgements since
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	pick := func() (old, p int) {
		// The active controller, if it leads a partition; else any leader.
		ctl, _ := c.any().Controller()
		for p := range 3 {
			if c.leader("t", p) == ctl {
				return ctl, p
			}
		}
		return c.leader("t", 0), 0
	}
	old, p := pick()
	via, to = c.any(old), p
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			m, tp := via, log.TopicPartition{Topic: "t", Partition: to}
			using = m
			mu.Unlock()
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := m.Produce(ctx, tp, recordBatch(strconv.Itoa(i)), log.AcksAll)
			cancel()
			if err == nil {
				mu.Lock()
				ackedAt, sentAt = time.Now(), start
				if !after.IsZero() {
					acks = append(acks, ackedAt)
				}
				mu.Unlock()
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	state := func() (*replica.Broker, time.Time, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		return using, ackedAt, sentAt
	}
	// poll waits, bounded, for cond (the producer's loop announces nothing).
	poll := func(what string, cond func() bool) {
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			require.True(b, time.Now().Before(deadline), "%s: not within 30 s", what)
		}
	}

	gaps := make([]time.Duration, 0, b.N)
	controllers := 0
	b.ResetTimer()
	for range b.N {
		old, p := pick()
		if ctl, _ := c.any().Controller(); ctl == old {
			controllers++
		}
		m := c.any(old)
		mu.Lock()
		via, to = m, p
		mu.Unlock()
		poll("the producer on another member", func() bool { u, _, _ := state(); return u == m })
		mu.Lock()
		at := time.Now()
		after, acks = at, nil
		mu.Unlock()
		c.stop(old)
		closed := time.Now()
		poll("an acknowledgement after the close of the leader", func() bool { _, _, sent := state(); return !sent.Before(closed) })
		// The producer's stall: the longest time without an
		// acknowledgement from the start of the Close on.
		mu.Lock()
		var stall time.Duration
		prev := at
		for _, a := range acks {
			stall = max(stall, a.Sub(prev))
			prev = a
		}
		after = time.Time{}
		mu.Unlock()
		gaps = append(gaps, stall)
		b.StopTimer()
		c.waitLeaderNot(m, "t", p, old)
		c.startMemberWith(old, defaults)
		for p := range 3 {
			c.waitISR("t", p, 3)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(gaps)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(gaps[len(gaps)/2]), "p50-ms")
	b.ReportMetric(ms(gaps[len(gaps)-1]), "max-ms")
	b.ReportMetric(float64(controllers), "controller-stops")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d stops (%d of the active controller): p50 %v, max %v, all %v", len(gaps), controllers, gaps[len(gaps)/2], gaps[len(gaps)-1], gaps)
}
