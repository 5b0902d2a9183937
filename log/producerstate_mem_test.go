package log

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// What a producer costs a partition's state, measured on the heap: a
// producer id that wrote one batch (a flood of made-up ids) about 90 B,
// one with its 5 batches kept about 230 B (before: 133 B and 357 B). And
// however many producer ids write, the state keeps DefaultMaxProducers of
// them.
//
//	go test -run TestProducerStateMemory -v ./log/
func TestProducerStateMemory(t *testing.T) {
	const n = 8000
	measure := func(batches int) float64 {
		before := liveHeap()
		ps := NewProducerState(0)
		off := int64(0)
		for i := range n {
			for j := range batches {
				ps.Update(idemBatch(int64(i)+1000, 0, int32(j), 1, 1), off)
				off++
			}
		}
		per := float64(liveHeap()-before) / n
		require.Equal(t, n, ps.Len())
		runtime.KeepAlive(ps)
		return per
	}
	one, five := measure(1), measure(producerBatchesKept)
	t.Logf("bytes per producer: %.0f with one batch, %.0f with %d", one, five, producerBatchesKept)
	require.Less(t, one, 110.0)
	require.Less(t, five, 260.0)

	// A flood: 3x the bound of made-up producer ids, one batch each.
	before := liveHeap()
	ps := NewProducerState(0)
	for i := range 3 * DefaultMaxProducers {
		ps.Update(idemBatch(int64(i)+1, 0, 0, 1, time.Now().UnixMilli()), int64(i))
	}
	flood := liveHeap() - before
	t.Logf("%d producer ids: %d kept, %d evicted, %d KiB", 3*DefaultMaxProducers, ps.Len(), ps.Evicted(), flood>>10)
	require.LessOrEqual(t, ps.Len(), DefaultMaxProducers)
	require.EqualValues(t, 3*DefaultMaxProducers-ps.Len(), ps.Evicted())
	require.Less(t, float64(flood), 110.0*DefaultMaxProducers)
	runtime.KeepAlive(ps)
}
