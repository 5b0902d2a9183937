package batch

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
)

// TestLz4Bound: for the frames this package writes (64 KiB blocks), kgo's
// writer's (4 MiB blocks), one that declares its content size, and stored
// (incompressible) blocks, the bound read from the headers is at least what
// the frames decompress to, and for 64 KiB blocks at most one block more.
// A payload that is not well-formed lz4 frames gives no bound.
func TestLz4Bound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := bytes.Repeat([]byte(`{"id":"evt-0001","kind":"deposit","amount":12.50},`), 30<<10)
	writers := map[string][]lz4.Option{
		"producer": {lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1), lz4.ChecksumOption(true)},
		"kgo":      {lz4.ConcurrencyOption(1)},
		"sized":    nil, // SizeOption below
		"blocksum": {lz4.BlockSizeOption(lz4.Block256Kb), lz4.BlockChecksumOption(true)},
	}
	for name, opts := range writers {
		for _, src := range [][]byte{nil, text[:1], text[:64<<10], text[:64<<10+1], text, random} {
			var buf bytes.Buffer
			w := lz4.NewWriter(&buf)
			if name == "sized" {
				opts = []lz4.Option{lz4.SizeOption(uint64(len(src)))}
			}
			require.NoError(t, w.Apply(opts...))
			_, err := w.Write(src)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			frame := buf.Bytes()
			got, err := io.ReadAll(lz4.NewReader(bytes.NewReader(frame)))
			require.NoError(t, err)
			require.Equal(t, len(src), len(got))

			n, ok := lz4Bound(frame)
			require.True(t, ok, "%s, %d bytes", name, len(src))
			require.GreaterOrEqual(t, n, len(src), "%s, %d bytes", name, len(src))
			if name == "producer" {
				require.LessOrEqual(t, n, len(src)+64<<10, "%d bytes", len(src))
			}
			// Two frames one after the other: the sum.
			n2, ok := lz4Bound(append(append([]byte(nil), frame...), frame...))
			require.True(t, ok)
			require.Equal(t, 2*n, n2)
			// Cut anywhere: no bound, no panic.
			for _, cut := range []int{1, 5, 7, len(frame) / 2, len(frame) - 1} {
				if cut < len(frame) {
					_, ok := lz4Bound(frame[:cut])
					require.False(t, ok, "%s cut at %d of %d", name, cut, len(frame))
				}
			}
		}
	}
	for _, junk := range [][]byte{{1, 2, 3}, bytes.Repeat([]byte{0xff}, 64), append([]byte{0x04, 0x22, 0x4d, 0x18, 0x40, 0x10}, make([]byte, 8)...)} {
		_, ok := lz4Bound(junk)
		require.False(t, ok, "%x", junk)
	}
}

// FuzzLz4Bound: any bytes give a bound or none, never a panic, and a bound
// never below what a well-formed payload decompresses to.
func FuzzLz4Bound(f *testing.F) {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(true))
	_, _ = w.Write(bytes.Repeat([]byte("abcdefgh"), 20<<10))
	_ = w.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := lz4Bound(b)
		if !ok {
			return
		}
		got, err := io.ReadAll(io.LimitReader(lz4.NewReader(bytes.NewReader(b)), int64(n)+1))
		if err == nil && len(got) > n {
			t.Fatalf("bound %d, decompresses to more", n)
		}
	})
}
