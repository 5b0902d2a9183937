package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDecidePreferredLeaders(t *testing.T) {
	// n partitions with replicas [1 2 3], ISR all, the first `moved` led by 2.
	preferredBy1 := func(n, moved int) []PartitionState {
		var out []PartitionState
		for i := range n {
			leader := 1
			if i < moved {
				leader = 2
			}
			out = append(out, ps([]int{1, 2, 3}, []int{1, 2, 3}, leader, 4, 7))
		}
		return out
	}
	moveTo := func(p int, leader int, isr ...int) partitionChangeRecord {
		return partitionChangeRecord{TopicID: tid, Partition: p, Leader: leader, ISR: isr, LeaderEpoch: 5, PartitionEpoch: 8}
	}
	cases := []struct {
		name  string
		live  []int // registered and unfenced; 1..3 registered in any case
		parts []PartitionState
		pct   int
		want  []record
	}{
		{name: "balanced", parts: preferredBy1(10, 0), pct: 10},
		{name: "10% is not above 10%", parts: preferredBy1(10, 1), pct: 10},
		{name: "20% moves every one back", parts: preferredBy1(10, 2), pct: 10,
			want: []record{moveTo(0, 1, 1, 2, 3), moveTo(1, 1, 1, 2, 3)}},
		{name: "any imbalance at 0%", parts: preferredBy1(10, 1), pct: 0,
			want: []record{moveTo(0, 1, 1, 2, 3)}},
		{name: "all moved away at 100% stays", parts: preferredBy1(3, 3), pct: 100},
		{name: "preferred not in ISR stays, counts toward the ratio",
			parts: []PartitionState{
				ps([]int{1, 2}, []int{2}, 2, 4, 7),
				ps([]int{1, 3}, []int{1, 3}, 3, 4, 7),
				ps([]int{1, 2}, []int{1, 2}, 1, 4, 7),
			}, pct: 10,
			want: []record{moveTo(1, 1, 1, 3)}},
		{name: "fenced preferred stays", live: []int{2, 3}, parts: preferredBy1(4, 4), pct: 10},
		{name: "each broker on its own ratio",
			parts: []PartitionState{
				ps([]int{1, 2}, []int{1, 2}, 2, 4, 7), // 1: 1 of 1 away
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7), // 2: 1 of 11 away (9%)
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 2, 4, 7),
				ps([]int{2, 1}, []int{1, 2}, 1, 4, 7),
			}, pct: 10,
			want: []record{moveTo(0, 1, 1, 2)}},
		{name: "leaderless partition gets its preferred replica",
			parts: []PartitionState{ps([]int{3, 1}, []int{3}, NoLeader, 4, 7)}, pct: 10,
			want: []record{moveTo(0, 3, 3)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := tc.live
			if live == nil {
				live = []int{1, 2, 3}
			}
			recs := liveBrokerRecords(1, 2, 3)
			img := build(t, append(recs, topicWith(false, tc.parts...)...)...)
			for _, id := range []int{1, 2, 3} {
				if !contains(live, id) {
					applyAll(t, img, []record{fenceBrokerRecord{ID: id, Epoch: img.brokers[id].Epoch}})
				}
			}
			before := encodeSnapshot(nil, img)
			got := decidePreferredLeaders(img, tc.pct)
			require.Equal(t, tc.want, got)
			require.Equal(t, before, encodeSnapshot(nil, img), "the decision changed its image")
			applyAll(t, img, got) // every change applies
		})
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
