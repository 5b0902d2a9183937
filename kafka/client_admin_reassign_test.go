package kafka_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/stretchr/testify/require"
)

// raftAddrs returns n distinct loopback addresses whose ports were free a
// moment ago: every listener stays open until all n are chosen, since a
// port closed at once can be handed out again by the next Listen (two
// members given one Raft address failed a clean-clone CI run).
func raftAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// startAdminCluster starts three members that are all voters.
func startAdminCluster(t *testing.T) []*replica.Broker {
	t.Helper()
	dir := t.TempDir()
	var peers []replica.Peer
	for id, raft := range raftAddrs(t, 3) {
		peers = append(peers, replica.Peer{ID: id + 1, Addr: "127.0.0.1:0", RaftAddr: raft})
	}
	members := make([]*replica.Broker, 0, 3)
	t.Cleanup(func() {
		for _, b := range members {
			require.NoError(t, b.Close())
		}
	})
	for id := 1; id <= 3; id++ {
		b, err := replica.Start(replica.Config{
			ID: id, Dir: fmt.Sprintf("%s/member-%d", dir, id), Addr: "127.0.0.1:0",
			RaftAddr: peers[id-1].RaftAddr, Peers: peers, Raft: controller.LoopbackRaft(),
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second,
		})
		require.NoError(t, err)
		members = append(members, b)
	}
	return members
}

// waitPartition waits until every member's image has topic-p in a state
// done accepts.
func waitPartition(ctx context.Context, t *testing.T, members []*replica.Broker, topic string, p int, done func(controller.PartitionState) bool) controller.PartitionState {
	t.Helper()
	var st controller.PartitionState
	for _, m := range members {
		img := m.Image()
		for {
			s, ok := img.Partition(topic, p)
			if ok && done(s) {
				st = s
				break
			}
			var err error
			img, err = m.WaitImage(ctx, img.Version())
			require.NoError(t, err, "%s-%d on member %d: last state %+v", topic, p, m.ID(), s)
		}
	}
	return st
}

// A program moves a partition and elects its preferred leader through a
// Client dialed to one member of a three-member cluster: bad targets are
// refused partition by partition with errors.Is-testable sentinels and
// change nothing; a good one moves the partition onto the member that did
// not hold it; a preferred election leaves the first replica leading and
// a second one is not needed.
func TestClientReassignAndElect(t *testing.T) {
	leaktest.Check(t)
	members := startAdminCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{members[1].Addr()}})
	require.NoError(t, err)
	defer c.Close()

	require.NoError(t, c.CreateTopic(ctx, "mv", log.TopicConfig{Partitions: 1, ReplicationFactor: 2, MinInSyncReplicas: 1}))
	orig := waitPartition(ctx, t, members, "mv", 0, func(s controller.PartitionState) bool { return s.Leader != controller.NoLeader })
	other := 6 - orig.Replicas[0] - orig.Replicas[1]

	// Bad targets: one result each, nothing recorded.
	res, err := c.AlterPartitionReassignments(ctx, []kafka.ReassignTarget{
		{Topic: "nope", Partition: 0, Replicas: []int{1}},
		{Topic: "mv", Partition: 7, Replicas: []int{1}},
	})
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		require.ErrorIs(t, r.Err, log.ErrUnknownTopic, "%s-%d", r.Topic, r.Partition)
	}
	for _, tc := range []struct {
		replicas []int
		want     error
	}{
		{[]int{1, 1}, kafka.ErrInvalidReplicaAssignment},
		{[]int{1, 9}, kafka.ErrInvalidReplicaAssignment},
		{[]int{}, kafka.ErrInvalidReplicaAssignment},
		{nil, kafka.ErrNoReassignmentInProgress},
	} {
		res, err := c.AlterPartitionReassignments(ctx, []kafka.ReassignTarget{{Topic: "mv", Partition: 0, Replicas: tc.replicas}})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.Equal(t, "mv", res[0].Topic)
		require.ErrorIs(t, res[0].Err, tc.want, "replicas %v", tc.replicas)
	}
	moves, err := c.ListPartitionReassignments(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, moves)
	st, _ := members[0].Image().Partition("mv", 0)
	require.Equal(t, orig.Replicas, st.Replicas, "a refused target changed the assignment")

	// Election errors per partition.
	er, err := c.ElectLeaders(ctx, false, []log.TopicPartition{{Topic: "nope", Partition: 0}})
	require.NoError(t, err)
	require.Len(t, er, 1)
	require.ErrorIs(t, er[0].Err, log.ErrUnknownTopic)

	// The move: onto the member that held no replica, off the second one.
	target := []int{other, orig.Replicas[0]}
	res, err = c.AlterPartitionReassignments(ctx, []kafka.ReassignTarget{{Topic: "mv", Partition: 0, Replicas: target}})
	require.NoError(t, err)
	require.Equal(t, []kafka.ReassignResult{{Topic: "mv", Partition: 0}}, res)
	waitPartition(ctx, t, members, "mv", 0, func(s controller.PartitionState) bool {
		return slices.Equal(s.Replicas, target) && len(s.AddingReplicas)+len(s.RemovingReplicas) == 0
	})
	moves, err = c.ListPartitionReassignments(ctx, []log.TopicPartition{{Topic: "mv", Partition: 0}})
	require.NoError(t, err)
	require.Empty(t, moves)

	// A preferred election: the first replica leads after it (elected now,
	// or already by the move), and a second one is not needed.
	er, err = c.ElectLeaders(ctx, false, []log.TopicPartition{{Topic: "mv", Partition: 0}})
	require.NoError(t, err)
	require.Len(t, er, 1)
	if er[0].Err != nil {
		require.ErrorIs(t, er[0].Err, kafka.ErrElectionNotNeeded)
	}
	waitPartition(ctx, t, members, "mv", 0, func(s controller.PartitionState) bool { return s.Leader == other })
	er, err = c.ElectLeaders(ctx, false, []log.TopicPartition{{Topic: "mv", Partition: 0}})
	require.NoError(t, err)
	require.Len(t, er, 1)
	require.ErrorIs(t, er[0].Err, kafka.ErrElectionNotNeeded)
}
