package replica_test

import (
	"context"
	"fmt"
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

// describe848 describes a consumer-protocol group at whichever member
// coordinates it now.
func describe848(c *memberCluster, g string) (group.ConsumerGroupDescription, int, bool) {
	for i, b := range c.members {
		if b == nil {
			continue
		}
		for _, gc := range replica.KafkaBackend(b).Coordinators() {
			if d, ok := gc.DescribeConsumerGroup(g); ok {
				return d, i + 1, true
			}
		}
	}
	return group.ConsumerGroupDescription{}, 0, false
}

// TestConsumerProtocolOnMembers: log.Consumers of the consumer group
// protocol (KIP-848) on two members of a cluster, whose group another
// member coordinates (their heartbeats cross the Transport): they split
// the partitions, read and commit; the coordinator is stopped, the
// group's partition of __consumer_offsets gets a new leader, which loads
// the group from its records; the consumers follow it, every record is
// read and committed.
func TestConsumerProtocolOnMembers(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testConsumerProtocolOnMembers(t, tr) })
	}
}

func testConsumerProtocolOnMembers(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	const parts, total = 4, 200
	c.createTopic("t", log.TopicConfig{Partitions: parts, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := newGroupRun(t, ctx, c, parts, total)
	coord, g, hosts := r.coord, r.g, r.hosts
	r.produce(hosts[0], 0, total/2, true)

	conses := make([]*log.Consumer, len(hosts))
	for i, id := range hosts {
		cons, err := log.NewConsumer(c.member(id), log.ConsumerConfig{
			Group: g, Topics: []string{"t"}, Protocol: log.GroupProtocolConsumer,
			MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 50 * time.Millisecond,
		})
		require.NoError(t, err)
		conses[i] = cons
		// A newer epoch or a rejoin: the next Poll applies it.
		r.consume(id, cons, log.ErrStaleMemberEpoch, log.ErrFencedMemberEpoch, group.ErrUnknownMember)
	}
	// The two split the partitions, at the coordinator and in what they hold.
	require.Eventually(t, func() bool {
		d, at, ok := describe848(c, g)
		return ok && at == coord && d.State == "Stable" && len(d.Members) == 2 &&
			len(conses[0].Assignment()) == parts/2 && len(conses[1].Assignment()) == parts/2
	}, 60*time.Second, 10*time.Millisecond, "the consumers split %s's partitions", g)

	explain := func() string {
		ends := map[log.TopicPartition]int64{}
		for _, tp := range r.tps {
			ends[tp], _ = c.member(hosts[0]).ListOffset(context.Background(), tp, log.LatestOffset)
		}
		d, at, _ := describe848(c, g)
		return fmt.Sprintf("ends %v; at %d: %+v; held %v %v", ends, at, d, conses[0].Assignment(), conses[1].Assignment())
	}
	r.waitCommitted(1, explain)

	c.stop(coord)
	next := c.waitLeaderNot(c.member(hosts[0]), log.OffsetsTopic, replica.GroupPartition(g, replica.DefaultOffsetsTopicPartitions), coord)
	require.Contains(t, hosts, next)
	r.produce(hosts[1], total/2, total, true)
	final := r.waitCommitted(total, explain)
	r.finish()
	var sum int64
	for _, tp := range r.tps {
		end, err := c.member(hosts[0]).ListOffset(ctx, tp, log.LatestOffset)
		require.NoError(t, err)
		require.Equal(t, end, final[tp], "%v committed to its end", tp)
		sum += end
	}
	require.EqualValues(t, total, sum, "each record written once")
	_, at, ok := describe848(c, g)
	require.True(t, ok, "the new coordinator knows the consumer group")
	require.Contains(t, hosts, at, "a survivor coordinates it") // next, or a later preferred leader
}
