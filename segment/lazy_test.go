package segment

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// countFS counts the files open through it.
type countFS struct {
	vfs.FS
	open atomic.Int64
}

type countFile struct {
	vfs.File
	fs   *countFS
	once sync.Once
}

func (f *countFile) Close() error {
	f.once.Do(func() { f.fs.open.Add(-1) })
	return f.File.Close()
}

// countFdFile keeps the descriptor of an OS file visible (mmap).
type countFdFile struct{ *countFile }

func (f countFdFile) Fd() uintptr { return f.File.(vfs.Fder).Fd() }

func (c *countFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	cf := &countFile{File: f, fs: c}
	if _, ok := f.(vfs.Fder); ok {
		return countFdFile{cf}, nil
	}
	return cf, nil
}

func (c *countFS) Create(name string) (vfs.File, error)     { return c.wrap(c.FS.Create(name)) }
func (c *countFS) Open(name string) (vfs.File, error)       { return c.wrap(c.FS.Open(name)) }
func (c *countFS) OpenReadWrite(n string) (vfs.File, error) { return c.wrap(c.FS.OpenReadWrite(n)) }

// sealedSegments writes n sealed segments of a few batches each, closed as
// a clean shutdown leaves them, and returns each one's bytes and state.
func sealedSegments(t *testing.T, fs vfs.FS, dir string, cfg Config, n int) (bases []int64, data [][]byte, states []state) {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	ts, base := int64(0), int64(0)
	for range n {
		s := create(t, fs, dir, base, cfg)
		ws := fill(t, s, rng, 5+rng.IntN(30), &ts)
		require.NoError(t, s.Seal())
		require.NoError(t, s.Flush())
		bases, data, states = append(bases, base), append(data, logBytes(ws)), append(states, stateOf(s))
		base = s.NextOffset()
		require.NoError(t, s.Close())
	}
	return bases, data, states
}

// TestOpenSealedLazily: a sealed segment opened with OpenSealed has its
// state and no open file; the first reader opens its .log and offset index
// and reads what was written, a lookup by time opens the time index; Close
// closes them.
func TestOpenSealedLazily(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		bases, data, states := sealedSegments(t, fs, dir, tiny, 3)
		cfs := &countFS{FS: fs}
		for i, base := range bases {
			s, truncated, err := OpenSealed(cfs, dir, base, tiny, 0, t0)
			require.NoError(t, err)
			require.Zero(t, truncated)
			require.Zero(t, cfs.open.Load(), "no file stays open")
			require.Equal(t, states[i].Next, s.NextOffset())
			require.Equal(t, states[i].Size, s.Size())
			require.Equal(t, states[i].MaxTs, s.MaxTimestamp())
			require.True(t, s.Acquire())
			require.Equal(t, data[i], readAll(t, s, 1<<20))
			require.Equal(t, int64(2), cfs.open.Load(), "a read opens the .log and the offset index")
			off, ok, err := s.OffsetForTime(states[i].MaxTs, 0)
			require.NoError(t, err)
			require.True(t, ok)
			require.Less(t, off, s.NextOffset())
			require.Equal(t, int64(3), cfs.open.Load(), "a lookup by time the time index")
			require.Equal(t, states[i], stateOf(s))
			s.Release()
			require.NoError(t, s.Close())
			require.Zero(t, cfs.open.Load())
		}
	})
}

