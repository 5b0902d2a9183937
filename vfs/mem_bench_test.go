package vfs

import (
	"fmt"
	"runtime"
	"testing"
)

// benchFile returns a MemFS file of size synced bytes, its offset at the end.
func benchFile(b *testing.B, size int) File {
	b.Helper()
	m := NewMem()
	f, err := m.Create("/f")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(make([]byte, size)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkMemAppendSync appends 4 KiB and syncs, to files of growing size:
// the cost must not grow with the file (Sync is O(bytes since the last one)).
func BenchmarkMemAppendSync(b *testing.B) {
	for _, size := range []int{0, 1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("file=%dMiB", size>>20), func(b *testing.B) {
			f := benchFile(b, size)
			rec := make([]byte, 4096)
			const reset = 32 << 20 // keep memory bounded on long runs
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			written := 0
			for b.Loop() {
				if _, err := f.Write(rec); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if written += len(rec); written >= reset {
					b.StopTimer()
					if err := f.Truncate(int64(size)); err != nil {
						b.Fatal(err)
					}
					f.Sync()
					f.(*memHandle).off = int64(size)
					written = 0
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkMemAppend appends records of several sizes without syncing.
func BenchmarkMemAppend(b *testing.B) {
	for _, n := range []int{100, 4096, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("record=%d", n), func(b *testing.B) {
			f := benchFile(b, 0)
			rec := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			written := 0
			for b.Loop() {
				if _, err := f.Write(rec); err != nil {
					b.Fatal(err)
				}
				if written += n; written >= 64<<20 {
					b.StopTimer()
					f.Truncate(0)
					f.(*memHandle).off = 0
					written = 0
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkMemOverwriteSync overwrites 12 bytes inside a synced 10 MiB file
// and syncs, the pattern of an index entry written in place.
func BenchmarkMemOverwriteSync(b *testing.B) {
	f := benchFile(b, 10<<20)
	entry := make([]byte, 12)
	b.SetBytes(int64(len(entry)))
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if _, err := f.WriteAt(entry, off); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		off = (off + 12) % (10 << 20)
	}
}

// BenchmarkMemReadAt reads 4 KiB at scattered offsets of a 64 MiB file.
func BenchmarkMemReadAt(b *testing.B) {
	const size = 64 << 20
	f := benchFile(b, size)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if _, err := f.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
		off = (off + 7*4096 + 13) % (size - 4096)
	}
}

// TestMemAppendSyncCost checks, by bytes allocated rather than by time, that
// appending and syncing costs O(bytes appended), not O(file size): 256
// appends of 4 KiB to a 16 MiB file may allocate their own bytes and some
// bookkeeping, not a copy of the file.
func TestMemAppendSyncCost(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 16<<20)); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	rec := make([]byte, 4096)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 256 {
		if _, err := f.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*256*4096 {
		t.Fatalf("256 appends of 4 KiB allocated %d bytes", alloc)
	}
}

// BenchmarkMemWriteFileAtomic replaces a small file in a directory of a
// dozen entries, as a broker rewrites a checkpoint: create, write, sync,
// rename and sync the directory, each resolving its path.
func BenchmarkMemWriteFileAtomic(b *testing.B) {
	m := NewMem()
	dir := "/data/strata"
	if err := m.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 12 {
		mustCreateB(b, m, fmt.Sprintf("%s/orders-%d", dir, i))
	}
	data := []byte("0\n1\norders 0 1042\n")
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteFileAtomic(m, dir+"/recovery-point-offset-checkpoint", data); err != nil {
			b.Fatal(err)
		}
	}
}

func mustCreateB(b *testing.B, fsys FS, name string) {
	b.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
