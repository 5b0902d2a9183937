package replica_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// replicasOf returns the replicas of topic-p as the running members see them.
func (c *memberCluster) replicasOf(topic string, p int) []int {
	c.t.Helper()
	st, ok := c.any().Image().Partition(topic, p)
	require.True(c.t, ok)
	return st.Replicas
}

// waitReplicasInSync waits until every running replica of topic-p (the
// members the metadata names, not every member) ends where the leader
// does and has its HW (bounded polling: nothing announces it).
func (c *memberCluster) waitReplicasInSync(topic string, p int) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		lid := c.leader(topic, p)
		ok := lid > 0 && c.member(lid) != nil
		if ok {
			lp, err := c.member(lid).Partition(topic, p)
			require.NoError(c.t, err)
			for _, id := range c.replicasOf(topic, p) {
				b := c.member(id)
				if b == nil {
					continue
				}
				rp, err := b.Partition(topic, p)
				if err != nil || rp.EndOffset() != lp.EndOffset() || rp.HighWatermark() != lp.HighWatermark() || lp.HighWatermark() != lp.EndOffset() {
					ok = false
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s-%d: replicas not in sync: %s", topic, p, c.describe(topic, p))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkReplicasIdentical is checkIdentical over the partition's replicas:
// each running one holds the leader's log byte for byte up to its HW.
func (c *memberCluster) checkReplicasIdentical(topic string, p int) {
	c.t.Helper()
	lid := c.leader(topic, p)
	lp, err := c.member(lid).Partition(topic, p)
	require.NoError(c.t, err)
	hw := lp.HighWatermark()
	want := readAll(c.t, lp, hw)
	for _, id := range c.replicasOf(topic, p) {
		if id == lid || c.member(id) == nil {
			continue
		}
		rp, err := c.member(id).Partition(topic, p)
		require.NoError(c.t, err)
		require.Equal(c.t, want, readAll(c.t, rp, hw), "replica %d of %s-%d differs from leader %d below HW %d", id, topic, p, lid, hw)
	}
}

// waitISRSize waits until every running member has applied an ISR of n
// for topic-p.
func (c *memberCluster) waitISRSize(topic string, p, n int) {
	c.t.Helper()
	for _, b := range c.members {
		if b != nil {
			c.waitImage(b, fmt.Sprintf("%s-%d ISR of %d", topic, p, n), func(img *controller.Image) bool {
				st, ok := img.Partition(topic, p)
				return ok && len(st.ISR) == n
			})
		}
	}
}

// waitAllISR waits until every running member has applied an ISR of at
// least n for every partition of topic.
func (c *memberCluster) waitAllISR(topic string, partitions, n int) {
	c.t.Helper()
	for _, b := range c.members {
		if b != nil {
			c.waitImage(b, fmt.Sprintf("%s: every ISR of %d or more", topic, n), func(img *controller.Image) bool {
				for p := range partitions {
					if st, ok := img.Partition(topic, p); !ok || len(st.ISR) < n {
						return false
					}
				}
				return true
			})
		}
	}
}

// sendAll writes one record "tag-p" to each partition p of topic with
// acks=all through b (which routes it to the leader, following moves).
func (c *memberCluster) sendAll(b *replica.Broker, topic string, partitions int, tag string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for p := range partitions {
		_, err := b.Produce(ctx, log.TopicPartition{Topic: topic, Partition: p}, recordBatch(fmt.Sprintf("%s-%d", tag, p)), log.AcksAll)
		require.NoError(c.t, err, "%s-%d: %s", topic, p, c.describe(topic, p))
	}
}

// valuesOf returns the values of b's replica of topic-p below its HW.
func valuesOf(t *testing.T, b *replica.Broker, topic string, p int) []string {
	t.Helper()
	lp, err := b.Partition(topic, p)
	require.NoError(t, err)
	recs, err := log.DecodeRecords(readAll(t, lp, lp.HighWatermark()))
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// TestFiveMembers runs RF 3 topics over five members: replicas spread
// over all five, a leader stopped and then a follower, MinInSyncReplicas
// refusing acks=all while one replica is left and accepting again when the
// others return, the Raft leader's member stopped with the cluster going on
// (a new controller, new leaders for what it led, a topic created), and
// every replica identical to its leader up to the HW throughout.
func TestFiveMembers(t *testing.T) {
	leaktest.Check(t)
	c := startClusterOver(t, 5, "kafka")
	const parts = 5
	c.createTopic("t", log.TopicConfig{Partitions: parts, ReplicationFactor: 3, MinInSyncReplicas: 2})

	// Placement: three distinct replicas each, every member holding some,
	// the leaders spread.
	holds, leads := map[int]int{}, map[int]int{}
	for p := range parts {
		rs := c.replicasOf("t", p)
		require.Len(t, rs, 3)
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(rs))), 3, "partition %d: replicas %v", p, rs)
		for _, r := range rs {
			holds[r]++
		}
		leads[c.leader("t", p)]++
	}
	require.Len(t, holds, 5, "replicas on every member: %v", holds)
	require.Greater(t, len(leads), 1, "leaders spread: %v", leads)

	c.sendAll(c.member(1), "t", parts, "a")

	// A leader fails (partition 0's): a replica of the ISR takes over,
	// nothing acknowledged is lost.
	oldLeader := c.leader("t", 0)
	c.stop(oldLeader)
	nl := c.waitLeaderNot(c.any(), "t", 0, oldLeader)
	require.Contains(t, c.replicasOf("t", 0), nl)
	c.waitISRSize("t", 0, 2)
	c.sendAll(c.any(), "t", parts, "b")

	// A follower fails too: partition 0 has its leader alone, fewer than
	// MinInSyncReplicas, and acks=all is refused before the append.
	var follower int
	for _, r := range c.replicasOf("t", 0) {
		if r != nl && r != oldLeader {
			follower = r
		}
	}
	require.NotZero(t, follower)
	c.stop(follower)
	c.waitISRSize("t", 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	end := func() int64 {
		lp, err := c.member(nl).Partition("t", 0)
		require.NoError(t, err)
		return lp.EndOffset()
	}
	before := end()
	_, err := c.member(nl).Produce(ctx, log.TopicPartition{Topic: "t"}, oneBatch(t, "refused"), log.AcksAll)
	require.ErrorIs(t, err, log.ErrNotEnoughReplicas)
	require.Equal(t, before, end(), "a refused produce appended nothing")

	// The follower returns: the ISR grows back to 2 and acks=all goes.
	c.start(follower)
	c.waitISRSize("t", 0, 2)
	c.waitAllISR("t", parts, 2) // it rejoins the others' ISRs too
	c.sendAll(c.any(), "t", parts, "c")
	c.start(oldLeader)
	c.waitAllISR("t", parts, 3)
	for p := range parts {
		c.waitReplicasInSync("t", p)
		c.checkReplicasIdentical("t", p)
	}
	want := []string{"a-0", "b-0", "c-0"}
	require.Equal(t, want, valuesOf(t, c.member(c.leader("t", 0)), "t", 0))

	// Controller failover: the member of the Raft leader stops; the four
	// others elect a controller and the cluster goes on.
	ctl, ok := c.any().Controller()
	require.True(t, ok)
	led := []int{}
	for p := range parts {
		if c.leader("t", p) == ctl {
			led = append(led, p)
		}
	}
	c.stop(ctl)
	// Bounded polling: a member announces no change of controller.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if id, ok := c.any().Controller(); ok && id != ctl {
			break
		}
		require.True(t, time.Now().Before(deadline), "no controller elected after %d stopped", ctl)
	}
	for _, p := range led {
		c.waitLeaderNot(c.any(), "t", p, ctl)
	}
	c.sendAll(c.any(), "t", parts, "d")
	c.createTopic("after", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	c.sendAll(c.any(), "after", 2, "e")
	for p := range parts {
		c.waitReplicasInSync("t", p)
		c.checkReplicasIdentical("t", p)
		require.Equal(t, []string{fmt.Sprintf("a-%d", p), fmt.Sprintf("b-%d", p), fmt.Sprintf("c-%d", p), fmt.Sprintf("d-%d", p)},
			valuesOf(t, c.member(c.leader("t", p)), "t", p))
	}
	for p := range 2 {
		c.waitReplicasInSync("after", p)
		c.checkReplicasIdentical("after", p)
	}
	t.Logf("controller %d stopped; controller now %d; it led partitions %v", ctl, func() int { id, _ := c.any().Controller(); return id }(), led)
}
