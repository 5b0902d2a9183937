package replica_test

import (
	"testing"
	"time"

	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/replicatest"
)

// BenchmarkLeaderFetch is the leader's hot path: an append, then each of
// two followers fetching up to it, moving the HW and completing a produce.
func BenchmarkLeaderFetch(b *testing.B) {
	cache := &replicatest.Epochs{}
	m := replica.NewPartitionMachine(1, cache, replica.PartitionConfig{})
	now := t0
	out := m.Step(now, replica.Metadata{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int{1, 2, 3}, ISR: []int{1, 2, 3}, MinInSyncReplicas: 2}, nil)
	cache.Assign(1, 0)
	b.ReportAllocs()
	end := int64(0)
	for i := range b.N {
		now = now.Add(time.Millisecond)
		end += 10
		cache.End = end
		out = m.Step(now, replica.Appended{LogEnd: end}, out[:0])
		out = m.Step(now, replica.AwaitProduce{Token: uint64(i), Required: end}, out[:0])
		out = m.Step(now, replica.FollowerFetch{Replica: 2, LeaderEpoch: 1, FetchOffset: end, LastFetchedEpoch: 1}, out[:0])
		out = m.Step(now, replica.FollowerFetch{Replica: 3, LeaderEpoch: 1, FetchOffset: end, LastFetchedEpoch: 1}, out[:0])
		if m.HW() != end {
			b.Fatalf("HW %d, want %d", m.HW(), end)
		}
	}
}
