package segment

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// gappy writes a cleaned segment at base 100 whose batches leave gaps
// between them (100-102, 110-111, 200), commits and installs it.
func gappy(t *testing.T, fs vfs.FS, dir string) []written {
	t.Helper()
	c, err := CreateCleaned(fs, dir, 100, tiny, t0, nil)
	require.NoError(t, err)
	var ws []written
	for _, b := range [][]byte{encode(100, simple(3, 1000, 150)), encode(110, simple(2, 2000, 150)), encode(200, simple(1, 3000, 150))} {
		h, err := batch.Validate(b)
		require.NoError(t, err)
		ws = append(ws, written{pos: c.Size(), h: h, b: b})
		require.NoError(t, c.Append(b, h))
	}
	// Offsets only increase.
	require.ErrorIs(t, c.Append(ws[1].b, ws[1].h), ErrOffsetMismatch)
	names, _ := fs.ReadDir(dir)
	for _, n := range names {
		require.True(t, strings.HasSuffix(n, CleanedSuffix), "before commit: %s", n)
	}
	s, err := c.Commit()
	require.NoError(t, err)
	names, _ = fs.ReadDir(dir)
	require.Len(t, names, 3)
	for _, n := range names {
		require.True(t, strings.HasSuffix(n, SwapSuffix), "after commit: %s", n)
	}
	require.NoError(t, s.Install())
	names, _ = fs.ReadDir(dir)
	require.ElementsMatch(t, []string{Name(100, ".log"), Name(100, ".index"), Name(100, ".timeindex")}, names)
	require.EqualValues(t, 201, s.NextOffset())
	require.NoError(t, s.Close())
	return ws
}

func TestCleanedSegmentWithGaps(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		ws := gappy(t, fs, dir)
		for _, recover := range []bool{false, true} {
			s, truncated := open(t, fs, dir, 100, tiny, recover)
			require.Zero(t, truncated, "recovery must keep a log with gaps between batches")
			require.EqualValues(t, 201, s.NextOffset())
			require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
			// An offset in a gap reads the next batch.
			for off, want := range map[int64]int{100: 0, 102: 0, 103: 1, 109: 1, 112: 2, 199: 2, 200: 2} {
				pos, h, err := s.Locate(off)
				require.NoError(t, err)
				require.Equal(t, ws[want].pos, pos, "offset %d", off)
				require.Equal(t, ws[want].h.BaseOffset, h.BaseOffset)
				raw, _, err := s.Read(off, 1, NoBound, true)
				require.NoError(t, err)
				require.Equal(t, ws[want].b, raw)
			}
			_, _, err := s.Locate(201)
			require.ErrorIs(t, err, io.EOF)
			require.NoError(t, s.Close())
		}
	})
}

// TestRecoverCutsOffsetsThatGoBack: gaps are valid, but a batch that starts
// at or before the end of the one before it is garbage and ends the log.
func TestRecoverCutsOffsetsThatGoBack(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		ws := gappy(t, fs, dir)
		size := ws[2].pos + int64(len(ws[2].b))
		for _, back := range []int64{150, 200} { // before, and at, the last batch's offsets
			modify(t, fs, filepath.Join(dir, Name(100, ".log")), func(f vfs.File) {
				require.NoError(t, f.Truncate(size))
				writeAt(t, f, encode(back, simple(2, 4000, 10)), size)
			})
			s, truncated := open(t, fs, dir, 100, tiny, true)
			require.Positive(t, truncated, "batch at %d after one that ends at 201", back)
			require.EqualValues(t, 201, s.NextOffset())
			require.Equal(t, size, s.Size())
			require.NoError(t, s.Close())
		}
		// A later batch after a gap is kept.
		modify(t, fs, filepath.Join(dir, Name(100, ".log")), func(f vfs.File) {
			writeAt(t, f, encode(500, simple(2, 4000, 10)), size)
		})
		s, truncated := open(t, fs, dir, 100, tiny, true)
		require.Zero(t, truncated)
		require.EqualValues(t, 502, s.NextOffset())
		require.NoError(t, s.Close())
	})
}

func TestCleanedAbortRemovesFiles(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		c, err := CreateCleaned(fs, dir, 7, tiny, t0, nil)
		require.NoError(t, err)
		b := encode(7, simple(2, 1, 10))
		h, _ := batch.Validate(b)
		require.NoError(t, c.Append(b, h))
		c.Abort()
		names, err := fs.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, names)
		// Install refuses a segment that is not a committed cleaned one.
		s := create(t, fs, dir, 0, tiny)
		require.Error(t, s.Install())
		require.NoError(t, s.Close())
	})
}
