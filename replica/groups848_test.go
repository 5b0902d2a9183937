package replica_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	createOffsetsTopic(t, c)
	coord, g := 0, ""
	for id, gid := range groupsOn(t, c) {
		if id > coord {
			coord, g = id, gid
		}
	}
	var hosts []int
	for id := 1; id <= 3; id++ {
		if id != coord {
			hosts = append(hosts, id)
		}
	}
	vals := values(total)
	produce := func(via int, from, to int) {
		// Idempotent: a send that meets the leader change is not written twice.
		prod, err := log.NewProducer(c.member(via), log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Timeout: 10 * time.Second})
		require.NoError(t, err)
		for i := from; i < to; i++ {
			_, err := prod.Send(ctx, log.Record{Topic: "t", Partition: i % parts, Value: []byte(vals[i])})
			require.NoError(t, err)
		}
		require.NoError(t, prod.Close())
	}
	produce(hosts[0], 0, total/2)

	var mu sync.Mutex
	seen := map[string]bool{}
	committed := make(chan struct{}, 64)
	stop := make(chan struct{})
	errs := make(chan error, len(hosts))
	var wg sync.WaitGroup
	conses := make([]*log.Consumer, len(hosts))
	for i, id := range hosts {
		cons, err := log.NewConsumer(c.member(id), log.ConsumerConfig{
			Group: g, Topics: []string{"t"}, Protocol: log.GroupProtocolConsumer,
			MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 50 * time.Millisecond,
		})
		require.NoError(t, err)
		conses[i] = cons
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cons.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				recs, err := cons.Poll(ctx)
				if err != nil {
					errs <- fmt.Errorf("member %d: poll: %w", id, err)
					return
				}
				mu.Lock()
				for _, r := range recs {
					seen[string(r.Value)] = true
				}
				mu.Unlock()
				if len(recs) == 0 {
					continue
				}
				switch err := cons.Commit(ctx); {
				case err == nil:
					select {
					case committed <- struct{}{}:
					default:
					}
				case errors.Is(err, log.ErrStaleMemberEpoch), errors.Is(err, log.ErrFencedMemberEpoch), errors.Is(err, group.ErrUnknownMember):
					// A newer epoch or a rejoin: the next Poll applies it.
				default:
					errs <- fmt.Errorf("member %d: commit: %w", id, err)
					return
				}
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	// The two split the partitions, at the coordinator and in what they hold.
	require.Eventually(t, func() bool {
		d, at, ok := describe848(c, g)
		return ok && at == coord && d.State == "Stable" && len(d.Members) == 2 &&
			len(conses[0].Assignment()) == parts/2 && len(conses[1].Assignment()) == parts/2
	}, 60*time.Second, 10*time.Millisecond, "the consumers split %s's partitions", g)

	tps := make([]log.TopicPartition, parts)
	for p := range tps {
		tps[p] = log.TopicPartition{Topic: "t", Partition: p}
	}
	// waitCommitted waits, commit by commit, until the group has committed
	// want records in all.
	waitCommitted := func(want int64) map[log.TopicPartition]int64 {
		t.Helper()
		for {
			offs, err := c.member(hosts[0]).FetchOffsets(ctx, g, tps)
			require.NoError(t, err)
			var sum int64
			for _, o := range offs {
				sum += o
			}
			if sum >= want {
				return offs
			}
			select {
			case <-committed:
			case err := <-errs:
				t.Fatal(err)
			case <-ctx.Done():
				ends := map[log.TopicPartition]int64{}
				for _, tp := range tps {
					ends[tp], _ = c.member(hosts[0]).ListOffset(context.Background(), tp, log.LatestOffset)
				}
				d, at, _ := describe848(c, g)
				t.Fatalf("group %s committed %v, want %d records; ends %v; at %d: %+v; held %v %v", g, offs, want, ends, at, d, conses[0].Assignment(), conses[1].Assignment())
			}
		}
	}
	waitCommitted(1)

	c.stop(coord)
	next := c.waitLeaderNot(c.member(hosts[0]), log.OffsetsTopic, replica.GroupPartition(g, replica.DefaultOffsetsTopicPartitions), coord)
	require.Contains(t, hosts, next)
	produce(hosts[1], total/2, total)
	final := waitCommitted(total)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	mu.Lock()
	require.Len(t, seen, total, "every acknowledged record consumed")
	mu.Unlock()
	var sum int64
	for _, tp := range tps {
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
