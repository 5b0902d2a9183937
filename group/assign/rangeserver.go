package assign

import (
	"cmp"
	"slices"
)

// RangeServer is Kafka's server-side RangeAssignor ("range"): for each
// topic, the members subscribed to it, static members first in instance id
// order then the others in member id order, get contiguous ranges of its
// partitions, partitions/members each and one more for the first
// partitions%members of them. It is not sticky: the ranges depend only on
// the members and the topics, so members subscribed to the same topics get
// the same partition numbers of each (co-partitioning).
type RangeServer struct{}

// Name is "range".
func (RangeServer) Name() string { return RangeName }

// Assign implements Assignor.
func (RangeServer) Assign(s Spec) map[string]Partitions {
	members := slices.Clone(s.Members)
	slices.SortFunc(members, func(a, b Member) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			if c := cmp.Compare(a.InstanceID, b.InstanceID); c != 0 {
				return c
			}
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	subs := make([][]string, len(members))
	subscribers := map[string]int{} // topic → members subscribed
	for i, m := range members {
		subs[i] = subscribed(m, s.Topics)
		for _, t := range subs[i] {
			subscribers[t]++
		}
	}
	next := map[string]int{}  // topic → its next unassigned partition
	given := map[string]int{} // topic → members that had their range
	out := make(map[string]Partitions, len(members))
	for i, m := range members {
		a := Partitions{}
		for _, t := range subs[i] {
			n, k := s.Topics[t].Partitions, subscribers[t]
			quota := n / k
			if given[t] < n%k {
				quota++
			}
			given[t]++
			start := next[t]
			end := min(start+quota, n)
			next[t] = end
			for p := start; p < end; p++ {
				a[t] = append(a[t], p)
			}
		}
		out[m.ID] = a
	}
	return out
}
