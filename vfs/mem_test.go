package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The tests in this file run against both the operating system and MemFS:
// wherever MemFS claims to behave like the OS, the two must agree.

// eachFS runs test against Default in a temporary directory and against a
// fresh MemFS in a directory made by MkdirAll.
func eachFS(t *testing.T, test func(t *testing.T, fsys FS, dir string)) {
	t.Helper()
	t.Run("os", func(t *testing.T) { test(t, Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := NewMem()
		dir := filepath.Join(string(filepath.Separator), "data", "test")
		if err := m.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		test(t, m, dir)
	})
}

func mustCreate(t *testing.T, fsys FS, name string, data string) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, fsys FS, name string) string {
	t.Helper()
	b, err := ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMissing(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		missing := filepath.Join(dir, "missing")
		_, err := fsys.Open(missing)
		checkNotExist(t, "Open", err)
		_, err = fsys.Stat(missing)
		checkNotExist(t, "Stat", err)
		_, err = fsys.ReadDir(missing)
		checkNotExist(t, "ReadDir", err)
		checkNotExist(t, "Remove", fsys.Remove(missing))
		checkNotExist(t, "Rename", fsys.Rename(missing, filepath.Join(dir, "x")))
		checkNotExist(t, "SyncDir", fsys.SyncDir(missing))
		_, err = fsys.Create(filepath.Join(missing, "f"))
		checkNotExist(t, "Create in missing dir", err)
		_, err = fsys.OpenReadWrite(filepath.Join(missing, "f"))
		checkNotExist(t, "OpenReadWrite in missing dir", err)
		if err := fsys.RemoveAll(missing); err != nil {
			t.Errorf("RemoveAll of a missing path: %v, want nil", err)
		}
	})
}

func checkNotExist(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: err = %v, want fs.ErrNotExist", what, err)
	}
}

func TestReadWriteOffsets(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, s := range []string{"hello", " ", "world"} {
			if n, err := f.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
		// The shared offset is at the end: Read sees EOF.
		if n, err := f.Read(make([]byte, 4)); n != 0 || err != io.EOF {
			t.Fatalf("Read at end = %d, %v; want 0, EOF", n, err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != 11 || fi.Name() != "f" || fi.IsDir() {
			t.Fatalf("Stat = %v, %v", fi, err)
		}

		// A second handle reads from its own offset 0, in pieces.
		r, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		buf := make([]byte, 4)
		var got []byte
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != "hello world" {
			t.Fatalf("read %q", got)
		}

		// OpenReadWrite starts at 0, does not truncate; Read and Write share the offset.
		rw, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Close()
		if n, err := rw.Read(buf[:3]); n != 3 || err != nil || string(buf[:3]) != "hel" {
			t.Fatalf("Read = %d, %v, %q", n, err, buf[:3])
		}
		if _, err := rw.Write([]byte("LO")); err != nil {
			t.Fatal(err)
		}
		if n, err := rw.Read(buf[:1]); n != 1 || err != nil || buf[0] != ' ' {
			t.Fatalf("Read after Write = %d, %v, %q", n, err, buf[:1])
		}
		// WriteAt does not move the offset.
		if _, err := rw.WriteAt([]byte("W"), 6); err != nil {
			t.Fatal(err)
		}
		if n, err := rw.Read(buf[:1]); n != 1 || err != nil || buf[0] != 'W' {
			t.Fatalf("Read after WriteAt = %d, %v, %q", n, err, buf[:1])
		}
		if got := mustRead(t, fsys, name); got != "helLO World" {
			t.Fatalf("contents %q", got)
		}
	})
}

func TestReadAt(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		mustCreate(t, fsys, name, "0123456789")
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, tc := range []struct {
			off     int64
			n       int
			want    string
			wantEOF bool
		}{
			{0, 10, "0123456789", false},
			{2, 3, "234", false},
			{8, 4, "89", true},
			{10, 1, "", true},
			{20, 1, "", true},
			{5, 0, "", false},
		} {
			buf := make([]byte, tc.n)
			n, err := f.ReadAt(buf, tc.off)
			if string(buf[:n]) != tc.want || (err == io.EOF) != tc.wantEOF || (err != nil && err != io.EOF) {
				t.Errorf("ReadAt(%d bytes, %d) = %q, %v; want %q, EOF=%v", tc.n, tc.off, buf[:n], err, tc.want, tc.wantEOF)
			}
		}
		if _, err := f.ReadAt(make([]byte, 1), -1); err == nil {
			t.Error("ReadAt at a negative offset succeeded")
		}
	})
}

func TestTruncateAndHoles(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write([]byte("abcdef")); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			do   func() error
			want string
		}{
			{func() error { return f.Truncate(3) }, "abc"},
			{func() error { return f.Truncate(6) }, "abc\x00\x00\x00"},
			{func() error { _, err := f.WriteAt([]byte("Z"), 8); return err }, "abc\x00\x00\x00\x00\x00Z"},
			{func() error { return f.Truncate(0) }, ""},
			// The offset is still 6: Write leaves a hole.
			{func() error { _, err := f.Write([]byte("x")); return err }, "\x00\x00\x00\x00\x00\x00x"},
		}
		for i, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got := mustRead(t, fsys, name); got != s.want {
				t.Fatalf("step %d: contents %q, want %q", i, got, s.want)
			}
			fi, err := fsys.Stat(name)
			if err != nil || fi.Size() != int64(len(s.want)) {
				t.Fatalf("step %d: Stat = %v, %v", i, fi, err)
			}
		}
		if err := f.Truncate(-1); err == nil {
			t.Error("Truncate(-1) succeeded")
		}
	})
}

