package segment

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

// modelRead is what Read and Range must return for a segment written as ws:
// the batches from the one holding offset on, none starting at or past
// maxOffset, as many as fit in maxBytes (the first even if it does not,
// with atLeastOne).
func modelRead(ws []written, offset int64, maxBytes int, maxOffset int64, atLeastOne bool) (pos, length, next int64, data []byte) {
	i := 0
	for i < len(ws) && ws[i].h.LastOffset() < offset {
		i++
	}
	pos, next = ws[i].pos, offset
	for j := i; j < len(ws); j++ {
		w := ws[j]
		if w.h.BaseOffset >= maxOffset {
			break
		}
		if length+int64(len(w.b)) > int64(maxBytes) && (j > i || !atLeastOne) {
			break
		}
		length += int64(len(w.b))
		next = w.h.NextOffset()
		data = append(data, w.b...)
	}
	return pos, length, next, data
}

// TestReadRangeBounded: Read and Range stop before the first batch whose
// base offset is at or past maxOffset, whatever maxBytes allows, and agree
// with each other and with a model of the segment, for every start offset,
// bound and budget, with an index dense enough that Range jumps through it.
func TestReadRangeBounded(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const base = 100
		s := create(t, fs, dir, base, tiny)
		defer s.Close()
		ws := fill(t, s, rand.New(rand.NewPCG(5, 6)), 40, new(int64))
		require.Greater(t, s.f.Load().oi.Load().Entries(), 10)
		var bounds []int64
		for _, w := range ws {
			bounds = append(bounds, w.h.BaseOffset, w.h.BaseOffset+1, w.h.LastOffset())
		}
		bounds = append(bounds, s.NextOffset(), NoBound)
		budgets := []int{1, 500, 4000, 1 << 20}
		for _, w := range ws {
			for _, off := range []int64{w.h.BaseOffset, w.h.LastOffset()} {
				for _, bound := range bounds {
					for _, maxBytes := range budgets {
						for _, atLeastOne := range []bool{true, false} {
							wantPos, wantLen, wantNext, wantData := modelRead(ws, off, maxBytes, bound, atLeastOne)
							data, next, err := s.Read(off, maxBytes, bound, atLeastOne)
							require.NoError(t, err)
							require.Equal(t, wantData, data, "Read(%d, %d, %d, %v)", off, maxBytes, bound, atLeastOne)
							require.Equal(t, wantNext, next, "Read(%d, %d, %d, %v) next", off, maxBytes, bound, atLeastOne)
							pos, length, next, err := s.Range(off, maxBytes, bound, atLeastOne)
							require.NoError(t, err)
							require.Equal(t, wantLen, length, "Range(%d, %d, %d, %v)", off, maxBytes, bound, atLeastOne)
							require.Equal(t, wantNext, next, "Range(%d, %d, %d, %v) next", off, maxBytes, bound, atLeastOne)
							if wantLen > 0 {
								require.Equal(t, wantPos, pos)
							}
						}
					}
				}
			}
		}
	})
}
