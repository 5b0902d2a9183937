package replica_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
)

// The "grow a cluster" scenario, under an idempotent acks=all load
// on both partitions of a topic throughout: three voters; a fourth member
// joins as a broker; a partition is moved onto it (and off member D) and
// it is elected that partition's preferred leader; the other partition is
// moved off D too; the fourth member takes D's vote (AddRaftVoter, then
// RemoveRaftVoter of D); D is stopped and unregistered. No acknowledged
// record is lost, the producers saw no error they had to give up on, and
// the replicas are identical. (TestReplaceVoterWhileProducing replaces a
// voter without moving data.) Over the Kafka-protocol data plane, this
// caught members sending produces back and forth after the election
// (kafka_produce.go).
func TestGrowMoveAndDecommission(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testGrowMoveAndDecommission(t, tr) })
	}
}

func testGrowMoveAndDecommission(t *testing.T, tr string) {
	leaktest.Check(t)
	begin := time.Now()
	logf := func(f string, a ...any) { t.Logf("%6.2fs "+f, append([]any{time.Since(begin).Seconds()}, a...)...) }
	c := startClusterOver(t, 3, tr)
	c.createTopic("orders", log.TopicConfig{Partitions: 2, ReplicationFactor: 3, MinInSyncReplicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// D, the member to decommission, does not lead partition 0 (so that
	// its leader stays through the move and the preferred election is
	// one); the loads go through another member, which stays.
	p0, _ := c.any().Image().Partition("orders", 0)
	d := p0.Replicas[0]
	if d == p0.Leader {
		d = p0.Replicas[1]
	}
	client := c.any(d)
	loads := []*load{startLoad(t, client, "orders", 0, "a"), startLoad(t, client, "orders", 1, "b")}
	for _, l := range loads {
		l.waitAcked(20)
	}
	logf("loads acknowledged after the decommission")

	b4 := c.addBroker()
	c.waitLive(4)
	require.False(t, b4.Voter())
	without := func(rs []int, x int) []int {
		return slices.DeleteFunc(slices.Clone(rs), func(r int) bool { return r == x })
	}
	p1, _ := c.any().Image().Partition("orders", 1)
	target0 := append([]int{4}, without(p0.Replicas, d)...)
	target1 := append(without(p1.Replicas, d), 4)
	var res []controller.ReassignResult
	err := retryUnknownOutcome(ctx, func() (err error) {
		res, err = client.AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "orders", Partition: 0, Replicas: target0}})
		return err
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	c.waitMoved("orders", 0, target0)
	logf("partition 0 moved to %v", target0)
	loads[0].waitAcked(20)
	logf("partition 0: 20 more acknowledged after the move")

	// 4 is partition 0's preferred replica now: elect it.
	st, _ := client.Image().Partition("orders", 0)
	require.Equal(t, p0.Leader, st.Leader, "a leader that stays a replica keeps leading through the move")
	elected, err := client.ElectLeaders(ctx, controller.ElectPreferred, []log.TopicPartition{{Topic: "orders", Partition: 0}})
	require.NoError(t, err)
	require.NoError(t, elected[0].Err)
	require.Equal(t, 4, elected[0].Leader)
	logf("4 elected")
	loads[0].waitAcked(20)
	logf("partition 0: 20 more acknowledged after the election")

	err = retryUnknownOutcome(ctx, func() (err error) {
		res, err = client.AlterPartitionReassignments(ctx, []controller.ReassignTarget{{Topic: "orders", Partition: 1, Replicas: target1}})
		return err
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	c.waitMoved("orders", 1, target1)
	logf("partition 1 moved to %v", target1)
	loads[1].waitAcked(20)

	// D holds no replica (of orders, nor of anything else: the groups'
	// topic is not created here); 4 takes its vote, D stops and is gone.
	for _, name := range c.member(d).Image().Topics() {
		ti, _ := c.member(d).Image().Topic(name)
		for _, p := range ti.Partitions {
			require.NotContains(t, p.Replicas, d, "%s-%d", name, p.Partition)
		}
	}
	retryChange(t, "add voter 4", controller.ErrDuplicateVoter, func() error { return client.AddRaftVoter(ctx, 4) })
	retryChange(t, "remove voter D", controller.ErrVoterNotFound, func() error { return client.RemoveRaftVoter(ctx, d) })
	voters, observers := quorumOf(t, ctx, client)
	require.Equal(t, append(without([]int{1, 2, 3}, d), 4), voters)
	require.Equal(t, []int{d}, observers)
	logf("voters %v", voters)
	c.stop(d)
	logf("%d stopped", d)
	require.NoError(t, client.UnregisterBroker(ctx, d))
	c.waitImage(client, "D unregistered", func(img *controller.Image) bool {
		_, ok := img.Broker(d)
		return !ok
	})
	for _, l := range loads {
		l.waitAcked(20)
	}
	logf("loads acknowledged after the decommission")

	acked := [][]string{loads[0].stop(), loads[1].stop()}
	for p := range 2 {
		c.waitInSync("orders", p)
		c.checkIdentical("orders", p)
		consumedHas(t, client, "orders", p, acked[p])
	}
	t.Logf("%d + %d records acknowledged and kept across the moves, the election and the decommission", len(acked[0]), len(acked[1]))
}
