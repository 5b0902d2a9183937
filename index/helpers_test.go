package index

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-log/strata/vfs"
)

// noFdFS is vfs.Default with the descriptor hidden: its files do not
// implement vfs.Fder, so the index takes the heap-copy path.
type noFdFS struct{ vfs.FS }

// noFdFile exposes only vfs.File's methods of the file it wraps.
type noFdFile struct{ vfs.File }

func hideFd(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noFdFile{f}, nil
}

func (fs noFdFS) Create(name string) (vfs.File, error) { return hideFd(fs.FS.Create(name)) }
func (fs noFdFS) Open(name string) (vfs.File, error)   { return hideFd(fs.FS.Open(name)) }
func (fs noFdFS) OpenReadWrite(name string) (vfs.File, error) {
	return hideFd(fs.FS.OpenReadWrite(name))
}

type backend struct {
	name   string
	fs     vfs.FS
	mapped bool
}

var backends = []backend{
	{"mmap", vfs.Default, true},
	{"heap", noFdFS{vfs.Default}, false},
}

// forEachBackend runs fn over the OS file system (mmap) and over the
// descriptor-hiding wrapper (heap copy), each with its own temporary dir.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend, dir string)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b, t.TempDir()) })
	}
}

func mustOpenOffset(t testing.TB, b backend, name string, base int64, maxBytes int) *OffsetIndex {
	t.Helper()
	x, err := OpenOffsetIndex(b.fs, name, base, maxBytes)
	if err != nil {
		t.Fatalf("OpenOffsetIndex(%s): %v", name, err)
	}
	if x.m.mapped != b.mapped {
		t.Fatalf("backend %s: mapped = %v", b.name, x.m.mapped)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func mustOpenTime(t testing.TB, b backend, name string, base int64, maxBytes int) *TimeIndex {
	t.Helper()
	x, err := OpenTimeIndex(b.fs, name, base, maxBytes)
	if err != nil {
		t.Fatalf("OpenTimeIndex(%s): %v", name, err)
	}
	if x.m.mapped != b.mapped {
		t.Fatalf("backend %s: mapped = %v", b.name, x.m.mapped)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// crash abandons m as a killed process would: the mapping and the descriptor
// go away, the file is not trimmed, and a heap copy's unflushed bytes are
// lost (for a mapping they stay in the page cache; the tests flush before
// crashing so both paths leave the same file).
func crash(t testing.TB, m *mmapFile) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		t.Fatal("crash of a closed index")
	}
	if m.mapped && m.data != nil {
		if err := unix.Munmap(m.data); err != nil {
			t.Fatal(err)
		}
	}
	m.closed = true
	m.data = nil
	m.entries.Store(0)
	m.capacity.Store(0)
	if err := m.f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func writeFile(t testing.TB, dir, base string, data []byte) string {
	t.Helper()
	name := filepath.Join(dir, base)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// seed returns STRATA_SEED if set, else a fresh seed; it logs it so a failing
// run can be replayed.
func seed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_SEED: %v", err)
		}
		t.Logf("seed %d (from STRATA_SEED)", v)
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with STRATA_SEED=%d)", v, v)
	return v
}

func soak() bool { return os.Getenv("STRATA_SOAK") != "" }
