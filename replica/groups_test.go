package replica_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
)

// Two consumers of one group on two members share a topic through the
// coordinator (the leader of __consumer_offsets-0, a third member); their
// commits survive that member's stop: the new leader's coordinator has them.
func TestConsumerGroupAcrossMembers(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("t", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	prod, err := log.NewProducer(c.member(1), log.ProducerConfig{Acks: log.AcksAll, Timeout: 5 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 100 {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % 2, Value: []byte(values(100)[i])})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())

	// The first group call creates __consumer_offsets.
	_, err = c.member(1).FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	coord := c.leader(log.OffsetsTopic, 0)
	var hosts []int
	for id := 1; id <= 3; id++ {
		if id != coord {
			hosts = append(hosts, id)
		}
	}

	var got atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, id := range hosts {
		cons, err := log.NewConsumer(c.member(id), log.ConsumerConfig{
			Group: "g", Topics: []string{"t"}, MaxWait: 100 * time.Millisecond, SessionTimeout: 6 * time.Second,
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cons.Close()
			for got.Load() < 100 {
				recs, err := cons.Poll(ctx)
				if err != nil {
					errs <- err
					return
				}
				got.Add(int64(len(recs)))
				if len(recs) > 0 {
					if err := cons.Commit(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 100, got.Load())

	c.stop(coord)
	c.waitLeaderNot(c.member(hosts[0]), log.OffsetsTopic, 0, coord)
	offs, err := c.member(hosts[0]).FetchOffsets(ctx, "g", []log.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}})
	require.NoError(t, err)
	require.EqualValues(t, 100, offs[log.TopicPartition{Topic: "t", Partition: 0}]+offs[log.TopicPartition{Topic: "t", Partition: 1}], "committed offsets %v", offs)
}