// TestOpenSealedBadIndexes: an index that a quick look cannot trust sends
// OpenSealed to Open; one that passes it but fails the sanity check is
// rebuilt from the .log by the first reader. Either way the reader reads
// the segment and its indexes are as written.
func TestOpenSealedBadIndexes(t *testing.T) {
	cases := []struct {
		name string
		ext  string
		fn   func(t testing.TB, f vfs.File, size int64)
	}{
		{"index size not a multiple of 8", ".index", func(t testing.TB, f vfs.File, size int64) {
			require.NoError(t, f.Truncate(size-3))
		}},
		{"index entries out of order", ".index", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0, 0, 0xff, 0xff, 0, 0, 0, 0}, 0)
		}},
		{"index position past the log", ".index", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0x7f, 0xff, 0xff, 0xff}, size-4)
		}},
		{"time index timestamps out of order", ".timeindex", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0x7f, 0, 0, 0, 0, 0, 0, 0}, 0)
		}},
		{"time index last timestamp wrong", ".timeindex", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0, 0, 0, 0, 0, 0, 0, 1}, size-12)
		}},
	}
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				sub := filepath.Join(dir, fmtName(c.name))
				require.NoError(t, fs.MkdirAll(sub, 0o755))
				bases, data, states := sealedSegments(t, fs, sub, tiny, 1)
				require.Greater(t, len(states[0].Offsets), 3)
				name := filepath.Join(sub, Name(bases[0], c.ext))
				modify(t, fs, name, func(f vfs.File) { c.fn(t, f, fileSize(t, fs, name)) })

				s, truncated, err := OpenSealed(fs, sub, bases[0], tiny, 0, t0)
				require.NoError(t, err)
				require.Zero(t, truncated)
				if c.ext == ".timeindex" {
					// And the offset index goes missing after the quick look.
					require.NoError(t, fs.Remove(filepath.Join(sub, Name(bases[0], ".index"))))
				}
				require.True(t, s.Acquire())
				require.Equal(t, data[0], readAll(t, s, 1<<20))
				require.Equal(t, states[0], stateOf(s))
				require.Equal(t, states[0].MaxTs, s.MaxTimestamp())
				s.Release()
				require.NoError(t, s.Close())
			})
		}
	})
}

func fmtName(s string) string {
	return string(bytes.Map(func(r rune) rune {
		if r == ' ' {
			return '-'
		}
		return r
	}, []byte(s)))
}

// TestCacheBoundsOpenFiles: with a Cache of 4, reading 40 sealed segments
// one after another keeps the files of at most 4 open; every read returns
// what was written, twice over (files closed and opened again).
func TestCacheBoundsOpenFiles(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const n, bound = 40, 4
		bases, data, _ := sealedSegments(t, fs, dir, tiny, n)
		cfs := &countFS{FS: fs}
		cfg := tiny
		cfg.Cache = NewCache(bound)
		segs := make([]*Segment, n)
		for i, base := range bases {
			s, _, err := OpenSealed(cfs, dir, base, cfg, 0, t0)
			require.NoError(t, err)
			segs[i] = s
		}
		require.Zero(t, cfs.open.Load())
		for round := range 2 {
			for i, s := range segs {
				require.True(t, s.Acquire())
				require.Equal(t, data[i], readAll(t, s, 1<<20), "round %d segment %d", round, i)
				s.Release()
				require.LessOrEqual(t, cfg.Cache.Len(), bound)
				require.LessOrEqual(t, cfs.open.Load(), int64(3*bound))
			}
		}
		// A reader holding more than the bound keeps them all open; they
		// are closed once released and the next one opens.
		for _, s := range segs[:2*bound] {
			require.True(t, s.Acquire())
			_, _, err := s.Read(s.BaseOffset(), 1, NoBound, true)
			require.NoError(t, err)
		}
		require.Equal(t, int64(2*2*bound), cfs.open.Load())
		for _, s := range segs[:2*bound] {
			s.Release()
		}
		require.True(t, segs[n-1].Acquire())
		_, _, err := segs[n-1].Read(segs[n-1].BaseOffset(), 1, NoBound, true)
		require.NoError(t, err)
		segs[n-1].Release()
		require.LessOrEqual(t, cfs.open.Load(), int64(3*bound))
		for _, s := range segs {
			require.NoError(t, s.Close())
		}
		require.Zero(t, cfs.open.Load())
		require.Zero(t, cfg.Cache.Len())
	})
}

