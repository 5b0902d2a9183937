package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// moving is ps with a reassignment in progress.
func moving(replicas, isr []int, leader int, le, pe int32, adding, removing []int) PartitionState {
	p := ps(replicas, isr, leader, le, pe)
	p.AddingReplicas, p.RemovingReplicas = adding, removing
	return p
}

func reassignRec(replicas, adding, removing []int, leader int, isr []int, le, pe int32) partitionReassignRecord {
	return partitionReassignRecord{
		TopicID: tid, Replicas: replicas, AddingReplicas: adding, RemovingReplicas: removing,
		Leader: leader, ISR: isr, LeaderEpoch: le, PartitionEpoch: pe,
	}
}

func TestDecideAlterReassignments(t *testing.T) {
	// Brokers 1-4 live, 5 registered and fenced.
	brokers := append(liveBrokerRecords(1, 2, 3, 4), registerBrokerRecord{ID: 5, Epoch: 5, Addr: "b5"})
	steady := ps([]int{1, 2, 3}, []int{1, 2, 3}, 1, 4, 7)
	tests := []struct {
		name     string
		part     PartitionState
		unclean  bool
		replicas []int // nil: cancel
		keepRF   bool  // AllowReplicationFactorChange false
		want     []record
		wantErr  error
	}{
		{name: "move one replica: target first, then the removing one",
			part: steady, replicas: []int{4, 2, 1},
			want: []record{reassignRec([]int{4, 2, 1, 3}, []int{4}, []int{3}, 1, []int{2, 1, 3}, 4, 8)}},
		{name: "add a replica only",
			part: steady, replicas: []int{1, 2, 3, 4},
			want: []record{reassignRec([]int{1, 2, 3, 4}, []int{4}, nil, 1, []int{1, 2, 3}, 4, 8)}},
		{name: "remove only: completes at once, leader stays",
			part: steady, replicas: []int{1, 2},
			want: []record{reassignRec([]int{1, 2}, nil, nil, 1, []int{1, 2}, 4, 8)}},
		{name: "remove the leader: completes at once with a new leader",
			part: steady, replicas: []int{3, 2},
			want: []record{reassignRec([]int{3, 2}, nil, nil, 3, []int{3, 2}, 5, 8)}},
		{name: "reorder only: completes at once, leadership stays (no preferred election)",
			part: steady, replicas: []int{3, 1, 2},
			want: []record{reassignRec([]int{3, 1, 2}, nil, nil, 1, []int{3, 1, 2}, 4, 8)}},
		{name: "remove a replica out of the ISR",
			part: ps([]int{1, 2, 3}, []int{1, 2}, 1, 4, 7), replicas: []int{1, 2},
			want: []record{reassignRec([]int{1, 2}, nil, nil, 1, []int{1, 2}, 4, 8)}},
		{name: "target replica out of the ISR: waits",
			part: ps([]int{1, 2, 3}, []int{1, 2}, 1, 4, 7), replicas: []int{3, 2},
			want: []record{reassignRec([]int{3, 2, 1}, nil, []int{1}, 1, []int{2, 1}, 4, 8)}},
		{name: "same replicas: nothing to do", part: steady, replicas: []int{1, 2, 3}},
		{name: "onto a fenced registered broker", part: steady, replicas: []int{5, 2, 1},
			want: []record{reassignRec([]int{5, 2, 1, 3}, []int{5}, []int{3}, 1, []int{2, 1, 3}, 4, 8)}},
		{name: "a new target replaces one in progress, from the current replicas",
			part: moving([]int{4, 2, 1, 3}, []int{2, 1, 3}, 1, 4, 8, []int{4}, []int{3}), replicas: []int{3, 2, 1},
			want: []record{reassignRec([]int{3, 2, 1}, nil, nil, 1, []int{3, 2, 1}, 4, 9)}}, // and completes: all in sync
		{name: "cancel: back to the original replicas",
			part: moving([]int{4, 2, 1, 3}, []int{2, 1, 3}, 1, 4, 8, []int{4}, []int{3}),
			want: []record{reassignRec([]int{2, 1, 3}, nil, nil, 1, []int{2, 1, 3}, 4, 9)}},
		{name: "cancel after the new replica joined the ISR and leads",
			part: moving([]int{4, 2, 1, 3}, []int{4, 2}, 4, 6, 10, []int{4}, []int{3}),
			want: []record{reassignRec([]int{2, 1, 3}, nil, nil, 2, []int{2}, 7, 11)}},
		{name: "cancel with only new replicas in sync: refused without unclean",
			part:    moving([]int{4, 1}, []int{4}, 4, 6, 10, []int{4}, []int{1}),
			wantErr: ErrInvalidReplicaAssignment},
		{name: "cancel with only new replicas in sync: unclean",
			part: moving([]int{4, 1}, []int{4}, 4, 6, 10, []int{4}, []int{1}), unclean: true,
			want: []record{reassignRec([]int{1}, nil, nil, 1, []int{1}, 7, 11)}},
		{name: "cancel without a reassignment", part: steady, wantErr: ErrNoReassignmentInProgress},
		{name: "empty target", part: steady, replicas: []int{}, wantErr: ErrInvalidReplicaAssignment},
		{name: "duplicate broker", part: steady, replicas: []int{1, 2, 1}, wantErr: ErrInvalidReplicaAssignment},
		{name: "unregistered broker", part: steady, replicas: []int{1, 2, 9}, wantErr: ErrInvalidReplicaAssignment},
		{name: "keeping the replication factor: a move of one replica",
			part: steady, replicas: []int{4, 2, 1}, keepRF: true,
			want: []record{reassignRec([]int{4, 2, 1, 3}, []int{4}, []int{3}, 1, []int{2, 1, 3}, 4, 8)}},
		{name: "keeping the replication factor: one more replica refused",
			part: steady, replicas: []int{1, 2, 3, 4}, keepRF: true, wantErr: ErrInvalidReplicationFactor},
		{name: "keeping the replication factor: one fewer refused",
			part: steady, replicas: []int{1, 2}, keepRF: true, wantErr: ErrInvalidReplicationFactor},
		{name: "keeping the replication factor of a partition moving: the target's",
			part: moving([]int{4, 2, 1, 3}, []int{2, 1, 3}, 1, 4, 8, []int{4}, []int{3}), replicas: []int{3, 2, 1}, keepRF: true,
			want: []record{reassignRec([]int{3, 2, 1}, nil, nil, 1, []int{3, 2, 1}, 4, 9)}},
		{name: "keeping the replication factor: a cancel is no change of it",
			part: moving([]int{4, 2, 1, 3}, []int{2, 1, 3}, 1, 4, 8, []int{4}, []int{3}), keepRF: true,
			want: []record{reassignRec([]int{2, 1, 3}, nil, nil, 1, []int{2, 1, 3}, 4, 9)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, append(brokers, topicWith(tc.unclean, tc.part)...)...)
			before := encodeSnapshot(nil, img)
			recs, res := decideAlterReassignments(img, []ReassignTarget{{Topic: "t", Partition: 0, Replicas: tc.replicas, KeepReplicationFactor: tc.keepRF}})
			require.Equal(t, before, encodeSnapshot(nil, img), "a decision changed the image")
			require.Len(t, res, 1)
			if tc.wantErr != nil {
				require.Equal(t, wireCode(tc.wantErr), res[0].Code, res[0].Message)
				require.Empty(t, recs)
				return
			}
			require.Empty(t, res[0].Code, res[0].Message)
			if tc.want == nil {
				require.Empty(t, recs)
				return
			}
			require.Equal(t, tc.want, recs)
			applyAll(t, img, recs)
			// The records survive the codec, and a snapshot keeps the
			// reassignment in progress.
			got, err := decodeEntry(encodeEntry(nil, recs))
			require.NoError(t, err)
			require.Equal(t, recs, got)
			snap, err := decodeSnapshot(encodeSnapshot(nil, img))
			require.NoError(t, err)
			want, _ := img.Topic("t")
			have, _ := snap.Topic("t")
			require.Equal(t, want, have)
			require.Equal(t, img.Reassignments(), snap.Reassignments())
		})
	}
}

