package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// TestConsumerGroupRegexOnMember: a KIP-848 member subscribing by regular
// expression at a cluster member's coordinator gets the partitions of the
// matching topics, internal ones included: Kafka resolves a regex against
// every topic of its metadata image, and kgo's Test848RegexBrokerResolves
// expects __consumer_offsets assigned to a regex naming it.
func TestConsumerGroupRegexOnMember(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, "local")
	c.createTopic("orders-eu", log.TopicConfig{Partitions: 2, ReplicationFactor: 1})
	c.createTopic("orders-us", log.TopicConfig{Partitions: 1, ReplicationFactor: 1})
	c.createTopic("payments", log.TopicConfig{Partitions: 1, ReplicationFactor: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createOffsetsTopic(t, c)
	for _, b := range c.members {
		c.waitImage(b, "payments", func(img *controller.Image) bool { _, ok := img.Topic("payments"); return ok })
	}
	var gc *group.Coordinator
	for gc == nil {
		for _, b := range c.members {
			if g, _, ok := replica.KafkaBackend(b).CoordinatorFor(ctx, "g"); ok && g != nil {
				gc = g
			}
		}
		if gc == nil {
			select {
			case <-ctx.Done():
				t.Fatal("no coordinator of g")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	join := func(member, expr string) []group.TopicPartition {
		t.Helper()
		resp, err := gc.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{Group: "g", MemberID: member, RebalanceTimeout: 30 * time.Second,
			SubscribedTopicRegex: &expr, Owned: []group.TopicPartition{}, ClientID: "c", ClientHost: "h"})
		require.NoError(t, err)
		return resp.Assignment
	}
	require.ElementsMatch(t, []group.TopicPartition{{Topic: "orders-eu", Partition: 0}, {Topic: "orders-eu", Partition: 1}, {Topic: "orders-us", Partition: 0}},
		join("m1", "orders-.*"))

	// m2 takes every topic, __consumer_offsets too: payments and the
	// internal topic are its alone.
	join("m2", ".*")
	d, ok := gc.DescribeConsumerGroup("g")
	require.True(t, ok)
	targets := map[string]int{}
	for _, m := range d.Members {
		for _, tp := range m.TargetAssignment {
			targets[tp.Topic]++
		}
	}
	require.Equal(t, map[string]int{"orders-eu": 2, "orders-us": 1, "payments": 1,
		log.OffsetsTopic: replica.DefaultOffsetsTopicPartitions}, targets)
}
