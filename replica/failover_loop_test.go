package replica_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
)

// TestLeaderFailureLoop stops the leader of a partition (a controlled
// shutdown, or every link of it cut) again and again while an idempotent
// acks=all producer writes, then checks that no acknowledged record is
// lost, none is stored twice (a retry after a failover is answered from
// the producer state the new leader replicated) and every replica holds
// the leader's log below the HW, batch for batch. The producer talks to a
// member that is not being stopped or cut, switched before each failover.
// STRATA_SOAK=1 runs 500 failovers instead of 50.
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

	via := &switchingClient{} // the member the producer talks to
	via.to.Store(c.any(c.leader("t", 0)))
	via.Client = via.to.Load()
	// A produce in flight to a leader that is then cut off waits there,
	// unacknowledged, until its Timeout: a client's request timeout bounds
	// what a cut costs it (Kafka's request.timeout.ms, 30 s by default).
	prod, err := log.NewProducer(via, log.ProducerConfig{Acks: log.AcksAll, Idempotent: true,
		Timeout: time.Second, RetryBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		acked  []int
		failed int
		lastOK time.Time
		errs   = map[string]int{}
	)
	ackedCh := make(chan struct{}, 1) // a nudge after each acknowledgement
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
			at := time.Now()
			_, err := prod.Send(context.Background(), log.Record{Topic: "t", Value: []byte(strconv.Itoa(i))})
			if d := time.Since(at); d > 1500*time.Millisecond {
				t.Logf("send %d took %v: %v", i, d, err)
			}
			mu.Lock()
			if err == nil {
				acked = append(acked, i)
				lastOK = time.Now()
				select {
				case ackedCh <- struct{}{}:
				default:
				}
			} else {
				failed++
				k := err.Error()[:min(60, len(err.Error()))]
				if errs[k] == 0 && len(errs) < 10 {
					t.Logf("send %d: %v", i, err)
				}
				errs[k]++
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
		via.to.Store(c.any(old))
		at := time.Now()
		if i%2 == 0 {
			c.stop(old)
		} else {
			c.net.Isolate(node(old))
			c.local.Isolate(old)
		}
		nl := c.waitLeaderNot(via.to.Load(), "t", 0, old)
		elected := time.Since(at)
		// Wait (bounded) for the producer's next acknowledgement: the failover time.
		deadline := time.NewTimer(10 * time.Second)
		for !ackedSince(at) {
			select {
			case <-ackedCh:
			case <-deadline.C:
				t.Fatalf("no record acknowledged within 10 s of failover %d: %s", i, c.describe("t", 0))
			}
		}
		deadline.Stop()
		gaps = append(gaps, time.Since(at))
		if g := time.Since(at); g > time.Second {
			t.Logf("failover %d (%s of %d, via %d): new leader %d after %v, next ack after %v", i, map[bool]string{true: "stop", false: "cut"}[i%2 == 0], old, via.to.Load().ID(), nl, elected, g)
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
	require.NoError(t, prod.Close())
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
	t.Logf("%d failovers in %v: %d records acknowledged, %d sends failed, %d stored, %d stored twice; failover to next ack p50 %v p99 %v max %v",
		failovers, elapsed.Round(time.Millisecond), len(acked), failed, len(stored), dups,
		gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)*99/100].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	require.Zero(t, lost, "acknowledged records lost")
	require.Zero(t, dups, "records stored twice")
}
