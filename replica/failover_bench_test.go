package replica_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/segment/batch"
)

// BenchmarkFailover measures what a failover costs a producer: from the
// moment the leader of a partition is stopped to the next record the
// producer gets acknowledged with acks=all (the target: p50 ≤ 1 s,
// p99 ≤ 3 s over ≥ 20 stops). Each iteration is one failover on three
// members over the Kafka protocol; the stopped leader is then started
// again and the ISR waits to be whole before the next. "stop" is a
// controlled shutdown (Close: leadership moves off first); "cut" isolates
// the leader's every link, as a crash does, so that the controller fences
// it after the session timeout (600 ms here). The producer writes through
// a member that is not the leader (switched to it before the stop), one
// record at a time, each produce bounded by 1 s (its client's request
// timeout); the gap ends with the acknowledgement of the first record sent
// after the stop. It reports the p50, p99 and max in ms.
//
//	go test -run '^$' -bench Failover -benchtime 20x ./replica/
func BenchmarkFailover(b *testing.B) {
	for _, how := range []string{"stop", "cut"} {
		b.Run(how, func(b *testing.B) { benchFailover(b, how) })
	}
}

func benchFailover(b *testing.B, how string) {
	c := startClusterOver(b, 3, "kafka")
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	tp := log.TopicPartition{Topic: "t"}

	var (
		mu      sync.Mutex
		via     *replica.Broker // the member the producer is to talk to
		using   *replica.Broker // the member of the produce last started
		ackedAt time.Time       // when the last produce was acknowledged
		sentAt  time.Time       // when that produce started
	)
	via = c.any(c.leader("t", 0))
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
			mu.Lock()
			m := via
			using = m
			mu.Unlock()
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := m.Produce(ctx, tp, recordBatch(strconv.Itoa(i)), log.AcksAll)
			cancel()
			if err == nil {
				mu.Lock()
				ackedAt, sentAt = time.Now(), start
				mu.Unlock()
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// state reads the producer's state under its lock.
	state := func() (*replica.Broker, time.Time, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		return using, ackedAt, sentAt
	}
	// poll waits, bounded, for cond (the producer's loop announces nothing).
	poll := func(what string, cond func() bool) {
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			require.True(b, time.Now().Before(deadline), "%s: not within 15 s: %s", what, c.describe("t", 0))
		}
	}

	gaps := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		old := c.leader("t", 0)
		m := c.any(old)
		mu.Lock()
		via = m
		mu.Unlock()
		// Not through the member about to go: a produce sent there waits
		// out its timeout, which is the client's cost, not the failover's.
		poll("the producer on another member", func() bool { u, _, _ := state(); return u == m })
		at := time.Now()
		if how == "stop" {
			c.stop(old)
		} else {
			c.net.Isolate(node(old))
		}
		// The first acknowledgement of a record sent after the stop.
		poll("an acknowledgement after the "+how+" of the leader", func() bool { _, _, sent := state(); return !sent.Before(at) })
		_, acked, _ := state()
		gaps = append(gaps, acked.Sub(at))
		b.StopTimer()
		c.waitLeaderNot(m, "t", 0, old) // a failover happened, not a lucky ack
		if how == "stop" {
			c.start(old)
		} else {
			c.net.HealAll()
		}
		c.waitISR("t", 0, 3)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(gaps)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(gaps[len(gaps)/2]), "p50-ms")
	b.ReportMetric(ms(gaps[(len(gaps)*99)/100]), "p99-ms")
	b.ReportMetric(ms(gaps[len(gaps)-1]), "max-ms")
	b.ReportMetric(0, "ns/op")
}

// recordBatch is a batch of one record of value (oneBatch without a test,
// for a producer goroutine).
func recordBatch(value string) []byte {
	var bd batch.Builder
	bd.Append(time.Now().UnixMilli(), nil, []byte(value), nil)
	return append([]byte(nil), bd.Bytes()...)
}