func TestCreateTruncatesExisting(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		mustCreate(t, fsys, name, "old contents")
		mustCreate(t, fsys, name, "new")
		if got := mustRead(t, fsys, name); got != "new" {
			t.Fatalf("contents %q", got)
		}
	})
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		mustCreate(t, fsys, name, "abc")
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write([]byte("x")); err == nil {
			t.Error("Write on a read-only file succeeded")
		}
		if _, err := f.WriteAt([]byte("x"), 0); err == nil {
			t.Error("WriteAt on a read-only file succeeded")
		}
		if err := f.Truncate(0); err == nil {
			t.Error("Truncate on a read-only file succeeded")
		}
		if got := mustRead(t, fsys, name); got != "abc" {
			t.Fatalf("contents %q", got)
		}
	})
}

func TestClosedFile(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		errs := map[string]error{"Close": f.Close(), "Sync": f.Sync(), "Truncate": f.Truncate(0)}
		_, errs["Read"] = f.Read(make([]byte, 1))
		_, errs["ReadAt"] = f.ReadAt(make([]byte, 1), 0)
		_, errs["Write"] = f.Write([]byte("x"))
		_, errs["WriteAt"] = f.WriteAt([]byte("x"), 0)
		_, errs["Stat"] = f.Stat()
		for op, err := range errs {
			if !errors.Is(err, os.ErrClosed) {
				t.Errorf("%s after Close: %v, want os.ErrClosed", op, err)
			}
		}
	})
}

func TestRename(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		mustCreate(t, fsys, a, "A")
		mustCreate(t, fsys, b, "B")
		if err := fsys.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, b); got != "A" {
			t.Fatalf("b = %q after rename over it", got)
		}
		if _, err := fsys.Stat(a); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a still there: %v", err)
		}
		// Into a subdirectory, and a directory with its contents.
		sub := filepath.Join(dir, "sub")
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(b, filepath.Join(sub, "c")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(sub, filepath.Join(dir, "sub2")); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, filepath.Join(dir, "sub2", "c")); got != "A" {
			t.Fatalf("moved file = %q", got)
		}
		// A file cannot replace a directory; a directory cannot move into itself.
		mustCreate(t, fsys, a, "A")
		if err := fsys.Rename(a, filepath.Join(dir, "sub2")); err == nil {
			t.Error("renaming a file over a directory succeeded")
		}
		if err := fsys.Rename(filepath.Join(dir, "sub2"), filepath.Join(dir, "sub2", "x")); err == nil {
			t.Error("renaming a directory into itself succeeded")
		}
		// An open handle follows the file.
		f, err := fsys.OpenReadWrite(a)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := fsys.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("Z"), 0); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, b); got != "Z" {
			t.Fatalf("b = %q after write through handle", got)
		}
	})
}

func TestDirectories(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		for _, n := range []string{"c", "a", "b10", "b2"} {
			mustCreate(t, fsys, filepath.Join(dir, n), n)
		}
		sub := filepath.Join(dir, "d", "e")
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatalf("MkdirAll of an existing directory: %v", err)
		}
		mustCreate(t, fsys, filepath.Join(sub, "f"), "f")
		names, err := fsys.ReadDir(dir)
		if want := []string{"a", "b10", "b2", "c", "d"}; err != nil || !slices.Equal(names, want) {
			t.Fatalf("ReadDir = %q, %v; want %q", names, err, want)
		}
		fi, err := fsys.Stat(filepath.Join(dir, "d"))
		if err != nil || !fi.IsDir() || fi.Name() != "d" || !fi.Mode().IsDir() {
			t.Fatalf("Stat(d) = %v, %v", fi, err)
		}
		if err := fsys.MkdirAll(filepath.Join(dir, "a", "x"), 0o755); err == nil {
			t.Error("MkdirAll through a file succeeded")
		}
		if _, err := fsys.ReadDir(filepath.Join(dir, "a")); err == nil {
			t.Error("ReadDir of a file succeeded")
		}
		if err := fsys.Remove(filepath.Join(dir, "d")); err == nil {
			t.Error("Remove of a non-empty directory succeeded")
		}
		if err := fsys.Remove(filepath.Join(sub, "f")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(sub); err != nil {
			t.Fatalf("Remove of an empty directory: %v", err)
		}
		mustCreate(t, fsys, filepath.Join(dir, "d", "g"), "g")
		if err := fsys.RemoveAll(filepath.Join(dir, "d")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(filepath.Join(dir, "a")); err != nil {
			t.Fatal(err)
		}
		names, err = fsys.ReadDir(dir)
		if want := []string{"b10", "b2", "c"}; err != nil || !slices.Equal(names, want) {
			t.Fatalf("ReadDir = %q, %v; want %q", names, err, want)
		}
		if _, err := fsys.Create(dir); err == nil {
			t.Error("Create of a directory succeeded")
		}
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLock(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "LOCK")
		l, err := fsys.Lock(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Lock(name); !errors.Is(err, ErrLocked) {
			t.Fatalf("second Lock: %v, want ErrLocked", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, err := fsys.Lock(name)
		if err != nil {
			t.Fatalf("Lock after Close: %v", err)
		}
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Lock(filepath.Join(dir, "missing", "LOCK")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Lock in a missing directory: %v", err)
		}
	})
}

func TestWriteFileAtomic(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "checkpoint")
		for _, s := range []string{"one", "two, longer", "3"} {
			if err := WriteFileAtomic(fsys, name, []byte(s)); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, fsys, name); got != s {
				t.Fatalf("contents %q, want %q", got, s)
			}
		}
		names, err := fsys.ReadDir(dir)
		if err != nil || !slices.Equal(names, []string{"checkpoint"}) {
			t.Fatalf("ReadDir = %q, %v", names, err)
		}
	})
}

