package nozero

import (
	"testing"
	"unsafe"
)

// TestMake: an empty slice with room for n bytes, its own memory
// (two calls never share it), all of it writable (checkptr, under -race,
// checks that the slice stays inside one allocation).
func TestMake(t *testing.T) {
	for _, n := range []int{1, 61, 4096, 1 << 20, 1<<20 + 3} {
		a, b := Make(n), Make(n)
		if len(a) != 0 || cap(a) < n {
			t.Fatalf("n %d: len %d cap %d", n, len(a), cap(a))
		}
		a, b = a[:n], b[:n]
		for i := range a {
			a[i], b[i] = 1, 2
		}
		if unsafe.SliceData(a) == unsafe.SliceData(b) || a[n-1] != 1 || b[0] != 2 {
			t.Fatalf("n %d: the two slices share memory", n)
		}
	}
}
