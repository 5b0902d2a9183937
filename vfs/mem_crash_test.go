package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"testing"
)

// writeFile creates name with data, syncs the data if sync, and syncs the
// parent directory if syncDir.
func writeFile(t *testing.T, m *MemFS, name, data string, sync, syncDir bool) File {
	t.Helper()
	f, err := m.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if syncDir {
		if err := m.SyncDir("/d"); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func newMemWithDir(t *testing.T) *MemFS {
	t.Helper()
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// contents returns the contents of name, or "<missing>".
func contents(t *testing.T, m *MemFS, name string) string {
	t.Helper()
	b, err := ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, m *MemFS)
		want map[string]string // path → contents after the crash
	}{
		{
			name: "synced data survives, unsynced tail lost",
			do: func(t *testing.T, m *MemFS) {
				f := writeFile(t, m, "/d/f", "synced", true, true)
				f.Write([]byte(" unsynced"))
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "unsynced overwrite reverted",
			do: func(t *testing.T, m *MemFS) {
				f := writeFile(t, m, "/d/f", "synced", true, true)
				f.WriteAt([]byte("XY"), 2)
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "unsynced shrink reverted",
			do: func(t *testing.T, m *MemFS) {
				f := writeFile(t, m, "/d/f", "synced", true, true)
				f.Truncate(1)
				f.Write([]byte("abcdefghij"))
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "synced shrink and regrowth kept",
			do: func(t *testing.T, m *MemFS) {
				f := writeFile(t, m, "/d/f", "synced", true, true)
				f.Truncate(2)
				f.WriteAt([]byte("!"), 4)
				f.Sync()
			},
			want: map[string]string{"/d/f": "sy\x00\x00!"},
		},
		{
			name: "Create over a synced file reverted",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "old", true, true)
				writeFile(t, m, "/d/f", "new", false, false)
			},
			want: map[string]string{"/d/f": "old"},
		},
		{
			name: "create without SyncDir lost",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "data", true, false)
			},
			want: map[string]string{"/d/f": "<missing>"},
		},
		{
			name: "create with SyncDir but no Sync is empty",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "data", false, true)
			},
			want: map[string]string{"/d/f": ""},
		},
		{
			name: "data synced after SyncDir survives",
			do: func(t *testing.T, m *MemFS) {
				f := writeFile(t, m, "/d/f", "data", false, true)
				f.Sync()
			},
			want: map[string]string{"/d/f": "data"},
		},
		{
			name: "rename without SyncDir reverted",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "A", true, true)
				writeFile(t, m, "/d/b", "B", true, true)
				if err := m.Rename("/d/a", "/d/b"); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"/d/a": "A", "/d/b": "B"},
		},
		{
			name: "rename with SyncDir kept",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "A", true, true)
				writeFile(t, m, "/d/b", "B", true, true)
				m.Rename("/d/a", "/d/b")
				m.SyncDir("/d")
			},
			want: map[string]string{"/d/a": "<missing>", "/d/b": "A"},
		},
		{
			name: "WriteFileAtomic is durable",
			do: func(t *testing.T, m *MemFS) {
				if err := WriteFileAtomic(m, "/d/cp", []byte("v1")); err != nil {
					t.Fatal(err)
				}
				if err := WriteFileAtomic(m, "/d/cp", []byte("v2")); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"/d/cp": "v2", "/d/cp.tmp": "<missing>"},
		},
		{
			name: "remove without SyncDir comes back with synced contents",
			do: func(t *testing.T, m *MemFS) {
				f := writeFile(t, m, "/d/f", "synced", true, true)
				f.Write([]byte(" more"))
				m.Remove("/d/f")
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "remove with SyncDir gone",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "synced", true, true)
				m.Remove("/d/f")
				m.SyncDir("/d")
			},
			want: map[string]string{"/d/f": "<missing>"},
		},
		{
			name: "RemoveAll without SyncDir comes back",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "synced", true, true)
				m.RemoveAll("/d")
			},
			want: map[string]string{"/d/f": "synced"},
		},
		{
			name: "MkdirAll is durable at once",
			do: func(t *testing.T, m *MemFS) {
				if err := m.MkdirAll("/x/y/z", 0o755); err != nil {
					t.Fatal(err)
				}
				f, _ := m.Create("/x/y/z/f")
				f.Write([]byte("deep"))
				f.Sync()
				m.SyncDir("/x/y/z")
			},
			want: map[string]string{"/x/y/z/f": "deep"},
		},
		{
			name: "sync through another handle",
			do: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/f", "a", true, true)
				w, _ := m.OpenReadWrite("/d/f")
				w.WriteAt([]byte("b"), 1)
				r, _ := m.Open("/d/f")
				r.Sync() // fsync of any descriptor syncs the file
			},
			want: map[string]string{"/d/f": "ab"},
		},
		{
			name: "rename synced in the new directory only: both names",
			do: func(t *testing.T, m *MemFS) {
				m.MkdirAll("/e", 0o755)
				writeFile(t, m, "/d/f", "F", true, true)
				m.Rename("/d/f", "/e/f")
				m.SyncDir("/e")
			},
			want: map[string]string{"/d/f": "F", "/e/f": "F"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"Crash", "CrashClone"} {
				m := newMemWithDir(t)
				tc.do(t, m)
				after := m
				if mode == "Crash" {
					m.Crash()
				} else {
					before := snapshot(t, m)
					after = m.CrashClone()
					if got := snapshot(t, m); !equalSnapshots(before, got) {
						t.Fatalf("CrashClone changed the original: %v → %v", before, got)
					}
				}
				for name, want := range tc.want {
					if got := contents(t, after, name); got != want {
						t.Errorf("%s: %s = %q, want %q", mode, name, got, want)
					}
				}
			}
		})
	}
}

