package segment

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// encodeWith is encode with a compression codec.
func encodeWith(codec int, recs []rec) []byte {
	var bd batch.Builder
	bd.SetCompression(codec)
	bd.Reset(recs[0].ts)
	for i, r := range recs {
		bd.Append(r.ts, []byte("k"+strconv.Itoa(i)), r.value, nil)
	}
	return bytes.Clone(bd.Bytes())
}

// fillCompressed appends n batches, each with the next of the five codecs, of
// 1 to 20 compressible records with timestamps that mostly rise.
func fillCompressed(t testing.TB, s *Segment, rng *rand.Rand, n int, ts *int64) ([]written, []rec) {
	t.Helper()
	var (
		ws  []written
		all []rec
	)
	for k := range n {
		recs := make([]rec, 1+rng.IntN(20))
		for i := range recs {
			*ts += int64(rng.IntN(5)) - 1
			recs[i] = rec{ts: *ts, value: bytes.Repeat([]byte(`{"n":`+strconv.Itoa(rng.IntN(1000))+`}`), rng.IntN(40))}
		}
		all = append(all, recs...)
		ws = append(ws, appendB(t, s, encodeWith(k%5, recs)))
	}
	return ws, all
}

// TestRecoverCompressed: recovery keeps compressed batches (its header checks
// and the CRC are all it needs: the CRC covers the compressed bytes, and
// batch.Validate streams through them too), rebuilds the same indexes, and
// truncates at a compressed batch that is torn, or whose payload does not
// decompress even with a right CRC.
func TestRecoverCompressed(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		ts := int64(1000)
		ws, _ := fillCompressed(t, s, rand.New(rand.NewPCG(3, 4)), 40, &ts)
		live := stateOf(s)
		truncated, err := s.Recover(0)
		require.NoError(t, err)
		require.Zero(t, truncated)
		require.Equal(t, live, stateOf(s))
		require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
		require.NoError(t, s.Close())

		// Batch k's payload replaced by garbage, with its CRC recomputed
		// (a bug of the writer, not of the disk): recovery cuts there.
		end := len(ws)
		for _, k := range []int{39, 22} {
			require.NotZero(t, ws[k].h.Compression())
			modify(t, fs, s.path(".log"), func(f vfs.File) {
				b := bytes.Clone(ws[k].b)
				for i := batch.HeaderSize; i < len(b); i++ {
					b[i] = byte(i)
				}
				batch.SetCRC(b)
				writeAt(t, f, b, ws[k].pos)
			})
			s, truncated = open(t, fs, dir, 0, tiny, true)
			require.EqualValues(t, fileSizeOf(ws[k:end]), truncated, "batch %d", k)
			end = k
			require.Equal(t, logBytes(ws[:k]), readAll(t, s, 1<<20))
			require.Equal(t, ws[k].h.BaseOffset, s.NextOffset())
			require.NoError(t, s.Close())
		}
	})
}

func fileSizeOf(ws []written) int64 {
	n := 0
	for _, w := range ws {
		n += len(w.b)
	}
	return int64(n)
}

// TestRecoverTornCompressed: a compressed batch cut short is a torn tail.
func TestRecoverTornCompressed(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) { recoverTornCompressed(t, fs, dir) })
}

func recoverTornCompressed(t *testing.T, fs vfs.FS, dir string) {
	s := create(t, fs, dir, 0, tiny)
	ts := int64(1000)
	ws, _ := fillCompressed(t, s, rand.New(rand.NewPCG(5, 6)), 10, &ts)
	require.NoError(t, s.Close())
	last := ws[len(ws)-1]
	modify(t, fs, s.path(".log"), func(f vfs.File) { require.NoError(t, f.Truncate(last.pos+int64(len(last.b))-2)) })
	s, truncated := open(t, fs, dir, 0, tiny, true)
	defer s.Close()
	require.EqualValues(t, len(last.b)-2, truncated)
	require.Equal(t, last.h.BaseOffset, s.NextOffset())
}

// TestOffsetForTimeCompressed: OffsetForTime finds records inside compressed
// batches, from any starting offset.
func TestOffsetForTimeCompressed(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) { offsetForTimeCompressed(t, fs, dir) })
}

func offsetForTimeCompressed(t *testing.T, fs vfs.FS, dir string) {
	s := create(t, fs, dir, 50, tiny)
	defer s.Close()
	ts := int64(1000)
	ws, all := fillCompressed(t, s, rand.New(rand.NewPCG(9, 10)), 30, &ts)
	offs := make([]int64, 0, len(all))
	for _, w := range ws {
		for o := w.h.BaseOffset; o <= w.h.LastOffset(); o++ {
			offs = append(offs, o)
		}
	}
	require.Len(t, offs, len(all))
	maxTs := s.MaxTimestamp()
	for _, from := range []int64{0, 50, 77, s.NextOffset() - 1} {
		for target := int64(995); target <= maxTs+1; target += 3 {
			want, wantOK := int64(0), false
			for i, r := range all {
				if offs[i] >= from && r.ts >= target {
					want, wantOK = offs[i], true
					break
				}
			}
			got, ok, err := s.OffsetForTime(target, from)
			require.NoError(t, err)
			require.Equal(t, wantOK, ok, "ts %d from %d", target, from)
			if ok {
				require.Equal(t, want, got, "ts %d from %d", target, from)
			}
		}
	}
}