// TestCacheConcurrentReaders: readers of segments whose files a small
// Cache keeps closing and opening always read what was written (run with
// -race); the owner deletes some segments meanwhile, and a reader never
// reads another segment's bytes: Acquire refuses a deleted one whose
// files are closed.
func TestCacheConcurrentReaders(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const n = 24
		bases, data, _ := sealedSegments(t, fs, dir, tiny, n)
		cfg := tiny
		cfg.Cache = NewCache(3)
		segs := make([]*Segment, n)
		for i, base := range bases {
			s, _, err := OpenSealed(fs, dir, base, cfg, 0, t0)
			require.NoError(t, err)
			segs[i] = s
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 6 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for range 300 {
					i := rng.IntN(n)
					s := segs[i]
					if !s.Acquire() {
						continue // deleted
					}
					raw, _, err := s.Read(s.BaseOffset(), 1<<20, NoBound, true)
					s.Release()
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(raw, data[i][:len(raw)]) || len(raw) == 0 {
						errs <- errors.New("read other bytes")
						return
					}
				}
			})
		}
		for i := 0; i < n; i += 5 {
			require.NoError(t, segs[i].Delete())
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for _, s := range segs {
			require.NoError(t, s.Close())
		}
		require.Zero(t, cfg.Cache.Len())
	})
}

// TestDeleteKeepsReaderOfClosedFiles: a reader that acquired a segment
// whose files were closed, before it was deleted, still reads it; one that
// comes after is refused.
func TestDeleteKeepsReaderOfClosedFiles(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		bases, data, _ := sealedSegments(t, fs, dir, tiny, 2)
		s, _, err := OpenSealed(fs, dir, bases[1], tiny, 0, t0)
		require.NoError(t, err)
		require.True(t, s.Acquire())
		require.NoError(t, s.Delete())
		_, err = fs.Stat(filepath.Join(dir, Name(bases[1], ".log")))
		require.ErrorIs(t, err, iofs.ErrNotExist)
		require.Equal(t, data[1], readAll(t, s, 1<<20))
		require.False(t, s.Acquire())
		s.Release()

		s, _, err = OpenSealed(fs, dir, bases[0], tiny, 0, t0)
		require.NoError(t, err)
		s.Retire()
		require.False(t, s.Acquire(), "retired with its files closed")
		require.NoError(t, s.Close())
	})
}

// TestCreateOutOfFiles: a Create that runs out of file descriptors
// opening an index returns that error and leaves no file behind.
func TestCreateOutOfFiles(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/seg", 0o755))
	var full atomic.Bool
	fs := vfs.WithErrors(mem, func(op vfs.Op, path string) error {
		if full.Load() && op == vfs.OpOpen && filepath.Ext(path) == ".timeindex" {
			return syscall.EMFILE
		}
		return nil
	})
	full.Store(true)
	_, err := Create(fs, "/seg", 0, tiny, t0)
	require.ErrorIs(t, err, syscall.EMFILE)
	names, err := mem.ReadDir("/seg")
	require.NoError(t, err)
	require.Empty(t, names)
	full.Store(false)
	s, err := Create(fs, "/seg", 0, tiny, t0)
	require.NoError(t, err)
	appendRecs(t, s, simple(3, 1, 10))
	require.NoError(t, s.Close())
}

// TestUnlinkClosedFiles: Unlink opens the files of a segment a reader
// holds, so that it reads them after they are removed, but not those of
// one no one holds (a partition truncated fully would open all of its
// segments' at once); a reader that comes later gets ErrClosed.
func TestUnlinkClosedFiles(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		bases, data, _ := sealedSegments(t, fs, dir, tiny, 2)
		cfs := &countFS{FS: fs}
		held, _, err := OpenSealed(cfs, dir, bases[0], tiny, 0, t0)
		require.NoError(t, err)
		idle, _, err := OpenSealed(cfs, dir, bases[1], tiny, 0, t0)
		require.NoError(t, err)
		require.True(t, held.Acquire())
		require.NoError(t, held.Unlink())
		require.NoError(t, idle.Unlink())
		require.Equal(t, int64(3), cfs.open.Load(), "the held segment's files only")
		require.Equal(t, data[0], readAll(t, held, 1<<20))
		held.Release()
		require.True(t, idle.Acquire())
		_, _, err = idle.Read(bases[1], 1<<20, NoBound, true)
		require.ErrorIs(t, err, ErrClosed)
		idle.Release()
		require.NoError(t, held.Close())
		require.NoError(t, idle.Close())
		require.Zero(t, cfs.open.Load())
	})
}
