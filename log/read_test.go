package log

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// boundedPartition returns a partition of 10 batches of 3 records (offsets
// 0 to 29) in two segments, rolled after offset 14, and each batch's base
// offset.
func boundedPartition(t *testing.T, fs vfs.FS, dir string) (*Broker, *Partition) {
	t.Helper()
	b := openT(t, fs, dir)
	t.Cleanup(func() { b.Close() })
	p := createT(t, b, "t", TopicConfig{})
	for i := range 10 {
		_, err := p.Append(rec(3*i), rec(3*i+1), rec(3*i+2))
		require.NoError(t, err)
		if i == 4 {
			require.NoError(t, p.Roll())
		}
	}
	require.Equal(t, 2, p.Segments())
	require.EqualValues(t, 30, p.EndOffset())
	return b, p
}

// batchBases returns the base offset of each batch in raw.
func batchBases(t *testing.T, raw []byte) []int64 {
	t.Helper()
	var out []int64
	require.NoError(t, batch.Batches(raw, func(_ []byte, h batch.Header) error {
		out = append(out, h.BaseOffset)
		return nil
	}))
	return out
}

// wantBases is the base offsets of the batches of boundedPartition from the
// one holding from, below maxOffset.
func wantBases(from, maxOffset int64) []int64 {
	var out []int64
	for base := from / 3 * 3; base < 30 && base < maxOffset; base += 3 {
		out = append(out, base)
	}
	return out
}

// TestReadBatchesBounded: ReadBatches returns no batch whose base offset is
// at or past maxOffset, in the segment it starts in as in the next, and
// every batch below it.
func TestReadBatchesBounded(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		_, p := boundedPartition(t, fs, dir)
		for _, from := range []int64{0, 4, 14, 15, 29} {
			for _, bound := range []int64{from + 1, 5, 6, 13, 15, 16, 28, 30} {
				if bound <= from {
					continue
				}
				raw, err := p.ReadBatches(from, 1<<20, bound)
				require.NoError(t, err)
				require.Equal(t, wantBases(from, bound), batchBases(t, raw), "ReadBatches(%d, bound %d)", from, bound)
			}
		}
	})
}

// TestSendToBounded: SendTo sends nothing at or past the high watermark,
// even when the batches after it are in the same segment.
func TestSendToBounded(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		_, p := boundedPartition(t, fs, dir)
		for _, tc := range []struct{ from, hw, wantNext int64 }{
			{0, 6, 6}, {0, 7, 9}, {3, 4, 6}, {15, 21, 21}, {16, 29, 30}, {6, 6, 6},
		} {
			a, c := net.Pipe()
			got := make(chan []byte)
			go func() {
				b, _ := io.ReadAll(c)
				got <- b
			}()
			n, next, err := p.sendTo(a, tc.from, 1<<20, tc.hw)
			require.NoError(t, err)
			require.NoError(t, a.Close())
			raw := <-got
			require.EqualValues(t, len(raw), n)
			require.Equal(t, tc.wantNext, next, "%+v", tc)
			var want []int64
			if tc.from < tc.hw { // one segment per SendTo
				want = wantBases(tc.from, min(tc.hw, 15+15*(tc.from/15)))
			}
			require.Equal(t, want, batchBases(t, raw), "%+v", tc)
		}
	})
}
