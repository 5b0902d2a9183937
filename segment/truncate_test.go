package segment

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// reference builds, in its own directory, a segment that only ever held ws
// and returns its state.
func reference(t *testing.T, fs vfs.FS, dir string, base int64, ws []written) state {
	t.Helper()
	d := filepath.Join(dir, "ref")
	require.NoError(t, fs.MkdirAll(d, 0o755))
	require.NoError(t, fs.RemoveAll(filepath.Join(d, Name(base, ".log"))))
	r := create(t, fs, d, base, tiny)
	for _, w := range ws {
		appendB(t, r, bytes.Clone(w.b))
	}
	st := stateOf(r)
	require.NoError(t, r.Delete())
	return st
}

// TestTruncateTo cuts a segment at batch boundaries and inside batches: it
// then holds exactly the batches before the cut, with the state (next
// offset, size, largest timestamp, index entries) of a segment that only
// ever held them; a reopen with and without recovery agrees, and appends
// continue at the cut.
func TestTruncateTo(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		rng := rand.New(rand.NewPCG(21, 22))
		const base = 1000
		for iter := range 12 {
			s := create(t, fs, dir, base, tiny)
			ts := int64(100)
			ws := fill(t, s, rng, 40, &ts)
			k := rng.IntN(len(ws))
			offset := ws[k].h.BaseOffset
			if iter%2 == 1 && ws[k].h.LastOffsetDelta > 0 {
				// Inside batch k: the whole batch goes.
				offset += 1 + rng.Int64N(int64(ws[k].h.LastOffsetDelta))
			}
			if iter%3 == 0 {
				require.NoError(t, s.Seal()) // a sealed segment becomes writable again
			}
			next, err := s.TruncateTo(offset, 0)
			require.NoError(t, err)
			require.Equal(t, ws[k].h.BaseOffset, next)
			want := reference(t, fs, dir, base, ws[:k])
			got := stateOf(s)
			if iter%3 == 0 && len(got.Times) == len(want.Times)+1 {
				// Seal's final entry survives when it is below the cut.
				got.Times = got.Times[:len(got.Times)-1]
			}
			require.Equal(t, want, got, "iteration %d: cut at batch %d (offset %d)", iter, k, offset)
			require.Equal(t, logBytes(ws[:k]), readAll(t, s, 1<<20))
			require.False(t, s.IndexesDirty())

			// Appends continue at the cut; the state survives a reopen.
			more := fill(t, s, rng, 5, &ts)
			require.Equal(t, ws[k].pos, more[0].pos)
			all := append(append([]written(nil), ws[:k]...), more...)
			require.Equal(t, logBytes(all), readAll(t, s, 1<<20))
			after := stateOf(s)
			require.NoError(t, s.Close())
			for _, recover := range []bool{false, true} {
				s, truncated := open(t, fs, dir, base, tiny, recover)
				require.Zero(t, truncated)
				got := stateOf(s)
				if recover && iter%3 == 0 {
					got.Times = after.Times // Seal's entry is not rebuilt
				}
				require.Equal(t, after, got, "recover=%v", recover)
				require.Equal(t, logBytes(all), readAll(t, s, 1<<20))
				if recover {
					require.NoError(t, s.Delete())
				} else {
					require.NoError(t, s.Close())
				}
			}
		}
	})
}

// TestTruncateToEdges: at or past the end nothing changes; at the base
// offset the segment is emptied.
func TestTruncateToEdges(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 50, tiny)
		defer s.Close()
		ts := int64(0)
		ws := fill(t, s, rand.New(rand.NewPCG(3, 4)), 10, &ts)
		before := stateOf(s)
		for _, off := range []int64{s.NextOffset(), s.NextOffset() + 100} {
			next, err := s.TruncateTo(off, 0)
			require.NoError(t, err)
			require.Equal(t, before.Next, next)
			require.Equal(t, before, stateOf(s))
		}
		for _, off := range []int64{50, 0} {
			next, err := s.TruncateTo(off, 0)
			require.NoError(t, err)
			require.EqualValues(t, 50, next)
			require.Equal(t, state{Next: 50, MaxTs: -1}, stateOf(s))
			require.Zero(t, fileSize(t, fs, filepath.Join(dir, Name(50, ".log"))))
		}
		w := appendB(t, s, bytes.Clone(ws[0].b))
		require.Zero(t, w.pos)
		require.EqualValues(t, 50, w.h.BaseOffset)
	})
}

// TestTruncateToSurvivesCrash: the cut is durable when TruncateTo returns.
// Batches appended after it and not synced may be lost or torn by a crash,
// but the batches it removed never come back, whether the segment is then
// loaded (indexes trusted after their checks) or recovered.
func TestTruncateToSurvivesCrash(t *testing.T) {
	s0 := seed(t)
	for iter := range 30 {
		rng := rand.New(rand.NewPCG(s0, uint64(iter)))
		fs := vfs.NewMem()
		require.NoError(t, fs.MkdirAll("/seg", 0o755))
		s := create(t, fs, "/seg", 0, tiny)
		require.NoError(t, fs.SyncDir("/seg"))
		ts := int64(0)
		ws := fill(t, s, rng, 30, &ts)
		require.NoError(t, s.Flush())
		k := rng.IntN(len(ws))
		_, err := s.TruncateTo(ws[k].h.BaseOffset, 0)
		require.NoError(t, err)
		// New, different batches where the old ones were; not synced.
		var more []written
		for range rng.IntN(6) {
			more = append(more, appendRecs(t, s, simple(1+rng.IntN(4), ts, 50+rng.IntN(200))))
		}
		crashed := fs.CrashCloneWithTornWrites(rng)
		require.NoError(t, s.Close())

		for _, recover := range []bool{false, true} {
			r, _, err := Open(crashed, "/seg", 0, tiny, recover, 0, t0)
			require.NoError(t, err, "iteration %d recover=%v", iter, recover)
			got := readAll(t, r, 1<<20)
			kept := logBytes(ws[:k])
			require.True(t, bytes.HasPrefix(got, kept), "iteration %d: the kept batches are there", iter)
			rest := got[len(kept):]
			newBytes := logBytes(more)
			require.True(t, bytes.HasPrefix(newBytes, rest), "iteration %d recover=%v: past the cut only new batches", iter, recover)
			require.NoError(t, batch.Batches(rest, func(b []byte, h batch.Header) error { return nil }))
			require.NoError(t, r.Close())
		}
	}
}