func TestDecideAlterReassignmentsUnknown(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1, 2), topicWith(false, ps([]int{1}, []int{1}, 1, 0, 0))...)...)
	recs, res := decideAlterReassignments(img, []ReassignTarget{
		{Topic: "x", Partition: 0, Replicas: []int{1}},
		{Topic: "t", Partition: 3, Replicas: []int{1}},
		{Topic: "t", Partition: 0, Replicas: []int{2}},
	})
	require.Len(t, recs, 1)
	require.Equal(t, wireCode(ErrUnknownTopic), res[0].Code)
	require.Equal(t, wireCode(ErrUnknownPartition), res[1].Code)
	require.Empty(t, res[2].Code)
}

// TestReassignmentSteps walks one move through its steps as the leader's
// AlterPartitions drive it: start, the new replica joins the ISR (which
// completes the move and, the leader being removed, elects a new one).
func TestReassignmentSteps(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1, 2, 3, 4), topicWith(false, ps([]int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0))...)...)
	recs, res := decideAlterReassignments(img, []ReassignTarget{{Topic: "t", Partition: 0, Replicas: []int{4, 2, 3}}})
	require.Empty(t, res[0].Code)
	applyAll(t, img, recs)
	require.Equal(t, []Reassignment{{Topic: "t", Partition: 0, Replicas: []int{4, 2, 3, 1}, AddingReplicas: []int{4}, RemovingReplicas: []int{1}}}, img.Reassignments())
	require.Equal(t, []int{4, 2, 3}, img.Reassignments()[0].Target())

	// An ISR shrink while moving keeps the reassignment.
	p, _ := img.Partition("t", 0)
	recs, err := decideAlterPartition(img, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int{1, 2}})
	require.NoError(t, err)
	require.IsType(t, partitionChangeRecord{}, recs[0])
	applyAll(t, img, recs)
	p, _ = img.Partition("t", 0)
	require.Equal(t, []int{4}, p.AddingReplicas)
	require.Equal(t, []int{1}, p.RemovingReplicas)

	// 4 joins, but 3 is out of the ISR: not complete yet.
	recs, err = decideAlterPartition(img, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int{1, 2, 4}})
	require.NoError(t, err)
	require.IsType(t, partitionChangeRecord{}, recs[0])
	applyAll(t, img, recs)
	p, _ = img.Partition("t", 0)
	require.Equal(t, []int{4, 2, 1}, p.ISR)

	// 3 comes back: every target replica is in sync; the move completes,
	// and leadership leaves 1, which is removed.
	recs, err = decideAlterPartition(img, AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 1, Topic: "t", LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int{1, 2, 3, 4}})
	require.NoError(t, err)
	require.Equal(t, []record{reassignRec([]int{4, 2, 3}, nil, nil, 4, []int{4, 2, 3}, 1, p.PartitionEpoch+1)}, recs)
	applyAll(t, img, recs)
	require.Empty(t, img.Reassignments())

	// No broker holds 1's replica any more: it may be unregistered.
	_, err = decideUnregisterBroker(img, 1)
	require.NoError(t, err)
}

