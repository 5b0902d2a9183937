package replica_test

import (
	"testing"
	"time"

	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/machine/machinetest"
)

// BenchmarkLeaderFetch is the leader's hot path: an append, then each of
// two followers fetching up to it, moving the HW and completing a produce.
func BenchmarkLeaderFetch(b *testing.B) {
	cache := &machinetest.Epochs{}
	m := machine.NewPartitionMachine(1, cache, machine.PartitionConfig{})
	now := t0
	out := m.Step(now, machine.Metadata{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int{1, 2, 3}, ISR: []int{1, 2, 3}, MinInSyncReplicas: 2}, nil)
	cache.Assign(1, 0)
	b.ReportAllocs()
	end := int64(0)
	for i := range b.N {
		now = now.Add(time.Millisecond)
		end += 10
		cache.End = end
		out = m.Step(now, machine.Appended{LogEnd: end}, out[:0])
		out = m.Step(now, machine.AwaitProduce{Token: uint64(i), Required: end}, out[:0])
		out = m.Step(now, machine.FollowerFetch{Replica: 2, LeaderEpoch: 1, FetchOffset: end, LastFetchedEpoch: 1}, out[:0])
		out = m.Step(now, machine.FollowerFetch{Replica: 3, LeaderEpoch: 1, FetchOffset: end, LastFetchedEpoch: 1}, out[:0])
		if m.HW() != end {
			b.Fatalf("HW %d, want %d", m.HW(), end)
		}
	}
}
