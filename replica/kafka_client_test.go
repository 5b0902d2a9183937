package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// A Kafka-protocol client given one member's address learns every broker
// and each partition's leader from Metadata, and produces (acks=all) and
// consumes across the cluster.
func TestKafkaClientAgainstCluster(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local") // members listen on plain loopback TCP
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	seed := c.member(1).Addr()
	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{seed}})
	require.NoError(t, err)
	defer kc.Close()
	n, err := kc.Partitions(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, 3, n)

	prod, err := log.NewProducer(kc, log.ProducerConfig{Acks: log.AcksAll, Timeout: 10 * time.Second})
	require.NoError(t, err)
	for i := range 90 {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % 3, Value: []byte(values(90)[i])})
		require.NoError(t, err)
	}
	require.NoError(t, prod.Close())
	for p := range 3 {
		c.waitInSync("t", p)
		c.checkIdentical("t", p)
	}
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	got := 0
	for got < 90 {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err)
		got += len(recs)
	}
	require.Equal(t, 90, got)

	// What Metadata answers: every live broker, the real leaders.
	require.Len(t, replica.KafkaBackend(c.member(1)).ClusterBrokers(), 3)
	for p := range 3 {
		leader, _, replicas, isr, ok := replica.KafkaBackend(c.member(2)).PartitionState("t", p)
		require.True(t, ok)
		require.EqualValues(t, c.leader("t", p), leader)
		require.Len(t, replicas, 3)
		require.Len(t, isr, 3)
	}
}

// A Kafka-protocol client whose partition leader stops (its address then
// refuses connections) learns the new leader from Metadata: an idempotent
// Producer over it goes on, every record stored once.
func TestKafkaClientFollowsLeaderStop(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var seeds []string
	for id := 1; id <= 3; id++ {
		seeds = append(seeds, c.member(id).Addr())
	}
	kc, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds})
	require.NoError(t, err)
	defer kc.Close()
	prod, err := log.NewProducer(kc, log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Timeout: 30 * time.Second})
	require.NoError(t, err)
	vals := values(100)
	for i := range 50 {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Value: []byte(vals[i])})
		require.NoError(t, err)
	}
	c.stop(c.leader("t", 0))
	for i := 50; i < 100; i++ {
		_, err := prod.Send(ctx, log.Record{Topic: "t", Value: []byte(vals[i])})
		require.NoError(t, err, "record %d, after the leader stopped", i)
	}
	require.NoError(t, prod.Close())

	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	var got []string
	for len(got) < 100 {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	require.Equal(t, vals, got, "each record once, in order")
}
