package main

import (
	"testing"
	"time"
	"unsafe"
)

// TestLiveHeap checks that a variant's live heap is as big as it says, all
// of it reachable from the root, and that it is dropped afterwards.
func TestLiveHeap(t *testing.T) {
	// 64 B objects: Go's 64 B size class holds them without waste, so
	// the heap is nodes × 64 B.
	if sz := unsafe.Sizeof(heapNode{}); sz != 64 {
		t.Fatalf("a node is %d bytes, want 64", sz)
	}
	const size = 4 << 20
	if got, want := heapNodes(newLiveHeap(size)), size/64; got != want {
		t.Errorf("%d nodes reachable from the root, want %d", got, want)
	}

	e := tinyEnv(t, 1)
	var during *heapNode
	v := variant{label: "v", liveHeap: true, systems: []system{{name: "s", baseline: true,
		run: func(*env) (sample, error) {
			during = appHeap
			return sample{Records: 1, Elapsed: time.Millisecond}, nil
		}}}}
	rows := measureVariant(e, "c", v)
	if got, want := heapNodes(during), liveHeapBytes(e)/64; got != want {
		t.Errorf("during the run: %d nodes, want %d", got, want)
	}
	if appHeap != nil {
		t.Error("live heap still kept after the variant")
	}
	if rows[0].Variant != "v, 1 MiB live heap" {
		t.Errorf("label %q does not say the live heap", rows[0].Variant)
	}

	// -liveheap 0: none, and the label says nothing.
	e = &env{mode: modeQuick, runs: 1, root: t.TempDir(), liveHeapMiB: 0}
	during = &heapNode{}
	if rows = measureVariant(e, "c", v); during != nil || rows[0].Variant != "v" {
		t.Errorf("-liveheap 0: heap %v during the run, label %q", during, rows[0].Variant)
	}
}

func TestPercentiles(t *testing.T) {
	ds := make([]time.Duration, 200)
	for i := range ds {
		ds[i] = time.Duration(200-i) * time.Microsecond // 200 µs down to 1 µs
	}
	p50, p99 := percentiles(ds)
	if p50 != 101*time.Microsecond || p99 != 199*time.Microsecond {
		t.Errorf("p50 %v, p99 %v; want 101µs, 199µs", p50, p99)
	}
	if p50, p99 := percentiles(nil); p50 != 0 || p99 != 0 {
		t.Errorf("of nothing: %v, %v", p50, p99)
	}
}
