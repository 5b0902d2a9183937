package batch_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/segment/batch/batchtest"
)

// allocated is the heap allocated while fn ran, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bomb is a decompression bomb of codec inflating to n bytes, checked by
// its caller against limit.
type bomb struct {
	codec int
	n     int64
	limit int
}

// bombs: each codec's as large as a batch of about a MiB makes it (snappy
// inflates 21:1 at most, lz4 255:1, gzip 1032:1, zstd 32,000:1 and more).
var bombs = []bomb{
	{batch.CompressionZstd, 1000 << 20, 16 << 20},
	{batch.CompressionGzip, 300 << 20, 16 << 20},
	{batch.CompressionLz4, 200 << 20, 16 << 20},
	{batch.CompressionSnappy, 32 << 20, 4 << 20},
}

var allCodecs = []int{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLz4, batch.CompressionZstd}

func (bm bomb) String() string { return fmt.Sprintf("codec %d, %d MiB", bm.codec, bm.n>>20) }

func (bm bomb) make(t *testing.T) ([]byte, batch.Header) {
	t.Helper()
	b, err := batchtest.Bomb(bm.codec, bm.n)
	if err != nil {
		t.Fatal(err)
	}
	h, err := batch.Check(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// codecState is what a codec may allocate whatever the limit: an lz4
// reader's two 4 MiB blocks, a zstd decoder's 8 MiB window.
const codecState = 10 << 20

// tooLarge fails t unless err is ErrTooLarge (and not ErrCorrupt) and what
// the call allocated stayed under 3 times the limit (and the codec's state).
func tooLarge(t *testing.T, what string, err error, alloc uint64, limit int) {
	t.Helper()
	if !errors.Is(err, batch.ErrTooLarge) || errors.Is(err, batch.ErrCorrupt) {
		t.Errorf("%s: %v, want ErrTooLarge", what, err)
	}
	t.Logf("%s: %d KiB allocated, limit %d KiB", what, alloc>>10, limit>>10)
	if alloc > 3*uint64(limit)+codecState {
		t.Errorf("%s: allocated %d MiB under a limit of %d MiB", what, alloc>>20, limit>>20)
	}
}

// TestBombsStopAtTheLimit: every decompressing call stops a bomb of each
// codec at its limit with ErrTooLarge, having allocated less than 3 times
// the limit, not what the bomb inflates to (up to 1000 MiB).
func TestBombsStopAtTheLimit(t *testing.T) {
	for _, bm := range bombs {
		if batch.RaceEnabled && bm.n > 4*int64(bm.limit) {
			bm.n /= 4 // past the limit still; compressing 1000 MiB takes long under the race detector
		}
		t.Run(bm.String(), func(t *testing.T) {
			b, h := bm.make(t)
			var err error
			alloc := allocated(func() { _, err = batch.ValidateProducedLimit(b, bm.limit) })
			tooLarge(t, "ValidateProducedLimit", err, alloc, bm.limit)
			alloc = allocated(func() { _, err = batch.DecompressLimit(nil, b, h, bm.limit) })
			tooLarge(t, "DecompressLimit", err, alloc, bm.limit)
			for _, to := range allCodecs {
				if to == bm.codec {
					continue
				}
				alloc = allocated(func() { _, err = batch.RecompressLimit(nil, b, h, to, bm.limit) })
				tooLarge(t, fmt.Sprintf("RecompressLimit to codec %d", to), err, alloc, bm.limit)
			}
			f := batch.Filter{Limit: bm.limit}
			dst := []byte("kept")
			var out []byte
			alloc = allocated(func() {
				out, _, err = f.Apply(dst, b, h, -1, func(*batch.Record) bool { return true })
			})
			tooLarge(t, "Filter.Apply", err, alloc, bm.limit)
			if string(out) != "kept" {
				t.Errorf("Filter.Apply changed dst to %d bytes", len(out))
			}
		})
	}
}

// TestBombDefaultLimit: the calls without a limit apply
// DefaultMaxDecompressed.
func TestBombDefaultLimit(t *testing.T) {
	if testing.Short() || batch.RaceEnabled {
		t.Skip("decodes 128 MiB")
	}
	b, h := bomb{batch.CompressionZstd, 1000 << 20, 0}.make(t)
	var err error
	alloc := allocated(func() { err = batch.Records(b, h, func(*batch.Record) error { return nil }) })
	tooLarge(t, "Records", err, alloc, batch.DefaultMaxDecompressed)
	alloc = allocated(func() { _, err = batch.Decode(b, func(*batch.Record) error { return nil }) })
	tooLarge(t, "Decode", err, alloc, batch.DefaultMaxDecompressed)
	alloc = allocated(func() { _, err = batch.ValidateProduced(b) })
	tooLarge(t, "ValidateProduced", err, alloc, batch.DefaultMaxDecompressed)
}

// TestRecompressStreams: recompressing to gzip, lz4 or zstd streams the
// records from one codec to the other: 100 MiB of records (within the
// limit) cost a few MiB, and the result holds them.
func TestRecompressStreams(t *testing.T) {
	n := 100 << 20
	if batch.RaceEnabled {
		n = 16 << 20
	}
	b, h := bomb{batch.CompressionZstd, int64(n), 0}.make(t)
	for _, to := range []int{batch.CompressionGzip, batch.CompressionLz4, batch.CompressionZstd} {
		var (
			out []byte
			err error
		)
		alloc := allocated(func() { out, err = batch.RecompressLimit(nil, b, h, to, 2*n) })
		if err != nil {
			t.Fatalf("codec %d: %v", to, err)
		}
		t.Logf("codec %d: %d KiB allocated", to, alloc>>10)
		// Under the race detector sync.Pool drops items at random: lz4's
		// pooled 64 KiB blocks are then made anew, 1,600 of them.
		if alloc > 24<<20 && !batch.RaceEnabled {
			t.Errorf("codec %d: recompressing %d MiB of records allocated %d MiB", to, n>>20, alloc>>20)
		}
		oh, err := batch.ValidateProducedLimit(out, 2*n)
		if err != nil || oh.Compression() != to || oh.NumRecords != 1 {
			t.Fatalf("codec %d: recompressed batch: %+v, %v", to, oh, err)
		}
		plain, err := batch.DecompressLimit(nil, out, oh, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := batch.Records(plain, mustParse(t, plain), func(r *batch.Record) error {
			got = len(r.Value)
			for _, c := range r.Value {
				if c != 0 {
					return fmt.Errorf("value byte %d", c)
				}
			}
			return nil
		}); err != nil || got != n {
			t.Fatalf("codec %d: %d-byte value, %v", to, got, err)
		}
	}
}

func mustParse(t *testing.T, b []byte) batch.Header {
	t.Helper()
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSmallLimitLargeWindow: a producer's streaming zstd encoder declares
// its window (8 MiB) whatever the frame holds; a limit below it still
// decodes a small frame (the decoder accepts windows of 8 MiB whatever the
// limit), and stops a larger one at the limit.
func TestSmallLimitLargeWindow(t *testing.T) {
	const limit = 1 << 20
	b, h := bomb{batch.CompressionZstd, 512 << 10, limit}.make(t) // 100 KiB would be one segment: window = content
	var zh zstd.Header
	if err := zh.Decode(b[batch.HeaderSize:]); err != nil {
		t.Fatal(err)
	}
	if zh.WindowSize <= limit {
		t.Fatalf("the frame's window is %d bytes: the test needs one above %d", zh.WindowSize, limit)
	}
	if _, err := batch.ValidateProducedLimit(b, limit); err != nil {
		t.Fatal(err)
	}
	plain, err := batch.DecompressLimit(nil, b, h, limit)
	if err != nil || len(plain) < 512<<10 {
		t.Fatalf("%d bytes, %v", len(plain), err)
	}
	for _, to := range allCodecs[:4] {
		if _, err := batch.RecompressLimit(nil, b, h, to, limit); err != nil {
			t.Fatalf("to codec %d: %v", to, err)
		}
	}
	big, bh := bomb{batch.CompressionZstd, 2 << 20, limit}.make(t)
	if _, err := batch.DecompressLimit(nil, big, bh, limit); !errors.Is(err, batch.ErrTooLarge) {
		t.Fatalf("2 MiB under a limit of 1 MiB: %v", err)
	}
}
