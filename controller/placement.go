package controller

// Rand is the randomness the decisions use: the start of a new topic's
// replica assignment and new topic IDs. *math/rand/v2.Rand satisfies it.
type Rand interface {
	IntN(n int) int
	Uint64() uint64
}

// assignReplicas is Kafka's rack-unaware replica assignment
// (AdminUtils.assignReplicasToBrokersRackUnaware):
//
//   - brokers are sorted by ID;
//   - the first replica of partition p is brokers[(p + startIndex) % n]: the
//     leaders go round-robin from a start index;
//   - the j-th further replica (j = 0, 1, ...) is at
//     (first + 1 + (shift + j) % (n-1)) % n: the followers sit at an offset
//     from the leader that never wraps onto it;
//   - shift grows by one each time p reaches a multiple of n, so the next
//     round of leaders gets a different set of followers.
//
// With fixedStartIndex < 0 both startIndex and the initial shift are drawn
// from rnd (a new topic); otherwise both are fixedStartIndex (adding
// partitions, which continues an existing topic's pattern). Partition
// numbers start at startPartition. The caller ensures 1 <= rf <= len(brokers).
func assignReplicas(brokers []int, nPartitions, rf, fixedStartIndex, startPartition int, rnd Rand) [][]int {
	n := len(brokers)
	startIndex, shift := fixedStartIndex, fixedStartIndex
	if fixedStartIndex < 0 {
		startIndex = rnd.IntN(n)
		shift = rnd.IntN(n)
	}
	out := make([][]int, 0, nPartitions)
	for p := max(0, startPartition); len(out) < nPartitions; p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		replicas := make([]int, 0, rf)
		replicas = append(replicas, brokers[first])
		for j := 0; j < rf-1; j++ {
			replicas = append(replicas, brokers[(first+1+(shift+j)%(n-1))%n])
		}
		out = append(out, replicas)
	}
	return out
}
