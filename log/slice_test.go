package log

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// TestSliceModel reads random (offset, maxBytes, bound) slices of a
// partition of many small segments, with a dense offset index, and checks
// each against a flat model of the log: the batches from the one holding
// offset on, the first however large, the others while they fit, none
// starting at or past the bound, and nothing from an offset at or past it. Replay a failure with its printed seed.
func TestSliceModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		defer b.Close()
		p := createT(t, b, "t", TopicConfig{SegmentBytes: 2000, IndexIntervalBytes: 150, MaxIndexBytes: 4096})
		type mb struct {
			base, next int64
			raw        []byte
		}
		var model []mb
		for range 120 {
			recs := make([]Record, 1+rng.IntN(6))
			for i := range recs {
				recs[i] = Record{Key: []byte("k"), Value: make([]byte, rng.IntN(200))}
			}
			_, err := p.Append(recs...)
			require.NoError(t, err)
			if rng.IntN(15) == 0 {
				require.NoError(t, p.Roll())
			}
		}
		raw, err := p.ReadBatches(0, 1<<30, p.EndOffset())
		require.NoError(t, err)
		require.NoError(t, batch.Batches(raw, func(b []byte, h batch.Header) error {
			model = append(model, mb{h.BaseOffset, h.NextOffset(), b})
			return nil
		}))
		require.Equal(t, p.EndOffset(), model[len(model)-1].next)
		require.Greater(t, p.Segments(), 5)

		leo := p.EndOffset()
		for range 2000 {
			off := rng.Int64N(leo + 1)
			bound := off + rng.Int64N(leo-off+2)
			maxBytes := 1 + rng.IntN(5000)
			var want []byte
			wantNext := off
			i := 0
			for i < len(model) && model[i].next <= off {
				i++
			}
			for j := i; off < bound && j < len(model) && model[j].base < bound; j++ {
				if j > i && len(want)+len(model[j].raw) > maxBytes {
					break
				}
				want = append(want, model[j].raw...)
				wantNext = model[j].next
			}
			h, err := p.Slice(off, maxBytes, bound)
			require.NoError(t, err)
			got, err := h.Bytes()
			require.NoError(t, err)
			require.Equal(t, len(want), len(got), "Slice(%d, %d, %d)", off, maxBytes, bound)
			require.Equal(t, want, got, "Slice(%d, %d, %d)", off, maxBytes, bound)
			require.Equal(t, wantNext, h.next, "Slice(%d, %d, %d) next", off, maxBytes, bound)
			h.Release()
		}
		_, err = p.Slice(leo+1, 1, segment.NoBound)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
	})
}