// snapshot returns the current contents of every file under the root.
func snapshot(t *testing.T, m *MemFS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := dir + "/" + n
			fi, err := m.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[p] = "<dir>"
				walk(p)
			} else {
				out[p] = contents(t, m, p)
			}
		}
	}
	walk("")
	return out
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestCrashInvalidatesHandles(t *testing.T) {
	m := newMemWithDir(t)
	f := writeFile(t, m, "/d/f", "data", true, true)
	r, err := m.Open("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := m.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	m.Crash()

	errs := map[string]error{"Sync": f.Sync(), "Truncate": f.Truncate(0)}
	_, errs["Read"] = r.Read(make([]byte, 1))
	_, errs["ReadAt"] = r.ReadAt(make([]byte, 1), 0)
	_, errs["Write"] = f.Write([]byte("x"))
	_, errs["WriteAt"] = f.WriteAt([]byte("x"), 0)
	_, errs["Stat"] = f.Stat()
	errs["Close"] = r.Close()
	errs["lock Close"] = lock.Close()
	for op, err := range errs {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s after Crash: %v, want ErrCrashed", op, err)
		}
	}
	if got := contents(t, m, "/d/f"); got != "data" {
		t.Fatalf("old handles changed the crashed FS: %q", got)
	}
	// The crash released the lock (the holder died). The lock file was never
	// made durable, so it is gone too.
	l2, err := m.Lock("/d/LOCK")
	if err != nil {
		t.Fatalf("Lock after Crash: %v", err)
	}
	l2.Close()
	// The restarted FS works as before.
	f2, err := m.OpenReadWrite("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f2.WriteAt([]byte("D"), 0); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, m, "/d/f"); got != "Data" {
		t.Fatalf("contents %q", got)
	}
}

