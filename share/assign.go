package share

import (
	"maps"
	"slices"
)

// assignSimple is the assignor of share groups (Kafka's "simple"), a
// decision without state: every partition of a subscribed topic goes to
// at least one of the members subscribing to it. While the topic has at
// least as many partitions as subscribers, each partition goes to one
// member, spread evenly (partition i to the i-th subscriber modulo their
// number, in member id order); with more subscribers than partitions,
// each member gets one partition, and the partitions are shared (the i-th
// subscriber gets partition i modulo the partitions). A share group needs
// no revocation: two members may fetch from one partition at once, each
// record going to one of them.
//
// subs are the members' subscribed topics; partitions gives a topic's
// partition count (0: the topic does not exist, nothing of it is
// assigned). The result has an entry, maybe empty, for every member.
func assignSimple(subs map[string][]string, partitions func(topic string) int) map[string]Assignment {
	out := make(map[string]Assignment, len(subs))
	byTopic := map[string][]string{}
	for _, m := range slices.Sorted(maps.Keys(subs)) {
		out[m] = Assignment{}
		for _, t := range subs[m] {
			byTopic[t] = append(byTopic[t], m)
		}
	}
	for t, members := range byTopic {
		n := partitions(t)
		if n <= 0 {
			continue
		}
		if len(members) <= n {
			for p := range n {
				m := members[p%len(members)]
				out[m][t] = append(out[m][t], p)
			}
			continue
		}
		for i, m := range members {
			out[m][t] = append(out[m][t], i%n)
		}
	}
	return out
}

// Assignment is a member's partitions, by topic, sorted.
type Assignment map[string][]int
