package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Kafka's ElectLeaders decisions, partition by partition.
func TestDecideElectLeaders(t *testing.T) {
	// Broker 3 fenced. p0 led by its preferred replica; p1 led by 2 with
	// preferred 1 in the ISR; p2 preferred 3 (fenced); p3 preferred 1 out
	// of the ISR; p4 leaderless with live 2 in its ISR; p5 leaderless,
	// only 3 (fenced) in its ISR, 1 a live replica; p6 leaderless on 3 only.
	parts := []PartitionState{
		{Partition: 0, Replicas: []int{1, 2}, ISR: []int{1, 2}, Leader: 1},
		{Partition: 1, Replicas: []int{1, 2}, ISR: []int{1, 2}, Leader: 2},
		{Partition: 2, Replicas: []int{3, 1}, ISR: []int{3, 1}, Leader: 1},
		{Partition: 3, Replicas: []int{1, 2}, ISR: []int{2}, Leader: 2},
		{Partition: 4, Replicas: []int{3, 2}, ISR: []int{3, 2}, Leader: NoLeader},
		{Partition: 5, Replicas: []int{3, 1}, ISR: []int{3}, Leader: NoLeader},
		{Partition: 6, Replicas: []int{3}, ISR: []int{3}, Leader: NoLeader},
	}
	recs := append(liveBrokerRecords(1, 2, 3), topicWith(false, parts...)...)
	recs = append(recs, fenceBrokerRecord{ID: 3, Epoch: 3})
	for _, tc := range []struct {
		typ        ElectionType
		partition  int
		wantLeader int
		wantISR    []int
		wantErr    error
	}{
		{ElectPreferred, 0, 0, nil, ErrElectionNotNeeded},
		{ElectPreferred, 1, 1, []int{1, 2}, nil},
		{ElectPreferred, 2, 0, nil, ErrPreferredLeaderNotAvailable},
		{ElectPreferred, 3, 0, nil, ErrPreferredLeaderNotAvailable},
		{ElectPreferred, 9, 0, nil, ErrUnknownPartition},
		{ElectUnclean, 1, 0, nil, ErrElectionNotNeeded},
		{ElectUnclean, 4, 2, []int{3, 2}, nil}, // clean: a live ISR member
		{ElectUnclean, 5, 1, []int{1}, nil},    // unclean: the ISR reset to the new leader
		{ElectUnclean, 6, 0, nil, ErrEligibleLeadersNotAvailable},
	} {
		img := build(t, recs...)
		v := img.version
		got, res := decideElectLeaders(img, electRequest{Type: tc.typ, Targets: []ElectTarget{{Topic: "t", Partition: tc.partition}}})
		require.Equal(t, v, img.version)
		require.Len(t, res, 1)
		if tc.wantErr != nil {
			require.Empty(t, got, "type %d p%d", tc.typ, tc.partition)
			require.True(t, errors.Is(wireError(res[0].Code), tc.wantErr), "type %d p%d: code %q, want %v", tc.typ, tc.partition, res[0].Code, tc.wantErr)
			continue
		}
		require.Empty(t, res[0].Code, "type %d p%d: %s", tc.typ, tc.partition, res[0].Message)
		require.Equal(t, tc.wantLeader, res[0].Leader)
		require.Len(t, got, 1)
		applyAll(t, img, got)
		st, _ := img.Partition("t", tc.partition)
		require.Equal(t, tc.wantLeader, st.Leader)
		require.Equal(t, tc.wantISR, st.ISR)
		require.Equal(t, parts[tc.partition].LeaderEpoch+1, st.LeaderEpoch)
	}

	// Every partition (nil targets), an unknown topic, a partition named twice.
	img := build(t, recs...)
	got, res := decideElectLeaders(img, electRequest{Type: ElectPreferred})
	require.Len(t, res, len(parts))
	require.Len(t, got, 1) // p1 only
	_, res = decideElectLeaders(img, electRequest{Type: ElectPreferred, Targets: []ElectTarget{{"nope", 0}, {"t", 1}, {"t", 1}}})
	require.Len(t, res, 2)
	require.True(t, errors.Is(wireError(res[0].Code), ErrUnknownTopic))
}
