package kafka

import (
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/internal/nozero"
)

// BatchBorrower is a Backend whose Produce keeps no part of the batch it is
// given once it returns: it has written the batch, or copied it, by then. A
// Server over one reads each large produce request into memory recycled from
// the produce requests it has finished, rather than into a fresh buffer that
// the kernel faults in page by page. *log.Broker and a replica member are
// borrowers; a Backend that keeps the slices it is given (an in-memory store)
// must not claim to be, nor inherit the claim: a type that embeds a borrower
// and keeps batches in a Produce of its own overrides BorrowsBatches too.
type BatchBorrower interface {
	// BorrowsBatches reports whether Produce keeps no part of its batch.
	BorrowsBatches() bool
}

// framePool recycles the frames of produce requests (framePool.put, once
// their handler has returned) for the next large frames a Server reads.
// Buffers come in power-of-two classes from frameRecycleMin to
// eagerFrameBytes; sync.Pool lets the GC take back what stays unused.
type framePool struct {
	classes [frameClasses]sync.Pool
	reused  atomic.Int64 // frames read into a recycled buffer (for tests)
	poison  bool         // put overwrites a buffer first (for tests)
}

const (
	frameRecycleMin = 64 << 10
	frameClasses    = 5 // 64 KiB … eagerFrameBytes (1 MiB)
)

// frameClass returns the class of a frame of n bytes, frameRecycleMin ≤ n ≤
// eagerFrameBytes: the smallest whose buffers hold it.
func frameClass(n int) int {
	k := 0
	for frameRecycleMin<<k < n {
		k++
	}
	return k
}

// get returns a buffer of length n, recycled if one of its class is free.
func (fp *framePool) get(n int) []byte {
	k := frameClass(n)
	if v := fp.classes[k].Get(); v != nil {
		fp.reused.Add(1)
		return (*v.(*[]byte))[:n]
	}
	return nozero.Make(frameRecycleMin << k)[:n] // readFrame writes all n bytes, or drops them
}

// put gives back a frame that get returned and that nothing refers to any
// more. Frames of other capacities (not get's) are left to the GC.
func (fp *framePool) put(b []byte) {
	c := cap(b)
	if c < frameRecycleMin || c > frameRecycleMin<<(frameClasses-1) || c&(c-1) != 0 {
		return
	}
	if fp.poison {
		b = b[:c]
		for i := range b {
			b[i] = 0xa5
		}
	}
	// A new slice header for the pool: taking &b would move the parameter
	// to the heap on every call, the early returns included.
	bp := new([]byte)
	*bp = b[:0]
	fp.classes[frameClass(c)].Put(bp)
}
