package replica_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// TestLeaderFailureLoop stops the leader of a partition (a controlled
// shutdown, or every link of it cut) again and again while a producer
// writes with acks=all, then checks that no acknowledged record is lost
// and that every replica holds the leader's log below the HW. The
// producer is not idempotent (the log package has no idempotent producer
// yet): a produce whose answer was lost is retried and may be stored
// twice; the duplicates are counted and reported. STRATA_SOAK=1 runs 500
// failovers instead of 50.
func TestLeaderFailureLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	leaktest.Check(t)
	failovers := 50
	if v, err := strconv.Atoi(os.Getenv("STRATA_FAILOVERS")); err == nil {
		failovers = v
	}
	if os.Getenv("STRATA_SOAK") != "" {
		failovers = 500
	}
	tr := "kafka" // the real data plane; STRATA_REPLICA_TRANSPORT=local for the in-process one
	if v := os.Getenv("STRATA_REPLICA_TRANSPORT"); v != "" {
		tr = v
	}
	c := startClusterOver(t, 3, tr)
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	tp := log.TopicPartition{Topic: "t"}

	var via atomic.Pointer[replica.Broker] // the member the producer talks to
	via.Store(c.any(c.leader("t", 0)))
	var (
		mu     sync.Mutex
		acked  []int
		failed int
		lastOK time.Time
		errs   = map[string]int{}
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// A produce the test started through the member it then cuts
			// off waits there, unacknowledged, until this timeout: the
			// client's request timeout bounds what a failover costs it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			at, b := time.Now(), via.Load()
			_, err := b.Produce(ctx, tp, oneBatch(t, strconv.Itoa(i)), log.AcksAll)
			cancel()
			if d := time.Since(at); d > 1500*time.Millisecond {
				t.Logf("produce %d via %d took %v: %v", i, b.ID(), d, err)
			}
			mu.Lock()
			if err == nil {
				acked = append(acked, i)
				lastOK = time.Now()
			} else {
				failed++
				if errs[err.Error()[:min(60, len(err.Error()))]]++; len(errs) < 10 && errs[err.Error()[:min(60, len(err.Error()))]] == 1 {
					t.Logf("produce %d: %v", i, err)
				}
			}
			mu.Unlock()
		}
	}()
	ackedSince := func(since time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		return lastOK.After(since)
	}

	var gaps []time.Duration
	begin := time.Now()
	for i := range failovers {
		old := c.leader("t", 0)
		via.Store(c.any(old))
		at := time.Now()
		if i%2 == 0 {
			c.stop(old)
		} else {
			c.net.Isolate(node(old))
			c.local.Isolate(old)
		}
		nl := c.waitLeaderNot(via.Load(), "t", 0, old)
		elected := time.Since(at)
		// Wait (bounded) for the producer's next acknowledgement: the failover time.
		deadline := time.Now().Add(10 * time.Second)
		for !ackedSince(at) {
			require.True(t, time.Now().Before(deadline), "no record acknowledged within 10 s of failover %d: %s", i, c.describe("t", 0))
			time.Sleep(time.Millisecond)
		}
		gaps = append(gaps, time.Since(at))
		if g := time.Since(at); g > time.Second {
			t.Logf("failover %d (%s of %d, via %d): new leader %d after %v, next ack after %v", i, map[bool]string{true: "stop", false: "cut"}[i%2 == 0], old, via.Load().ID(), nl, elected, g)
		}
		if i%2 == 0 {
			c.start(old)
		} else {
			c.net.HealAll()
			c.local.HealAll()
		}
		c.waitISR("t", 0, 3)
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(begin)

	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
	lp, err := c.member(c.leader("t", 0)).Partition("t", 0)
	require.NoError(t, err)
	stored := map[int]int{}
	recs, err := log.DecodeRecords(readAll(t, lp, lp.HighWatermark()))
	require.NoError(t, err)
	for _, r := range recs {
		v, err := strconv.Atoi(string(r.Value))
		require.NoError(t, err)
		stored[v]++
	}
	lost, dups := 0, 0
	for _, v := range acked {
		if stored[v] == 0 {
			lost++
		}
	}
	for _, n := range stored {
		if n > 1 {
			dups += n - 1
		}
	}
	slices.Sort(gaps)
	t.Logf("%d failovers in %v: %d records acknowledged, %d produces failed, %d stored, %d stored twice; failover to next ack p50 %v p99 %v max %v",
		failovers, elapsed.Round(time.Millisecond), len(acked), failed, len(stored), dups,
		gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)*99/100].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	require.Zero(t, lost, "acknowledged records lost")
}
