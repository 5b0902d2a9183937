package index

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// allocatedBytes returns the disk space a file's blocks take.
func allocatedBytes(t *testing.T, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestReserveAllocatesAhead checks that a new index file is sparse and that
// appends allocate its blocks a chunk ahead of the entries.
func TestReserveAllocatesAhead(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a.index")
	x := mustOpenOffset(t, backends[0], name, 0, 10<<20)
	if got := allocatedBytes(t, name); got >= allocChunk {
		t.Fatalf("new 10 MiB index takes %d bytes of disk, want a sparse file", got)
	}
	if err := x.Append(0, 0); err != nil {
		t.Fatal(err)
	}
	if got := allocatedBytes(t, name); got < allocChunk || got >= 1<<20 {
		t.Fatalf("after one append the file takes %d bytes, want the first %d-byte chunk", got, allocChunk)
	}
	for i := int64(1); i <= allocChunk/offsetEntrySize; i++ {
		if err := x.Append(i, i); err != nil {
			t.Fatal(err)
		}
	}
	if got := allocatedBytes(t, name); got < 2*allocChunk || got >= 1<<20 {
		t.Fatalf("after %d appends the file takes %d bytes, want two chunks", x.Entries(), got)
	}
	// A trim and a resize keep what is allocated below the new size.
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if err := x.Resize(10 << 20); err != nil {
		t.Fatal(err)
	}
	if x.m.allocated != x.Entries()*offsetEntrySize {
		t.Fatalf("allocated %d after trim, want %d", x.m.allocated, x.Entries()*offsetEntrySize)
	}
	if err := x.Append(1<<20, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := x.SanityCheck(1<<20 + 1); err != nil {
		t.Fatal(err)
	}
}
