// Package nozero allocates byte buffers that the runtime does not clear,
// for buffers written in full before they are read.
package nozero

import (
	"strings"
	"unsafe"
)

// Make returns an empty slice with room for n bytes, in memory the runtime
// did not clear. A producer's batch buffer is written from its start before
// any of it is read, and so is a request frame read from a connection:
// clearing them first is wasted work. For 1 MB batches of 1 KiB records it
// cost a tenth of the CPU of producing and consuming them (the bench
// module's produce case), on the goroutine that calls SendAsync.
//
// strings.Builder.Grow allocates its buffer without clearing it (the
// runtime's MakeNoZero, which bytes.Join and bytes.Repeat use too); the
// slice is made from that buffer's address. Should a Go release clear it,
// this only costs the clearing again.
//
// Until written, the bytes hold whatever the memory last held: a caller
// never lets a slice reach past what it wrote (batch.Builder.Bytes cuts
// the batch's capacity to its length).
func Make(n int) []byte {
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0) // String then has the buffer's address
	return unsafe.Slice(unsafe.StringData(sb.String()), n)[:0]
}
