package replica_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/replica/internal/machine"
)

// TestLeaderReassignmentCompletedByAlterPartition: the leader's ISR
// expansion that completes a reassignment is accepted with the replicas
// changed too; the metadata of the same partition epoch then drops the
// removed follower, which neither holds the HW back nor fetches any more.
func TestLeaderReassignmentCompletedByAlterPartition(t *testing.T) {
	// Moving from {1,2,3} to {1,2,4}: replicas {1,2,4,3}, 4 adding, 3 removing.
	l := newLeader(t, []int{1, 2, 4, 3}, []int{1, 2, 3}, 1, 0, 0)
	l.append(10)
	l.fetch(2, 10)
	l.fetch(3, 10)
	// 4 catches up and is proposed.
	props := only[machine.ProposeISR](l.fetch(4, 10))
	require.Len(t, props, 1)
	require.Equal(t, []int{1, 2, 4, 3}, props[0].ISR)
	// The controller completes the move with it: replicas {1,2,4}, ISR {1,2,4}.
	l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterAccepted, ISR: []int{1, 2, 4}, PartitionEpoch: 11})
	l.step(machine.Metadata{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 11, Replicas: []int{1, 2, 4}, ISR: []int{1, 2, 4}, MinInSyncReplicas: 1})
	_, ok := l.m.FollowerLogEnd(3)
	require.False(t, ok, "3 is no longer a follower")
	require.ErrorIs(t, answerOf(t, l.fetch(3, 10)).Err, machine.ErrNotReplica)
	// 3, caught up a moment ago, no longer holds the HW.
	l.at(time.Second).append(20)
	l.fetch(2, 20)
	require.Equal(t, []machine.SetHW{{HW: 20}}, only[machine.SetHW](l.fetch(4, 20)))
}