func TestMemPaths(t *testing.T) {
	m := NewMem()
	mustCreate(t, m, "/a", "x")
	for _, name := range []string{"a", "/a", "/./a", "/b/../a", "//a"} {
		if got := mustRead(t, m, name); got != "x" {
			t.Errorf("%q: %q", name, got)
		}
	}
	names, err := m.ReadDir("/")
	if err != nil || !slices.Equal(names, []string{"a"}) {
		t.Fatalf("ReadDir(/) = %q, %v", names, err)
	}
	if err := m.Remove("/"); err == nil {
		t.Error("Remove of the root succeeded")
	}
}

// TestMemRelPath: the fast path of relPath (a clean path, used as it is)
// agrees with cleaning every path.
func TestMemRelPath(t *testing.T) {
	for _, name := range []string{
		"", "/", "//", "a", "/a", "a/", "/a/b", "a//b", "/a/./b", "/a/../b", "/../a",
		"./a", "a/.", "a/..", "/a/b/", "...", "/a/.b/..c", "a/b/c/d",
	} {
		want := strings.TrimLeft(filepath.Clean("/"+name), "/")
		if got := relPath(name); got != want {
			t.Errorf("relPath(%q) = %q, want %q", name, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { relPath("/data/t-0/00000000000000000000.log") }); n != 0 {
		t.Errorf("relPath of a clean path allocates %v times", n)
	}
}

func TestMemOpenDirectory(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := m.Open("/d")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Read(make([]byte, 1)); err == nil {
		t.Error("Read of a directory succeeded")
	}
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		t.Fatalf("Stat = %v, %v", fi, err)
	}
	// Syncing an open directory is SyncDir.
	mustCreate(t, m, "/d/f", "f")
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if _, err := m.Stat("/d/f"); err != nil {
		t.Fatalf("entry synced through the directory handle lost: %v", err)
	}
}

// TestMemTruncateLeavesHole: bytes that Truncate adds take no memory until
// written, and read as zeros.
func TestMemTruncateLeavesHole(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/idx")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	mf := f.(*memHandle).node.file
	if mf.filled != 0 || mf.size != 1<<20 {
		t.Fatalf("after Truncate: %d bytes filled of %d", mf.filled, mf.size)
	}
	if _, err := f.WriteAt([]byte("abcd"), 8); err != nil {
		t.Fatal(err)
	}
	if mf.filled != 12 {
		t.Fatalf("after a write at 8: %d bytes filled", mf.filled)
	}
	got := make([]byte, 16)
	if _, err := f.ReadAt(got, 1<<20-8); err != io.EOF {
		t.Fatalf("ReadAt across the end: %v", err)
	}
	if _, err := f.ReadAt(got, 4); err != nil || string(got) != "\x00\x00\x00\x00abcd\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("ReadAt = %q, %v", got, err)
	}
}

// TestNameTooLong: a name of more than 255 bytes is ENAMETOOLONG wherever
// it is used, and 255 bytes are fine.
func TestNameTooLong(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		long := filepath.Join(dir, strings.Repeat("x", 256))
		most := filepath.Join(dir, strings.Repeat("y", 255))
		mustCreate(t, fsys, most, "Y")
		for name, err := range map[string]error{
			"create": func() error { _, err := fsys.Create(long); return err }(),
			"mkdir":  fsys.MkdirAll(filepath.Join(long, "sub"), 0o755),
			"stat":   func() error { _, err := fsys.Stat(long); return err }(),
			"rename": fsys.Rename(most, long),
			"remove": fsys.RemoveAll(long),
		} {
			if !errors.Is(err, syscall.ENAMETOOLONG) {
				t.Errorf("%s of a 256-byte name: %v, want ENAMETOOLONG", name, err)
			}
		}
		if got := mustRead(t, fsys, most); got != "Y" {
			t.Fatalf("255-byte name reads %q", got)
		}
	})
}
