package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// dirModel is a trivial model of the directory entries of a MemFS: for each
// directory a map of its current entries and a whole copy of it, its durable
// entries, taken at every SyncDir. Each entry is a file whose contents (its
// id, synced at creation) never change.
type dirModel struct {
	cur, durable map[string]map[string]int
}

var modelDirs = []string{"/a", "/b"}

func newDirModel() *dirModel {
	dm := &dirModel{cur: map[string]map[string]int{}, durable: map[string]map[string]int{}}
	for _, d := range modelDirs {
		dm.cur[d], dm.durable[d] = map[string]int{}, map[string]int{}
	}
	return dm
}

// TestMemDirModel runs random creates, removes, renames, SyncDirs and
// crashes against MemFS and the model: after every crash the entries and
// the files under them agree. A failure prints its seed; STRATA_SOAK=1 runs
// more seeds.
func TestMemDirModel(t *testing.T) {
	seeds := 200
	if os.Getenv("STRATA_SOAK") != "" {
		seeds = 20_000
	}
	for seed := range uint64(seeds) {
		runDirModel(t, seed)
	}
}

func runDirModel(t *testing.T, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	m := NewMem()
	for _, d := range modelDirs {
		if err := m.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dm := newDirModel()
	// Some seeds sync rarely, so that a directory's changes outgrow its
	// list of changed names.
	// Odds per thousand steps.
	syncOdds, crashOdds := 300, 30
	if rng.IntN(2) == 0 {
		syncOdds, crashOdds = 2, 2
	}
	pick := func() (string, string) {
		return modelDirs[rng.IntN(len(modelDirs))], "f" + strconv.Itoa(rng.IntN(6))
	}
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: "+format, append([]any{seed, step}, args...)...)
	}
	for step := range 1000 {
		op := 5 // SyncDir
		switch r := rng.IntN(1000); {
		case r < syncOdds:
		case r < syncOdds+crashOdds:
			op = 4 // crash
		default:
			op = rng.IntN(4)
		}
		switch op {
		case 0: // create (or truncate and rewrite) a file, its data synced
			d, n := pick()
			f, err := m.Create(filepath.Join(d, n))
			if err == nil {
				_, err = f.Write([]byte(strconv.Itoa(step)))
			}
			if err == nil {
				err = f.Sync()
			}
			if err == nil {
				err = f.Close()
			}
			if err != nil {
				fail(step, "create: %v", err)
			}
			if old, ok := dm.cur[d][n]; ok {
				// The same file, rewritten: every name of it sees the new bytes.
				dm.rewrite(old, step)
			}
			dm.cur[d][n] = step
		case 1: // remove
			d, n := pick()
			err := m.Remove(filepath.Join(d, n))
			if _, ok := dm.cur[d][n]; ok != (err == nil) {
				fail(step, "remove %s/%s: %v, model has it: %v", d, n, err, ok)
			}
			delete(dm.cur[d], n)
		case 2: // RemoveAll of a file
			d, n := pick()
			if err := m.RemoveAll(filepath.Join(d, n)); err != nil {
				fail(step, "RemoveAll: %v", err)
			}
			delete(dm.cur[d], n)
		case 3: // rename, maybe over another file, maybe across directories
			d1, n1 := pick()
			d2, n2 := pick()
			err := m.Rename(filepath.Join(d1, n1), filepath.Join(d2, n2))
			id, ok := dm.cur[d1][n1]
			if ok != (err == nil) {
				fail(step, "rename %s/%s: %v, model has it: %v", d1, n1, err, ok)
			}
			// As rename(2): two names of one file (a crash can leave
			// them) stay as they are.
			if to, exists := dm.cur[d2][n2]; ok && !(exists && to == id) {
				delete(dm.cur[d1], n1)
				dm.cur[d2][n2] = id
			}
		case 4: // crash
			m.Crash()
			for _, d := range modelDirs {
				dm.cur[d] = maps.Clone(dm.durable[d])
			}
			dm.check(t, m, seed, step)
		default: // SyncDir
			d := modelDirs[rng.IntN(len(modelDirs))]
			if err := m.SyncDir(d); err != nil {
				fail(step, "SyncDir: %v", err)
			}
			dm.durable[d] = maps.Clone(dm.cur[d])
		}
		dm.check(t, m, seed, step)
	}
	m.Crash()
	for _, d := range modelDirs {
		dm.cur[d] = maps.Clone(dm.durable[d])
	}
	dm.check(t, m, seed, -1)
}

// rewrite makes every entry of file old, current or durable, name file now.
func (dm *dirModel) rewrite(old, now int) {
	for _, set := range []map[string]map[string]int{dm.cur, dm.durable} {
		for _, ents := range set {
			for n, id := range ents {
				if id == old {
					ents[n] = now
				}
			}
		}
	}
}

// check compares m's entries and files with the model's current ones
// (step -1: after the final crash).
func (dm *dirModel) check(t *testing.T, m *MemFS, seed uint64, step int) {
	t.Helper()
	for _, d := range modelDirs {
		names, err := m.ReadDir(d)
		if err != nil {
			t.Fatalf("seed %d step %d: ReadDir %s: %v", seed, step, d, err)
		}
		want := slices.Sorted(maps.Keys(dm.cur[d]))
		if !slices.Equal(names, want) {
			t.Fatalf("seed %d step %d: %s holds %q, want %q", seed, step, d, names, want)
		}
		for _, n := range names {
			got, err := ReadFile(m, filepath.Join(d, n))
			if err != nil || string(got) != fmt.Sprint(dm.cur[d][n]) {
				t.Fatalf("seed %d step %d: %s/%s = %q, %v, want %d", seed, step, d, n, got, err, dm.cur[d][n])
			}
		}
	}
}

// TestMemRemoveAllRoot: emptying the root is a change of its entries like
// any other, durable only once the root is synced.
func TestMemRemoveAllRoot(t *testing.T) {
	m := NewMem()
	mustCreate(t, m, "/x", "x")
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveAll("/"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, m, "/y", "y")
	m.Crash()
	if _, err := m.Stat("/x"); err != nil {
		t.Fatalf("/x lost without a sync of the root: %v", err)
	}
	if _, err := m.Stat("/y"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/y survived without a sync of the root: %v", err)
	}
	if err := m.RemoveAll("/"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if names, err := m.ReadDir("/"); err != nil || len(names) != 0 {
		t.Fatalf("root after a synced RemoveAll: %q, %v", names, err)
	}
}
