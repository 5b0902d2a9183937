package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
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
	n, err := kc.Partitions("t")
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
	require.Len(t, c.member(1).ClusterBrokers(), 3)
	for p := range 3 {
		leader, _, replicas, isr, ok := c.member(2).PartitionState("t", p)
		require.True(t, ok)
		require.EqualValues(t, c.leader("t", p), leader)
		require.Len(t, replicas, 3)
		require.Len(t, isr, 3)
	}
}