// TestReassignmentWaitsForALiveLeader: a move whose every target replica is
// in the ISR but fenced does not take leadership away to leave the
// partition offline.
func TestReassignmentWaitsForALiveLeader(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1, 2), topicWith(false, ps([]int{1, 2}, []int{1, 2}, 1, 0, 0))...)...)
	applyAll(t, img, []record{fenceBrokerRecord{ID: 2, Epoch: 2}}) // 2 stays in the ISR (only the record, not the decision)
	recs, res := decideAlterReassignments(img, []ReassignTarget{{Topic: "t", Partition: 0, Replicas: []int{2}}})
	require.Empty(t, res[0].Code)
	require.Equal(t, []record{reassignRec([]int{2, 1}, nil, []int{1}, 1, []int{2, 1}, 0, 1)}, recs)
}

func TestApplyRejectsBadReassignRecords(t *testing.T) {
	base := append(liveBrokerRecords(1, 2, 3), topicWith(false, ps([]int{1, 2}, []int{1, 2}, 1, 3, 5))...)
	bad := []record{
		reassignRec([]int{1, 2, 3}, []int{3}, nil, 1, []int{1, 2}, 3, 5),                // epoch not +1
		reassignRec([]int{1, 2, 3}, []int{3}, nil, 2, []int{1, 2}, 3, 6),                // leader changed, epoch not
		reassignRec([]int{1, 2, 3}, []int{4}, nil, 1, []int{1, 2}, 3, 6),                // adding not a replica
		reassignRec([]int{1, 2, 3}, []int{3}, []int{3}, 1, []int{1, 2}, 3, 6),           // both adding and removing
		reassignRec([]int{1, 2}, nil, []int{1, 2}, 1, []int{1, 2}, 3, 6),                // removes everything
		reassignRec([]int{1, 2, 3}, []int{3}, nil, 1, []int{1, 4}, 3, 6),                // isr outside replicas
		reassignRec([]int{1, 1}, nil, nil, 1, []int{1}, 3, 6),                           // duplicate replica
		partitionReassignRecord{TopicID: TopicID{7}, Replicas: []int{1}, ISR: []int{1}}, // unknown topic
	}
	for _, r := range bad {
		img := build(t, base...)
		before := encodeSnapshot(nil, img)
		require.ErrorIs(t, img.apply(r), errInapplicable, "%#v", r)
		require.Equal(t, before, encodeSnapshot(nil, img), "%#v changed the image", r)
	}
}
