package main

import "unsafe"

// appHeap is the live heap of an application that has a Kafka client and
// a server (or a test fixture) in one process: a test binary or an
// embedding program has its own data, and the garbage collector marks it
// on every cycle that the client's and the server's garbage starts. A
// variant with liveHeap set keeps one of liveHeapBytes reachable here
// while its systems run.
var appHeap *heapNode

// heapNode is one small object of the live heap: 64 bytes, half of them
// pointers, so that marking it is real work (a heap of pointer-free
// buffers would be skipped by the GC).
type heapNode struct {
	kids [4]*heapNode
	vals [4]uint64
}

// liveHeapBytes is the live heap's size: -liveheap MiB (default 64; the
// smoke tests keep it at 1 MiB).
func liveHeapBytes(e *env) int {
	if e.mode == modeTiny {
		return 1 << 20
	}
	return e.liveHeapMiB << 20
}

// newLiveHeap allocates a tree of about size bytes of heapNodes, each
// allocated on its own, each node pointing at up to four others (a tree
// with fan-out 4, so that the GC's workers can mark it in parallel), and
// returns its root.
func newLiveHeap(size int) *heapNode {
	n := max(size/int(unsafe.Sizeof(heapNode{})), 1)
	nodes := make([]*heapNode, n)
	for i := range nodes {
		nodes[i] = &heapNode{vals: [4]uint64{uint64(i)}}
	}
	for i, nd := range nodes {
		for k := range nd.kids {
			if c := 4*i + k + 1; c < n {
				nd.kids[k] = nodes[c]
			}
		}
	}
	return nodes[0]
}

// heapNodes counts the nodes reachable from root.
func heapNodes(root *heapNode) int {
	if root == nil {
		return 0
	}
	n := 1
	for _, k := range root.kids {
		n += heapNodes(k)
	}
	return n
}
