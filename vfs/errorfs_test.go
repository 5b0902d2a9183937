package vfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// recorder is an injector that records the operations it is asked about and
// fails those listed in fail.
type recorder struct {
	mu   sync.Mutex
	ops  []string
	fail map[Op]bool
}

func (r *recorder) inject(op Op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op.String()+" "+filepath.Base(path))
	if r.fail[op] {
		return ErrInjected
	}
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

func TestWithErrorsConsultsEveryOp(t *testing.T) {
	eachFS(t, func(t *testing.T, base FS, dir string) {
		rec := &recorder{}
		fsys := WithErrors(base, rec.inject)
		p := func(n string) string { return filepath.Join(dir, n) }
		f, err := fsys.Create(p("f"))
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("abc"))
		f.WriteAt([]byte("d"), 3)
		f.Read(make([]byte, 1))
		f.ReadAt(make([]byte, 1), 0)
		f.Sync()
		f.Truncate(2)
		f.Stat()
		f.Close()
		g, _ := fsys.Open(p("f"))
		g.Close()
		g, _ = fsys.OpenReadWrite(p("f"))
		g.Close()
		fsys.Stat(p("f"))
		fsys.MkdirAll(p("d"), 0o755)
		fsys.ReadDir(dir)
		fsys.SyncDir(dir)
		fsys.Rename(p("f"), p("g"))
		fsys.Remove(p("g"))
		fsys.RemoveAll(p("d"))
		l, _ := fsys.Lock(p("LOCK"))
		l.Close()
		want := []string{
			"create f", "write f", "write f", "read f", "read f", "sync f", "truncate f", "stat f", "close f",
			"open f", "close f", "open f", "close f", "stat f", "mkdir d", "readdir " + filepath.Base(dir),
			"syncdir " + filepath.Base(dir), "rename f", "remove g", "remove d", "lock LOCK", "close LOCK",
		}
		if got := rec.take(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("ops\n got %q\nwant %q", got, want)
		}
	})
}

func TestWithErrorsFailsWithoutDoing(t *testing.T) {
	eachFS(t, func(t *testing.T, base FS, dir string) {
		rec := &recorder{fail: map[Op]bool{}}
		fsys := WithErrors(base, rec.inject)
		name := filepath.Join(dir, "f")
		mustCreate(t, fsys, name, "abc")

		failing := func(op Op) { rec.fail = map[Op]bool{op: true} }
		check := func(what string, err error, op Op) {
			t.Helper()
			var pe *fs.PathError
			if !errors.Is(err, ErrInjected) || !errors.As(err, &pe) || pe.Op != op.String() {
				t.Errorf("%s: %v, want an injected %s error", what, err, op)
			}
		}
		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		failing(OpWrite)
		_, err = f.Write([]byte("x"))
		check("Write", err, OpWrite)
		_, err = f.WriteAt([]byte("x"), 0)
		check("WriteAt", err, OpWrite)
		failing(OpTruncate)
		check("Truncate", f.Truncate(0), OpTruncate)
		failing(OpRead)
		_, err = f.ReadAt(make([]byte, 1), 0)
		check("ReadAt", err, OpRead)
		failing(OpCreate)
		_, err = fsys.Create(name)
		check("Create", err, OpCreate)
		failing(OpRemove)
		check("Remove", fsys.Remove(name), OpRemove)
		check("RemoveAll", fsys.RemoveAll(name), OpRemove)
		failing(OpRename)
		check("Rename", fsys.Rename(name, name+"2"), OpRename)
		failing(OpOpen)
		_, err = fsys.Open(name)
		check("Open", err, OpOpen)
		failing(OpMkdir)
		check("MkdirAll", fsys.MkdirAll(filepath.Join(dir, "sub"), 0o755), OpMkdir)
		failing(OpSyncDir)
		check("SyncDir", fsys.SyncDir(dir), OpSyncDir)
		failing(OpStat)
		_, err = fsys.Stat(name)
		check("Stat", err, OpStat)
		failing(OpReadDir)
		_, err = fsys.ReadDir(dir)
		check("ReadDir", err, OpReadDir)
		failing(OpLock)
		_, err = fsys.Lock(filepath.Join(dir, "LOCK"))
		check("Lock", err, OpLock)
		failing(OpClose)
		check("Close", f.Close(), OpClose)
		rec.fail = nil

		// Nothing was done: the file is as it was, nothing else exists.
		if got := mustRead(t, base, name); got != "abc" {
			t.Fatalf("contents %q after failed operations", got)
		}
		names, err := base.ReadDir(dir)
		if err != nil || strings.Join(names, ",") != "f" {
			t.Fatalf("ReadDir = %q, %v", names, err)
		}
		// Close closed the file even though it reported the injected error.
		if _, err := f.Write([]byte("x")); err == nil {
			t.Error("Write after a failed Close succeeded")
		}
	})
}