func TestCrashCloneLeavesOriginalRunning(t *testing.T) {
	m := newMemWithDir(t)
	f := writeFile(t, m, "/d/f", "one", true, true)
	f.Write([]byte(" two"))
	c := m.CrashClone()
	// The original's handles keep working and its later writes do not reach the clone.
	if _, err := f.Write([]byte(" three")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, m, "/d/f"); got != "one two three" {
		t.Fatalf("original %q", got)
	}
	if got := contents(t, c, "/d/f"); got != "one" {
		t.Fatalf("clone %q", got)
	}
	// And the clone's writes do not reach the original.
	g, err := c.OpenReadWrite("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	g.WriteAt([]byte("ONE"), 0)
	if got := contents(t, m, "/d/f"); got != "one two three" {
		t.Fatalf("original %q after writing the clone", got)
	}
	// Locks are per FS: the clone's holder died in the crash.
	if _, err := m.Lock("/d/LOCK"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock("/d/LOCK"); err != nil {
		t.Fatalf("clone inherited a lock: %v", err)
	}
}

func TestCrashKeepsHardLinkedFileShared(t *testing.T) {
	m := newMemWithDir(t)
	m.MkdirAll("/e", 0o755)
	writeFile(t, m, "/d/f", "F", true, true)
	m.Rename("/d/f", "/e/f")
	m.SyncDir("/e")
	m.Crash()
	f, err := m.OpenReadWrite("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("G"), 0)
	if got := contents(t, m, "/e/f"); got != "G" {
		t.Fatalf("/e/f = %q: the two names are not one file", got)
	}
}

func TestCrashDirectoryCycle(t *testing.T) {
	// Directory renames synced on one side only can make the durable entries
	// form a cycle; the crash must still produce a tree.
	m := NewMem()
	m.MkdirAll("/x", 0o755)
	m.MkdirAll("/y", 0o755)
	if err := m.Rename("/x", "/y/x"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/y") // durable: / has x and y; y has x
	if err := m.Rename("/y/x", "/x"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/y", "/x/y"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/x") // durable: x has y
	m.Crash()
	got := snapshot(t, m)
	want := map[string]string{"/x": "<dir>", "/y": "<dir>"}
	if !equalSnapshots(got, want) {
		t.Fatalf("after crash %v, want %v", got, want)
	}
}

func TestCrashWithTornWrites(t *testing.T) {
	const synced = "synced part|"
	tail := bytes.Repeat([]byte("0123456789"), 20)
	var sawFull, sawNone, sawGarbage, sawCleanPrefix bool
	for seed := range uint64(300) {
		m := newMemWithDir(t)
		f := writeFile(t, m, "/d/f", synced, true, true)
		f.Write(tail)
		writeFile(t, m, "/d/new", "never in the directory", true, false)
		rng := rand.New(rand.NewPCG(seed, 0))
		var c *MemFS
		if seed%2 == 0 {
			m.CrashWithTornWrites(rng)
			c = m
		} else {
			c = m.CrashCloneWithTornWrites(rng)
		}
		got := []byte(contents(t, c, "/d/f"))
		if !bytes.HasPrefix(got, []byte(synced)) {
			t.Fatalf("seed %d: synced bytes lost: %q", seed, got)
		}
		kept := got[len(synced):]
		if len(kept) > len(tail) {
			t.Fatalf("seed %d: %d tail bytes kept, only %d written", seed, len(kept), len(tail))
		}
		if contents(t, c, "/d/new") != "<missing>" {
			t.Fatalf("seed %d: a torn crash kept an unsynced directory entry", seed)
		}
		// Outside one run of garbage, the kept bytes are the written ones.
		lo, hi := 0, len(kept)
		for lo < hi && kept[lo] == tail[lo] {
			lo++
		}
		for hi > lo && kept[hi-1] == tail[hi-1] {
			hi--
		}
		switch {
		case len(kept) == len(tail) && lo == hi:
			sawFull = true
		case len(kept) == 0:
			sawNone = true
		case lo < hi:
			sawGarbage = true
		default:
			sawCleanPrefix = true
		}
		// Replaying the seed gives the same result.
		m2 := newMemWithDir(t)
		f2 := writeFile(t, m2, "/d/f", synced, true, true)
		f2.Write(tail)
		writeFile(t, m2, "/d/new", "never in the directory", true, false)
		var c2 *MemFS
		if seed%2 == 0 {
			m2.CrashWithTornWrites(rand.New(rand.NewPCG(seed, 0)))
			c2 = m2
		} else {
			c2 = m2.CrashCloneWithTornWrites(rand.New(rand.NewPCG(seed, 0)))
		}
		if got2 := contents(t, c2, "/d/f"); got2 != string(got) {
			t.Fatalf("seed %d not reproducible: %q vs %q", seed, got, got2)
		}
	}
	if !sawFull || !sawNone || !sawGarbage || !sawCleanPrefix {
		t.Fatalf("300 seeds did not cover every outcome: full=%v none=%v garbage=%v prefix=%v",
			sawFull, sawNone, sawGarbage, sawCleanPrefix)
	}
}
