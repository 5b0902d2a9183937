package replica_test

import (
	"context"
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

// An idempotent acks=all producer writes while the partition's leader is
// stopped and restarted again and again: no acknowledged record is lost
// and none is stored twice (its retries after each failover are answered
// from the producer state the new leader replicated). It talks to a member
// that is not being stopped, switching before each stop (a kafka.Client
// would do, but it does not yet refresh its metadata when the leader's
// address refuses connections).
func TestIdempotentProducerAcrossFailovers(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	leaktest.Check(t)
	const failovers = 10
	c := startClusterOver(t, 3, "local") // members' Kafka listeners on plain loopback TCP
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	via := &switchingClient{}
	via.to.Store(c.any(c.leader("t", 0)))
	via.Client = via.to.Load()
	prod, err := log.NewProducer(via, log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Timeout: 5 * time.Second, RetryBackoff: 20 * time.Millisecond})
	require.NoError(t, err)

	var (
		mu     sync.Mutex
		acked  []int
		failed []error
	)
	ackedCh := make(chan struct{}, 1) // a nudge after each acknowledgement
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
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
			_, err := prod.Send(ctx, log.Record{Topic: "t", Value: []byte(strconv.Itoa(i))})
			mu.Lock()
			if err == nil {
				acked = append(acked, i)
				select {
				case ackedCh <- struct{}{}:
				default:
				}
			} else {
				failed = append(failed, err)
			}
			mu.Unlock()
		}
	}()

	for i := range failovers {
		old := c.leader("t", 0)
		via.to.Store(c.any(old))
		before := ackedCount()
		c.stop(old)
		c.waitLeaderNot(c.any(old), "t", 0, old)
		// Bounded wait for acknowledgements through the new leader.
		deadline := time.NewTimer(15 * time.Second)
		for ackedCount() < before+5 {
			select {
			case <-ackedCh:
			case <-deadline.C:
				mu.Lock()
				t.Fatalf("failover %d: no acknowledgement: %s; failed sends: %v", i, c.describe("t", 0), failed)
				mu.Unlock()
			}
		}
		deadline.Stop()
		c.start(old)
		c.waitISR("t", 0, 3)
	}
	close(stop)
	wg.Wait()
	require.NoError(t, prod.Close())

	c.waitInSync("t", 0)
	c.checkIdentical("t", 0)
	lp, err := c.member(c.leader("t", 0)).Partition("t", 0)
	require.NoError(t, err)
	recs, err := log.DecodeRecords(readAll(t, lp, lp.HighWatermark()))
	require.NoError(t, err)
	stored := map[int]int{}
	for _, r := range recs {
		v, err := strconv.Atoi(string(r.Value))
		require.NoError(t, err)
		if stored[v]++; stored[v] > 1 {
			t.Fatalf("record %d stored twice", v)
		}
	}
	for _, v := range acked {
		if stored[v] == 0 {
			t.Fatalf("acknowledged record %d lost", v)
		}
	}
	kinds := map[string]int{}
	for _, err := range failed {
		kinds[err.Error()]++
	}
	for k, n := range kinds {
		t.Logf("%d sends failed: %s", n, k)
	}
	t.Logf("%d failovers: %d records acknowledged, %d failed, %d stored, none twice", failovers, len(acked), len(failed), len(stored))
}

// switchingClient sends a producer's calls to the member in to: the
// producer's data plane, moved off a member before the test stops it.
type switchingClient struct {
	log.Client // for what a producer does not call
	to         atomic.Pointer[replica.Broker]
}

func (s *switchingClient) Partitions(ctx context.Context, topic string) (int, error) {
	return s.to.Load().Partitions(ctx, topic)
}

func (s *switchingClient) ProduceBatch(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	return s.to.Load().ProduceBatch(ctx, tp, batch, acks)
}

func (s *switchingClient) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	return s.to.Load().Produce(ctx, tp, batch, acks)
}

func (s *switchingClient) InitProducerID(ctx context.Context) (log.ProducerID, error) {
	return s.to.Load().InitProducerID(ctx)
}