func TestWithErrorsLockCloseReleases(t *testing.T) {
	m := NewMem()
	fsys := WithErrors(m, func(op Op, _ string) error {
		if op == OpClose {
			return ErrInjected
		}
		return nil
	})
	l, err := fsys.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Close: %v", err)
	}
	l2, err := m.Lock("/LOCK")
	if err != nil {
		t.Fatalf("lock still held after a failed Close: %v", err)
	}
	l2.Close()
}

func TestWithErrorsHidesFd(t *testing.T) {
	fsys := WithErrors(Default, func(Op, string) error { return nil })
	f, err := fsys.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(Fder); ok {
		t.Fatal("a wrapped file exposes its descriptor, letting mmap users bypass injection")
	}
}

func TestFailAfter(t *testing.T) {
	m := NewMem()
	fsys := WithErrors(m, FailAfter(2, OpWrite, OpSync))
	f, err := fsys.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("a read counted as a write: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.Write([]byte("b")); !errors.Is(err, ErrInjected) {
			t.Fatalf("write %d after 2 successes: %v", i, err)
		}
		if err := f.Sync(); !errors.Is(err, ErrInjected) {
			t.Fatalf("sync %d after 2 successes: %v", i, err)
		}
	}
	if got := mustRead(t, m, "/f"); got != "a" {
		t.Fatalf("contents %q", got)
	}
	// With no ops, every operation counts.
	inj := FailAfter(1)
	if inj(OpStat, "x") != nil || !errors.Is(inj(OpRead, "x"), ErrInjected) {
		t.Fatal("FailAfter(1) with no ops did not fail the second operation")
	}
}

func TestOpString(t *testing.T) {
	seen := map[string]bool{}
	for op := OpCreate; op <= OpClose; op++ {
		s := op.String()
		if s == "" || strings.HasPrefix(s, "Op(") || seen[s] {
			t.Errorf("Op %d has name %q", int(op), s)
		}
		seen[s] = true
	}
	if got := Op(99).String(); got != "Op(99)" {
		t.Errorf("Op(99).String() = %q", got)
	}
}

// TestWriteFileAtomicFailureLeavesOldContents: a failed atomic write keeps
// the old file and removes its temporary file.
func TestWriteFileAtomicFailureLeavesOldContents(t *testing.T) {
	mem := NewMem()
	if err := WriteFileAtomic(mem, "/ckpt", []byte("old")); err != nil {
		t.Fatal(err)
	}
	failing := WithErrors(mem, func(op Op, path string) error {
		if op == OpSync && path == "/ckpt.tmp" {
			return ErrInjected
		}
		return nil
	})
	if err := WriteFileAtomic(failing, "/ckpt", []byte("new")); !errors.Is(err, ErrInjected) {
		t.Fatalf("WriteFileAtomic: %v, want ErrInjected", err)
	}
	if got, err := ReadFile(mem, "/ckpt"); err != nil || string(got) != "old" {
		t.Fatalf("after a failed write: %q, %v; want the old contents", got, err)
	}
	if _, err := mem.Stat("/ckpt.tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}
