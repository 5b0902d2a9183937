package assign

import (
	"maps"
	"slices"

	"github.com/strata-log/strata/tp"
)

// Range is Kafka's RangeAssignor. For each topic, the members
// subscribed to it are sorted by member id and its partitions are split
// into contiguous ranges in that order: each member gets
// partitions/members of them and the first partitions%members members one
// more. Topics are assigned independently of one another, so with several
// topics the members that sort first get the extra partition of every one.
//
// subs maps a member id to its subscription; partitions maps a topic to its
// partition count (a topic missing or with a count ≤ 0 is assigned to no
// one). Every member of subs is in the result, with its partitions sorted
// by topic, then partition; a member with none has an empty slice.
func Range(subs map[string][]string, partitions map[string]int) map[string][]tp.TopicPartition {
	out := make(map[string][]tp.TopicPartition, len(subs))
	byTopic := make(map[string][]string)
	for id, topics := range subs {
		out[id] = []tp.TopicPartition{}
		for _, t := range topics {
			byTopic[t] = append(byTopic[t], id)
		}
	}
	// Topics in order, each member's partitions ascending within a topic:
	// every member's list comes out sorted.
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		members := byTopic[topic]
		n := partitions[topic]
		if n <= 0 {
			continue
		}
		slices.Sort(members)
		members = slices.Compact(members) // a topic listed twice by one member counts once
		per, extra := n/len(members), n%len(members)
		for i, id := range members {
			start := per*i + min(i, extra)
			length := per
			if i < extra {
				length++
			}
			for p := start; p < start+length; p++ {
				out[id] = append(out[id], tp.TopicPartition{Topic: topic, Partition: p})
			}
		}
	}
	return out
}
