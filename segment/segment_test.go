package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// t0 is the creation time the tests give segments, and the first record
// timestamp (ms) of most batches.
var t0 = time.UnixMilli(1_700_000_000_000)

// tiny makes index entries frequent, so that lookups, recovery and the load
// path all go through index entries rather than a scan from position 0.
var tiny = Config{IndexIntervalBytes: 200, MaxIndexBytes: 4096}

// fss runs a test over the operating system's file system (mmap'd indexes)
// and the in-memory one (heap-copy indexes).
func fss(t *testing.T, f func(t *testing.T, fs vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { f(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		fs := vfs.NewMem()
		require.NoError(t, fs.MkdirAll("/seg", 0o755))
		f(t, fs, "/seg")
	})
}

// seed returns STRATA_SEED if set, else a fresh seed, and logs it.
func seed(t testing.TB) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("STRATA_SEED"); v != "" {
		var err error
		s, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (replay with STRATA_SEED=%d)", s, s)
	return s
}

// rec is a record of a test batch.
type rec struct {
	ts    int64
	value []byte
}

// encode builds a batch of recs with base offset base.
func encode(base int64, recs []rec) []byte {
	var bd batch.Builder
	if len(recs) > 0 {
		bd.Reset(recs[0].ts)
	} else {
		bd.Reset(0)
	}
	for i, r := range recs {
		bd.Append(r.ts, []byte("k"+strconv.Itoa(i)), r.value, nil)
	}
	b := bytes.Clone(bd.Bytes())
	batch.SetBaseOffset(b, base)
	return b
}

// simple returns n records with timestamps ts, ts+1, ... and values of size
// vsize.
func simple(n int, ts int64, vsize int) []rec {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{ts: ts + int64(i), value: bytes.Repeat([]byte{byte('a' + i%26)}, vsize)}
	}
	return recs
}

// written is a batch as appended: its position in the .log, header and bytes.
type written struct {
	pos int64
	h   batch.Header
	b   []byte
}

// appendB gives b the segment's next offset, appends it and returns it as
// written.
func appendB(t testing.TB, s *Segment, b []byte) written {
	t.Helper()
	batch.SetBaseOffset(b, s.NextOffset())
	h, err := batch.Validate(b)
	require.NoError(t, err)
	pos := s.Size()
	require.NoError(t, s.Append(b, h))
	return written{pos: pos, h: h, b: b}
}

func appendRecs(t testing.TB, s *Segment, recs []rec) written {
	t.Helper()
	return appendB(t, s, encode(0, recs))
}

// fill appends n batches of 1 to 20 records of up to 300 bytes with
// timestamps that mostly rise and sometimes fall back.
func fill(t testing.TB, s *Segment, rng *rand.Rand, n int, ts *int64) []written {
	t.Helper()
	var ws []written
	for range n {
		recs := make([]rec, 1+rng.IntN(20))
		for i := range recs {
			*ts += int64(rng.IntN(5))
			v := make([]byte, rng.IntN(300))
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			recs[i] = rec{ts: *ts - int64(rng.IntN(3)), value: v}
		}
		ws = append(ws, appendRecs(t, s, recs))
	}
	return ws
}

func logBytes(ws []written) []byte {
	var out []byte
	for _, w := range ws {
		out = append(out, w.b...)
	}
	return out
}

func create(t testing.TB, fs vfs.FS, dir string, base int64, cfg Config) *Segment {
	t.Helper()
	s, err := Create(fs, dir, base, cfg, t0)
	require.NoError(t, err)
	return s
}

func open(t testing.TB, fs vfs.FS, dir string, base int64, cfg Config, recover bool) (*Segment, int64) {
	t.Helper()
	s, truncated, err := Open(fs, dir, base, cfg, recover, 0, t0)
	require.NoError(t, err)
	return s, truncated
}

// readAll reads the segment from its base offset to its end, batch run by
// batch run, checks that every batch is whole, valid and after the one
// before, and returns the bytes.
func readAll(t testing.TB, s *Segment, maxBytes int) []byte {
	t.Helper()
	var out []byte
	off, next := s.BaseOffset(), int64(-1)
	for {
		raw, rnext, err := s.Read(off, maxBytes, NoBound, true)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		require.NotEmpty(t, raw)
		require.NoError(t, batch.Batches(raw, func(b []byte, h batch.Header) error {
			if h.BaseOffset < next {
				return fmt.Errorf("batch at %d after one that ends at %d", h.BaseOffset, next)
			}
			next = h.NextOffset()
			return nil
		}))
		require.Equal(t, next, rnext, "Read's next offset")
		out = append(out, raw...)
		off = next
	}
}

// state is what a reopened segment must reproduce.
type state struct {
	Next, Size, MaxTs int64
	Offsets           []index.OffsetEntry
	Times             []index.TimeEntry
}

// entries returns the segment's index entries.
func entries(s *Segment) ([]index.OffsetEntry, []index.TimeEntry) {
	if _, _, err := s.indexes(s.f.Load()); err != nil { // a sealed one's open lazily
		panic(err)
	}
	var oes []index.OffsetEntry
	for i := range s.f.Load().oi.Load().Entries() {
		e, _ := s.f.Load().oi.Load().Entry(i)
		oes = append(oes, e)
	}
	var tes []index.TimeEntry
	for i := range s.f.Load().ti.Load().Entries() {
		e, _ := s.f.Load().ti.Load().Entry(i)
		tes = append(tes, e)
	}
	return oes, tes
}

func stateOf(s *Segment) state {
	oes, tes := entries(s)
	return state{Next: s.NextOffset(), Size: s.Size(), MaxTs: s.MaxTimestamp(), Offsets: oes, Times: tes}
}

func fileSize(t testing.TB, fs vfs.FS, name string) int64 {
	t.Helper()
	fi, err := fs.Stat(name)
	require.NoError(t, err)
	return fi.Size()
}

// modify opens a segment file and applies fn to it.
func modify(t testing.TB, fs vfs.FS, name string, fn func(f vfs.File)) {
	t.Helper()
	f, err := fs.OpenReadWrite(name)
	require.NoError(t, err)
	fn(f)
	require.NoError(t, f.Close())
}

func writeAt(t testing.TB, f vfs.File, b []byte, off int64) {
	t.Helper()
	_, err := f.WriteAt(b, off)
	require.NoError(t, err)
}

func TestName(t *testing.T) {
	require.Equal(t, "00000000000000000000.log", Name(0, ".log"))
	require.Equal(t, "00000000000000001234.index", Name(1234, ".index"))
	require.Equal(t, "09223372036854775807.timeindex", Name(math.MaxInt64, ".timeindex"))
}

func TestCreateEmpty(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 1000, tiny)
		defer s.Close()
		require.Equal(t, int64(1000), s.BaseOffset())
		require.Equal(t, int64(1000), s.NextOffset())
		require.Zero(t, s.Size())
		require.Equal(t, int64(-1), s.MaxTimestamp())
		require.Equal(t, dir, s.Dir())
		for _, ext := range []string{".log", ".index", ".timeindex"} {
			_, err := fs.Stat(filepath.Join(dir, Name(1000, ext)))
			require.NoError(t, err, ext)
		}
		// The indexes are preallocated to MaxIndexBytes.
		require.Equal(t, int64(4096), fileSize(t, fs, filepath.Join(dir, Name(1000, ".index"))))
		require.Equal(t, int64(4092), fileSize(t, fs, filepath.Join(dir, Name(1000, ".timeindex"))))
		_, _, err := s.Locate(1000)
		require.ErrorIs(t, err, io.EOF)
		_, _, err = s.Read(1000, 1<<20, NoBound, true)
		require.ErrorIs(t, err, io.EOF)
		_, _, _, err = s.Range(1000, 1<<20, NoBound, true)
		require.ErrorIs(t, err, io.EOF)
		_, ok, err := s.OffsetForTime(0, 1000)
		require.NoError(t, err)
		require.False(t, ok)
	})
}

func TestCreateRemovesStaleIndexes(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		fill(t, s, rand.New(rand.NewPCG(1, 2)), 30, new(int64))
		require.NotZero(t, s.f.Load().oi.Load().Entries())
		require.NoError(t, s.Close())
		// A new life of the same base offset starts with empty indexes.
		s = create(t, fs, dir, 0, tiny)
		defer s.Close()
		require.Zero(t, s.f.Load().oi.Load().Entries())
		require.Zero(t, s.f.Load().ti.Load().Entries())
		require.Zero(t, s.Size())
		require.Zero(t, fileSize(t, fs, filepath.Join(dir, Name(0, ".log"))))
	})
}

func TestAppendReadLocate(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const base = 500
		s := create(t, fs, dir, base, tiny)
		defer s.Close()
		ws := fill(t, s, rand.New(rand.NewPCG(3, 4)), 60, new(int64))
		last := ws[len(ws)-1].h
		require.Equal(t, last.NextOffset(), s.NextOffset())
		require.Equal(t, ws[len(ws)-1].pos+int64(len(ws[len(ws)-1].b)), s.Size())
		require.Equal(t, int64(len(logBytes(ws))), fileSize(t, fs, filepath.Join(dir, Name(base, ".log"))))
		require.Greater(t, s.f.Load().oi.Load().Entries(), 10, "the index interval is small: many entries")

		// Every offset is found in its batch, by Locate, Read and Range.
		for i, w := range ws {
			for off := w.h.BaseOffset; off <= w.h.LastOffset(); off++ {
				pos, h, err := s.Locate(off)
				require.NoError(t, err)
				require.Equal(t, w.pos, pos, "offset %d", off)
				require.Equal(t, w.h, h)

				raw, next, err := s.Read(off, 1, NoBound, true) // at least one: the whole batch
				require.NoError(t, err)
				require.Equal(t, w.b, raw)
				require.Equal(t, w.h.NextOffset(), next)
				raw, next, err = s.Read(off, 1, NoBound, false) // does not fit: nothing
				require.NoError(t, err)
				require.Empty(t, raw)
				require.Equal(t, off, next)

				// Up to maxBytes: exactly the whole batches that fit.
				want := w.b
				if i+1 < len(ws) {
					want = append(append([]byte(nil), w.b...), ws[i+1].b...)
				}
				wantNext := w.h.NextOffset()
				if i+1 < len(ws) {
					wantNext = ws[i+1].h.NextOffset()
				}
				raw, next, err = s.Read(off, len(want)+len(ws[min(i+2, len(ws)-1)].b)-1, NoBound, false)
				require.NoError(t, err)
				require.Equal(t, want, raw)
				require.Equal(t, wantNext, next)

				p, n, next, err := s.Range(off, len(want), NoBound, true)
				require.NoError(t, err)
				require.Equal(t, w.pos, p)
				require.Equal(t, int64(len(want)), n)
				require.Equal(t, wantNext, next)
			}
		}
		// Below the base offset: the first batch; past the end: EOF.
		pos, h, err := s.Locate(0)
		require.NoError(t, err)
		require.Zero(t, pos)
		require.Equal(t, ws[0].h, h)
		_, _, err = s.Locate(s.NextOffset())
		require.ErrorIs(t, err, io.EOF)
		_, _, err = s.Read(s.NextOffset(), 1<<20, NoBound, true)
		require.ErrorIs(t, err, io.EOF)

		// Range with a small maxBytes still covers one batch.
		p, n, next, err := s.Range(base, 1, NoBound, true)
		require.NoError(t, err)
		require.Zero(t, p)
		require.Equal(t, int64(len(ws[0].b)), n)
		require.Equal(t, ws[0].h.NextOffset(), next)
		// A Range over everything matches the file.
		p, n, next, err = s.Range(base, math.MaxInt32, NoBound, true)
		require.NoError(t, err)
		require.Zero(t, p)
		require.Equal(t, s.Size(), n)
		require.Equal(t, s.NextOffset(), next)
		buf := make([]byte, n)
		_, err = s.File().ReadAt(buf, p)
		require.NoError(t, err)
		require.Equal(t, logBytes(ws), buf)

		for _, maxBytes := range []int{1, 100, 4096, 1 << 20} {
			require.Equal(t, logBytes(ws), readAll(t, s, maxBytes), "maxBytes %d", maxBytes)
		}
	})
}

func TestAppendOffsetMismatch(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 10, tiny)
		defer s.Close()
		appendRecs(t, s, simple(3, 1, 10))
		for _, base := range []int64{0, 12, 14} {
			b := encode(base, simple(1, 5, 10))
			h, err := batch.Validate(b)
			require.NoError(t, err)
			require.ErrorIs(t, s.Append(b, h), ErrOffsetMismatch)
		}
		require.Equal(t, int64(13), s.NextOffset())
		w := appendRecs(t, s, simple(2, 5, 10))
		require.Equal(t, int64(13), w.h.BaseOffset)
		require.Equal(t, int64(15), s.NextOffset())
	})
}

func TestAppendWriteErrorChangesNothing(t *testing.T) {
	var fail bool
	fs := vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, path string) error {
		if fail && op == vfs.OpWrite && filepath.Ext(path) == ".log" {
			return vfs.ErrInjected
		}
		return nil
	})
	require.NoError(t, fs.MkdirAll("/seg", 0o755))
	s := create(t, fs, "/seg", 0, tiny)
	defer s.Close()
	ws := fill(t, s, rand.New(rand.NewPCG(5, 6)), 10, new(int64))
	before := stateOf(s)
	fail = true
	b := encode(s.NextOffset(), simple(5, 100, 100))
	h, err := batch.Validate(b)
	require.NoError(t, err)
	require.ErrorIs(t, s.Append(b, h), vfs.ErrInjected)
	require.Equal(t, before, stateOf(s))
	fail = false
	w := appendB(t, s, b)
	require.Equal(t, before.Size, w.pos)
	require.Equal(t, append(logBytes(ws), b...), readAll(t, s, 1<<20))
}

// TestOffsetForTime checks OffsetForTime against a scan of every record:
// the first offset at or after from whose timestamp is at least ts, with
// timestamps that go up and down between and within batches.
func TestOffsetForTime(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const base = 77
		s := create(t, fs, dir, base, tiny)
		defer s.Close()
		rng := rand.New(rand.NewPCG(7, 8))
		type r struct{ off, ts int64 }
		var all []r
		ts := int64(1000)
		for range 80 {
			recs := make([]rec, 1+rng.IntN(8))
			for i := range recs {
				ts += int64(rng.IntN(7)) - 2
				recs[i] = rec{ts: ts, value: make([]byte, rng.IntN(100))}
			}
			w := appendRecs(t, s, recs)
			for i, rc := range recs {
				all = append(all, r{w.h.BaseOffset + int64(i), rc.ts})
			}
		}
		require.Greater(t, s.f.Load().ti.Load().Entries(), 5)
		maxTs := int64(math.MinInt64)
		for _, x := range all {
			maxTs = max(maxTs, x.ts)
		}
		require.Equal(t, maxTs, s.MaxTimestamp())
		check := func() {
			for _, from := range []int64{0, base, base + 13, base + 200, s.NextOffset() - 1, s.NextOffset()} {
				for target := int64(900); target <= maxTs+2; target++ {
					want, wantOK := int64(0), false
					for _, x := range all {
						if x.off >= from && x.ts >= target {
							want, wantOK = x.off, true
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
		check()
		require.NoError(t, s.Seal())
		check()
	})
}

func TestShouldRoll(t *testing.T) {
	const day = 24 * time.Hour
	never := func(s *Segment, w written) bool {
		return s.ShouldRoll(len(w.b), w.h.LastOffset(), w.h.MaxTimestamp, math.MaxInt64, 1000*day, t0)
	}
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		t.Run("empty never rolls", func(t *testing.T) {
			s := create(t, fs, dir, 0, Config{MaxIndexBytes: 24})
			defer s.Close()
			// Not for size, age, or offsets.
			require.False(t, s.ShouldRoll(1<<30, math.MaxInt64-1, math.MaxInt64, 1, 0, t0.Add(1000*day)))
		})

		t.Run("size", func(t *testing.T) {
			s := create(t, fs, dir, 100, Config{})
			defer s.Close()
			w := appendRecs(t, s, simple(10, t0.UnixMilli(), 50))
			size := s.Size()
			require.False(t, s.ShouldRoll(100, 200, w.h.MaxTimestamp, size+100, day, t0))
			require.True(t, s.ShouldRoll(101, 200, w.h.MaxTimestamp, size+100, day, t0))
		})

		t.Run("offset index full", func(t *testing.T) {
			// 40 bytes: 5 offset entries, 3 time entries (one kept for the
			// roll). Equal timestamps add one time entry only, so the
			// offset index fills first. Interval 1 byte: an entry for
			// every batch after the first.
			s := create(t, fs, dir, 200, Config{IndexIntervalBytes: 1, MaxIndexBytes: 40})
			defer s.Close()
			for i := range 6 {
				w := appendRecs(t, s, []rec{{ts: 5, value: []byte("v")}})
				if i < 5 {
					require.False(t, never(s, w), "batch %d", i)
				}
			}
			require.True(t, s.f.Load().oi.Load().IsFull())
			require.False(t, s.f.Load().ti.Load().IsFull())
			require.True(t, never(s, written{b: encode(0, simple(1, 5, 1)), h: batch.Header{}}))
		})

		t.Run("time index full", func(t *testing.T) {
			s := create(t, fs, dir, 300, Config{IndexIntervalBytes: 1, MaxIndexBytes: 40})
			defer s.Close()
			var w written
			for i := range 3 {
				w = appendRecs(t, s, []rec{{ts: int64(10 + i), value: []byte("v")}})
				if i < 2 {
					require.False(t, never(s, w), "batch %d", i)
				}
			}
			require.True(t, s.f.Load().ti.Load().IsFull())
			require.False(t, s.f.Load().oi.Load().IsFull())
			require.True(t, never(s, w))
		})

		t.Run("time by record timestamps", func(t *testing.T) {
			s := create(t, fs, dir, 400, Config{})
			defer s.Close()
			first := t0.UnixMilli() - 10_000
			appendRecs(t, s, simple(3, first, 10)) // max timestamp first+2
			appendRecs(t, s, simple(3, first+5000, 10))
			roll := first + 2 + day.Milliseconds()
			// The age is the new batch's max timestamp minus the first
			// batch's; the wall clock and the creation time do not count.
			require.False(t, s.ShouldRoll(10, 500, roll, math.MaxInt64, day, t0.Add(30*day)))
			require.True(t, s.ShouldRoll(10, 500, roll+1, math.MaxInt64, day, t0))
		})

		t.Run("time by creation when there are no timestamps", func(t *testing.T) {
			s := create(t, fs, dir, 500, Config{})
			defer s.Close()
			appendRecs(t, s, []rec{{ts: -1, value: []byte("no timestamp")}})
			require.Equal(t, int64(-1), s.MaxTimestamp())
			require.False(t, s.ShouldRoll(10, 600, -1, math.MaxInt64, day, t0.Add(day)))
			require.True(t, s.ShouldRoll(10, 600, -1, math.MaxInt64, day, t0.Add(day+time.Nanosecond)))
		})

		t.Run("relative offset overflow", func(t *testing.T) {
			const base = 600
			s := create(t, fs, dir, base, Config{IndexIntervalBytes: 1})
			defer s.Close()
			// A batch that covers almost 2^31 offsets with one record
			// (what compaction leaves), so the next batch starts far past
			// the base offset.
			gap := withLastOffsetDelta(t, encode(base, simple(1, 1, 10)), math.MaxInt32-10)
			appendB(t, s, gap)
			require.Equal(t, int64(base+math.MaxInt32-9), s.NextOffset())
			for n := 1; n <= 12; n++ {
				b := encode(s.NextOffset(), simple(n, 2, 10))
				h, err := batch.Validate(b)
				require.NoError(t, err)
				want := h.LastOffset()-base > math.MaxInt32
				require.Equal(t, want, s.ShouldRoll(len(b), h.LastOffset(), h.MaxTimestamp, math.MaxInt64, day, t0), "%d records", n)
				require.Equal(t, n > 10, want)
			}
			// The largest batch that fits is appended and indexed.
			w := appendRecs(t, s, simple(10, 2, 10))
			require.Equal(t, int64(base+math.MaxInt32), w.h.LastOffset())
			pos, h, err := s.Locate(base + math.MaxInt32)
			require.NoError(t, err)
			require.Equal(t, w.pos, pos)
			require.Equal(t, w.h, h)
			require.Equal(t, index.OffsetEntry{Offset: base + math.MaxInt32, Position: w.pos}, s.f.Load().oi.Load().LastEntry())
		})
	})
}

// withLastOffsetDelta rewrites the last offset delta of a batch and its CRC.
func withLastOffsetDelta(t testing.TB, b []byte, delta int32) []byte {
	t.Helper()
	binary.BigEndian.PutUint32(b[23:], uint32(delta))
	fixCRC(b)
	_, err := batch.Validate(b)
	require.NoError(t, err)
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fixCRC recomputes the CRC of the whole batch b.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
}

func TestSeal(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		cfg := Config{IndexIntervalBytes: 1000, MaxIndexBytes: 4096}
		s := create(t, fs, dir, 0, cfg)
		rng := rand.New(rand.NewPCG(9, 10))
		ts := int64(100)
		fill(t, s, rng, 30, &ts)
		// Append until a batch gets an index entry; the next batch (small)
		// does not: it raises the largest timestamp after the last time
		// index entry, so only Seal puts it in the time index.
		for n := s.f.Load().oi.Load().Entries(); s.f.Load().oi.Load().Entries() == n; {
			appendRecs(t, s, simple(1, ts, 300))
		}
		_, tesBefore := entries(s)
		w := appendRecs(t, s, simple(3, ts+1000, 10))
		appendRecs(t, s, simple(2, 50, 10)) // older records do not move the max
		require.Equal(t, w.h.MaxTimestamp, s.MaxTimestamp())
		_, tes := entries(s)
		require.Equal(t, tesBefore, tes, "not an index point")
		require.NoError(t, s.Seal())

		oes, tes := entries(s)
		require.Len(t, tes, len(tesBefore)+1)
		require.Equal(t, index.TimeEntry{Timestamp: w.h.MaxTimestamp, Offset: w.h.LastOffset()}, tes[len(tes)-1])
		require.Equal(t, int64(len(oes)*8), fileSize(t, fs, filepath.Join(dir, Name(0, ".index"))))
		require.Equal(t, int64(len(tes)*12), fileSize(t, fs, filepath.Join(dir, Name(0, ".timeindex"))))
		// Sealing again adds nothing.
		require.NoError(t, s.Seal())
		require.Equal(t, stateOf(s).Times, tes)
		// A sealed segment is full: the next batch goes to a new one.
		require.True(t, s.ShouldRoll(1, s.NextOffset(), 0, math.MaxInt64, time.Hour, t0))
		sealed := stateOf(s)
		require.NoError(t, s.Close())

		for _, recover := range []bool{false, true} {
			s, truncated := open(t, fs, dir, 0, cfg, recover)
			require.Zero(t, truncated)
			got := stateOf(s)
			if recover {
				// Recovery rebuilds what the live appends wrote; the
				// final entry is Seal's to add.
				got.Times = append(got.Times, tes[len(tes)-1])
			}
			require.Equal(t, sealed, got, "recover=%v", recover)
			require.NoError(t, s.Close())
		}
	})
}

func TestSealEmpty(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 42, tiny)
		require.NoError(t, s.Seal())
		require.Zero(t, fileSize(t, fs, filepath.Join(dir, Name(42, ".index"))))
		require.Zero(t, fileSize(t, fs, filepath.Join(dir, Name(42, ".timeindex"))))
		require.NoError(t, s.Close())
		s, truncated := open(t, fs, dir, 42, tiny, false)
		defer s.Close()
		require.Zero(t, truncated)
		require.Equal(t, state{Next: 42, MaxTs: -1}, stateOf(s))
	})
}

// TestReopen: after Close, Open without recovery (the load path) and with it
// both give back the segment as it was — next offset, size, largest
// timestamp, index entries, bytes — and appends go on from there.
func TestReopen(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const base = 1 << 40
		rng := rand.New(rand.NewPCG(11, 12))
		s := create(t, fs, dir, base, tiny)
		ts := int64(5000)
		ws := fill(t, s, rng, 50, &ts)
		live := stateOf(s)
		require.Greater(t, len(live.Offsets), 10)
		require.Greater(t, len(live.Times), 3)
		require.NoError(t, s.Close())
		// Close trims the indexes to their entries.
		require.Equal(t, int64(len(live.Offsets)*8), fileSize(t, fs, filepath.Join(dir, Name(base, ".index"))))
		require.Equal(t, int64(len(live.Times)*12), fileSize(t, fs, filepath.Join(dir, Name(base, ".timeindex"))))

		for _, recover := range []bool{false, true, false} {
			s, truncated := open(t, fs, dir, base, tiny, recover)
			require.Zero(t, truncated)
			require.Equal(t, live, stateOf(s), "recover=%v", recover)
			require.Equal(t, logBytes(ws), readAll(t, s, 1000))
			require.NoError(t, s.Close())
		}

		// Reopened as the active segment: appends continue.
		s, _ = open(t, fs, dir, base, tiny, false)
		require.NoError(t, s.ResizeIndexes(tiny.MaxIndexBytes))
		more := fill(t, s, rng, 20, &ts)
		require.Equal(t, more[len(more)-1].h.NextOffset(), s.NextOffset())
		require.Equal(t, live.Size, more[0].pos)
		all := append(append([]written(nil), ws...), more...)
		require.Equal(t, logBytes(all), readAll(t, s, 1<<20))
		after := stateOf(s)
		require.NoError(t, s.Close())
		s, _ = open(t, fs, dir, base, tiny, false)
		require.Equal(t, after, stateOf(s))
		require.NoError(t, s.Close())
	})
}

// TestIndexEntries checks the entries of both indexes against Kafka's rule:
// once more than IndexIntervalBytes of batches were written since the last
// entry, the next batch gets an offset entry (its last offset, its position)
// and, if the largest timestamp rose since the last time entry, a time entry
// (that timestamp, the last offset of the batch that first reached it).
func TestIndexEntries(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		for i, interval := range []int{1, 150, 1000, 5000} {
			base := int64(i * 10_000)
			s := create(t, fs, dir, base, Config{IndexIntervalBytes: interval, MaxIndexBytes: 1 << 16})
			ts := int64(0)
			ws := fill(t, s, rand.New(rand.NewPCG(24, uint64(i))), 80, &ts)

			var want state
			since, maxTs, offOfMax, lastTs := 0, int64(-1), base, int64(-1)
			for _, w := range ws {
				if w.h.MaxTimestamp > maxTs {
					maxTs, offOfMax = w.h.MaxTimestamp, w.h.LastOffset()
				}
				if since > interval {
					want.Offsets = append(want.Offsets, index.OffsetEntry{Offset: w.h.LastOffset(), Position: w.pos})
					if maxTs > lastTs {
						want.Times = append(want.Times, index.TimeEntry{Timestamp: maxTs, Offset: offOfMax})
						lastTs = maxTs
					}
					since = 0
				}
				since += len(w.b)
			}
			want.Next, want.Size, want.MaxTs = s.NextOffset(), s.Size(), maxTs
			require.Equal(t, want, stateOf(s), "interval %d", interval)
			require.NoError(t, s.Close())
		}

		// Batches of exactly the interval: "more than" means every other
		// batch gets an entry.
		b := encode(0, simple(2, 7, 30))
		s := create(t, fs, dir, 1<<20, Config{IndexIntervalBytes: len(b), MaxIndexBytes: 1 << 16})
		defer s.Close()
		var ws []written
		for i := range 9 {
			ws = append(ws, appendRecs(t, s, simple(2, int64(7+i), 30)))
		}
		oes, tes := entries(s)
		require.Equal(t, []index.OffsetEntry{
			{Offset: ws[2].h.LastOffset(), Position: ws[2].pos},
			{Offset: ws[4].h.LastOffset(), Position: ws[4].pos},
			{Offset: ws[6].h.LastOffset(), Position: ws[6].pos},
			{Offset: ws[8].h.LastOffset(), Position: ws[8].pos},
		}, oes)
		require.Len(t, tes, 4)
	})
}

// TestRecoverRebuildsLiveIndexes: indexes rebuilt by Recover are the ones
// the appends wrote, for several index intervals.
func TestRecoverRebuildsLiveIndexes(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		for i, interval := range []int{1, 100, 1000, 4096, 1 << 20} {
			cfg := Config{IndexIntervalBytes: interval, MaxIndexBytes: 1 << 16}
			base := int64(i * 1000)
			s := create(t, fs, dir, base, cfg)
			ts := int64(0)
			ws := fill(t, s, rand.New(rand.NewPCG(13, uint64(i))), 60, &ts)
			live := stateOf(s)
			truncated, err := s.Recover(0)
			require.NoError(t, err)
			require.Zero(t, truncated)
			require.Equal(t, live, stateOf(s), "interval %d", interval)
			require.NoError(t, s.Close())

			s, truncated = open(t, fs, dir, base, cfg, true)
			require.Zero(t, truncated)
			require.Equal(t, live, stateOf(s), "interval %d", interval)
			require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
			require.NoError(t, s.Close())
		}
	})
}

// damage is a way to break batch k of a .log; cut is where recovery must
// truncate.
type damage struct {
	name string
	// apply breaks the file; ws are the batches in it, k the one to break.
	apply func(t testing.TB, f vfs.File, ws []written, k int)
	// last: the damage only makes sense on the last batch (a torn tail).
	last bool
	// after: the damage is after batch k, which survives.
	after bool
	// load: Open without recovery notices it too (a bad tail, where the
	// load path walks).
	load bool
}

var damages = []damage{
	{name: "torn in the length field", last: true, load: true, apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		require.NoError(t, f.Truncate(ws[k].pos+7))
	}},
	{name: "torn in the header", last: true, load: true, apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		require.NoError(t, f.Truncate(ws[k].pos+40))
	}},
	{name: "torn in the records", last: true, load: true, apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		require.NoError(t, f.Truncate(ws[k].pos+int64(len(ws[k].b))-1))
	}},
	{name: "zeros after the end", last: true, after: true, load: true, apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		// What a preallocated or extended file holds past the last write.
		end := ws[k].pos + int64(len(ws[k].b))
		writeAt(t, f, make([]byte, 4096), end)
	}},
	{name: "garbage after the end", last: true, after: true, load: true, apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		end := ws[k].pos + int64(len(ws[k].b))
		writeAt(t, f, bytes.Repeat([]byte{0xa5}, 100), end)
	}},
	{name: "bad crc", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		p := ws[k].pos + int64(len(ws[k].b)) - 1
		writeAt(t, f, []byte{ws[k].b[len(ws[k].b)-1] ^ 0x01}, p)
	}},
	{name: "bad crc in the header", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		writeAt(t, f, []byte{0x7f}, ws[k].pos+36) // max timestamp
	}},
	{name: "bad magic", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		writeAt(t, f, []byte{1}, ws[k].pos+16)
	}},
	{name: "length past the end", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		writeAt(t, f, []byte{0x7f, 0xff, 0xff, 0xf0}, ws[k].pos+8)
	}},
	{name: "length below an empty batch", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		writeAt(t, f, []byte{0, 0, 0, 10}, ws[k].pos+8)
	}},
	{name: "negative length", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		writeAt(t, f, []byte{0xff, 0xff, 0xff, 0xf0}, ws[k].pos+8)
	}},
	{name: "length one short", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(ws[k].b)-12-1))
		writeAt(t, f, l[:], ws[k].pos+8)
	}},
	{name: "offsets going backwards", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		// The base offset is outside the CRC: the batch is intact but
		// repeats the offsets of the one before.
		var o [8]byte
		binary.BigEndian.PutUint64(o[:], uint64(ws[k].h.BaseOffset-1))
		writeAt(t, f, o[:], ws[k].pos)
	}},
	{name: "offset below the base offset", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		writeAt(t, f, make([]byte, 8), ws[k].pos)
	}},
	{name: "offset overflowing the segment", apply: func(t testing.TB, f vfs.File, ws []written, k int) {
		var o [8]byte
		binary.BigEndian.PutUint64(o[:], uint64(ws[k].h.BaseOffset+math.MaxInt32+1))
		writeAt(t, f, o[:], ws[k].pos)
	}},
}

// TestRecoverTruncates breaks one batch of a segment in each of many ways,
// and checks that Open with recovery (and, for a bad tail, without) keeps
// exactly the batches before it, with indexes equal to those of a segment
// that only ever held them, and that appends continue after them.
func TestRecoverTruncates(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const base = 1000
		const n = 40
		rng := rand.New(rand.NewPCG(seed(t), 14))
		for di, d := range damages {
			for _, k := range []int{0, 1, n / 2, n - 1} {
				if d.last && k != n-1 {
					continue
				}
				for _, recover := range []bool{true, false} {
					if !recover && !(d.load && k == n-1) {
						continue
					}
					name := fmt.Sprintf("%s/batch %d/recover=%v", d.name, k, recover)
					sub := filepath.Join(dir, strconv.Itoa(di), strconv.Itoa(k), strconv.FormatBool(recover))
					require.NoError(t, fs.MkdirAll(sub, 0o755))
					ref := filepath.Join(sub, "ref")
					require.NoError(t, fs.MkdirAll(ref, 0o755))

					// The damaged segment, and a reference that holds the
					// batches that survive only.
					s := create(t, fs, sub, base, tiny)
					r := create(t, fs, ref, base, tiny)
					ts := int64(1)
					ws := fill(t, s, rng, n, &ts)
					keep := k
					if d.after {
						keep = k + 1
					}
					cut := int64(len(logBytes(ws[:keep])))
					for _, w := range ws[:keep] {
						b := bytes.Clone(w.b)
						require.NoError(t, r.Append(b, w.h))
					}
					want := stateOf(r)
					require.NoError(t, r.Close())
					require.NoError(t, s.Close())
					logName := filepath.Join(sub, Name(base, ".log"))
					modify(t, fs, logName, func(f vfs.File) { d.apply(t, f, ws, k) })
					damaged := fileSize(t, fs, logName)

					s, truncated := open(t, fs, sub, base, tiny, recover)
					require.Equal(t, damaged-cut, truncated, name)
					require.Equal(t, cut, fileSize(t, fs, logName), name)
					require.Equal(t, want, stateOf(s), name)
					require.Equal(t, logBytes(ws[:keep]), readAll(t, s, 1<<20), name)

					// Appends go on at the next offset, from the cut.
					require.NoError(t, s.ResizeIndexes(tiny.MaxIndexBytes))
					w := appendRecs(t, s, simple(4, ts, 20))
					require.Equal(t, cut, w.pos, name)
					require.Equal(t, want.Next, w.h.BaseOffset, name)
					require.Equal(t, append(logBytes(ws[:keep]), w.b...), readAll(t, s, 1<<20), name)
					require.NoError(t, s.Close())
				}
			}
		}
	})
}

// TestRecoverIntoFullIndexes: a rebuild can need more index entries than
// the appends wrote — after a clean reopen the appends count the interval
// from zero again, and the configuration may have shrunk MaxIndexBytes —
// and must then keep the indexes sparse, not fail the open. The segment
// stays whole and readable, lookups by offset and time stay right, and it
// can be sealed.
func TestRecoverIntoFullIndexes(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		one := len(encode(0, simple(1, 1, 20)))
		// 24 bytes: 3 offset entries, 2 time entries (1 before it is full).
		cfg := Config{IndexIntervalBytes: one + one/2, MaxIndexBytes: 24}
		check := func(t *testing.T, base int64, cfg Config, ws []written) {
			t.Helper()
			s, truncated := open(t, fs, dir, base, cfg, true)
			defer s.Close()
			require.Zero(t, truncated)
			last := ws[len(ws)-1]
			require.Equal(t, last.h.NextOffset(), s.NextOffset())
			require.Equal(t, last.pos+int64(len(last.b)), s.Size())
			require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
			for _, w := range ws {
				pos, h, err := s.Locate(w.h.BaseOffset)
				require.NoError(t, err)
				require.Equal(t, w.pos, pos)
				require.Equal(t, w.h, h)
				off, ok, err := s.OffsetForTime(w.h.MaxTimestamp, base)
				require.NoError(t, err)
				require.True(t, ok)
				require.LessOrEqual(t, off, w.h.LastOffset())
			}
			require.NoError(t, s.Seal())
		}
		for reopenAfter := 1; reopenAfter <= 4; reopenAfter++ {
			t.Run(fmt.Sprintf("reopened after %d batches", reopenAfter), func(t *testing.T) {
				base := int64(reopenAfter * 1000)
				s := create(t, fs, dir, base, cfg)
				var ws []written
				for i := range reopenAfter {
					ws = append(ws, appendRecs(t, s, simple(1, int64(i), 20)))
				}
				require.NoError(t, s.Close())
				s, _ = open(t, fs, dir, base, cfg, false)
				require.NoError(t, s.ResizeIndexes(cfg.MaxIndexBytes))
				for i := reopenAfter; ; i++ {
					b := encode(0, simple(1, int64(i), 20))
					if s.ShouldRoll(len(b), s.NextOffset(), int64(i), math.MaxInt64, time.Hour, t0) {
						break
					}
					ws = append(ws, appendB(t, s, b))
				}
				require.NoError(t, s.Close())
				check(t, base, cfg, ws)
			})
		}
		t.Run("smaller MaxIndexBytes", func(t *testing.T) {
			const base = 99_000
			big := Config{IndexIntervalBytes: 1, MaxIndexBytes: 4096}
			s := create(t, fs, dir, base, big)
			ts := int64(0)
			ws := fill(t, s, rand.New(rand.NewPCG(25, 26)), 40, &ts)
			require.Greater(t, s.f.Load().oi.Load().Entries(), 3)
			require.NoError(t, s.Close())
			check(t, base, Config{IndexIntervalBytes: 1, MaxIndexBytes: 24}, ws)
		})
	})
}

// TestRecoverRelativeOffsetLimit: a batch whose last offset is more than
// 2^31-1 past the segment's base offset does not belong to the segment;
// recovery ends the segment before it. One that ends exactly there is kept.
func TestRecoverRelativeOffsetLimit(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		const base = 5 << 32
		s := create(t, fs, dir, base, tiny)
		appendB(t, s, withLastOffsetDelta(t, encode(0, simple(1, 1, 10)), math.MaxInt32-10))
		keep := appendRecs(t, s, simple(10, 2, 10))
		require.Equal(t, int64(base+math.MaxInt32), keep.h.LastOffset())
		// Append does not check the limit (ShouldRoll would have rolled).
		past := appendRecs(t, s, simple(1, 3, 10))
		require.Equal(t, int64(base+math.MaxInt32+1), past.h.LastOffset())
		require.NoError(t, s.Close())

		s, truncated := open(t, fs, dir, base, tiny, true)
		defer s.Close()
		require.Equal(t, int64(len(past.b)), truncated)
		require.Equal(t, past.pos, s.Size())
		require.Equal(t, keep.h.NextOffset(), s.NextOffset())
	})
}

func TestRecoverMaxBatchBytes(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		small := appendRecs(t, s, simple(2, 1, 10))
		appendRecs(t, s, simple(2, 2, 1000))
		appendRecs(t, s, simple(2, 3, 10))
		require.NoError(t, s.Close())
		// A batch longer than maxBatchBytes is garbage: the log ends before it.
		s, truncated, err := Open(fs, dir, 0, tiny, true, len(small.b)+100, t0)
		require.NoError(t, err)
		defer s.Close()
		require.Equal(t, int64(len(small.b)), s.Size())
		require.Equal(t, small.h.NextOffset(), s.NextOffset())
		require.Equal(t, fileSize(t, fs, filepath.Join(dir, Name(0, ".log"))), s.Size())
		require.Positive(t, truncated)
	})
}

// TestOpenRebuildsBadIndexes: Open without recovery does not trust an index
// that fails its sanity check; it rebuilds both from the .log.
func TestOpenRebuildsBadIndexes(t *testing.T) {
	cases := []struct {
		name string
		ext  string
		fn   func(t testing.TB, f vfs.File, size int64)
	}{
		{"index size not a multiple of 8", ".index", func(t testing.TB, f vfs.File, size int64) {
			require.NoError(t, f.Truncate(size-3))
		}},
		{"index entries out of order", ".index", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0xff, 0xff, 0, 0, 0, 0, 0, 0}, 0)
		}},
		{"index position past the log", ".index", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0x7f, 0xff, 0xff, 0xff}, size-4)
		}},
		{"index zero tail (preallocated, unclean)", ".index", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, make([]byte, 800), size)
		}},
		{"time index size not a multiple of 12", ".timeindex", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{1, 2, 3, 4, 5}, size)
		}},
		{"time index timestamps out of order", ".timeindex", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0x7f, 0, 0, 0, 0, 0, 0, 0}, 0)
		}},
		{"time index offset past the end", ".timeindex", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0x7f, 0xff, 0xff, 0xff}, size-4)
		}},
		{"time index negative timestamp", ".timeindex", func(t testing.TB, f vfs.File, size int64) {
			writeAt(t, f, []byte{0xff}, size-12)
		}},
	}
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		for i, c := range cases {
			base := int64(i) * 10_000
			s := create(t, fs, dir, base, tiny)
			ts := int64(0)
			ws := fill(t, s, rand.New(rand.NewPCG(15, uint64(i))), 40, &ts)
			live := stateOf(s)
			require.NoError(t, s.Close())
			name := filepath.Join(dir, Name(base, c.ext))
			modify(t, fs, name, func(f vfs.File) { c.fn(t, f, fileSize(t, fs, name)) })

			s, truncated := open(t, fs, dir, base, tiny, false)
			require.Zero(t, truncated, c.name)
			require.Equal(t, live, stateOf(s), c.name)
			require.Equal(t, logBytes(ws), readAll(t, s, 1<<20), c.name)
			require.NoError(t, s.Close())
		}
	})
}

// TestOpenWithoutIndexFiles: index files that are missing are created; the
// segment's state still comes from the .log.
func TestOpenWithoutIndexFiles(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		ts := int64(0)
		ws := fill(t, s, rand.New(rand.NewPCG(16, 17)), 40, &ts)
		live := stateOf(s)
		require.NoError(t, s.Close())
		require.NoError(t, fs.Remove(filepath.Join(dir, Name(0, ".index"))))
		require.NoError(t, fs.Remove(filepath.Join(dir, Name(0, ".timeindex"))))
		for _, recover := range []bool{false, true} {
			s, truncated := open(t, fs, dir, 0, tiny, recover)
			require.Zero(t, truncated)
			require.Equal(t, live.Next, s.NextOffset())
			require.Equal(t, live.Size, s.Size())
			require.Equal(t, live.MaxTs, s.MaxTimestamp())
			if recover {
				require.Equal(t, live, stateOf(s))
			}
			require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
			require.NoError(t, s.Close())
		}
	})
}

func TestOpenMissingLog(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		// OpenReadWrite creates a missing .log: an empty segment.
		s, truncated, err := Open(fs, dir, 7, tiny, false, 0, t0)
		require.NoError(t, err)
		require.Zero(t, truncated)
		require.Equal(t, state{Next: 7, MaxTs: -1}, stateOf(s))
		require.NoError(t, s.Close())
		// A directory that does not exist is an error.
		_, _, err = Open(fs, filepath.Join(dir, "nope"), 7, tiny, true, 0, t0)
		require.ErrorIs(t, err, iofs.ErrNotExist)
	})
}

// TestAcquireReleaseDelete: a reader that holds a reference keeps reading a
// deleted segment until it releases it; then the files are closed.
func TestAcquireReleaseDelete(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		ts := int64(0)
		ws := fill(t, s, rand.New(rand.NewPCG(18, 19)), 30, &ts)
		require.True(t, s.Acquire())
		require.True(t, s.Acquire())
		require.NoError(t, s.Delete())
		for _, ext := range []string{".log", ".index", ".timeindex"} {
			_, err := fs.Stat(filepath.Join(dir, Name(0, ext)))
			require.ErrorIs(t, err, iofs.ErrNotExist, ext)
		}
		b := encode(s.NextOffset(), simple(1, 1, 1))
		h, _ := batch.Validate(b)
		require.ErrorIs(t, s.Append(b, h), ErrClosed)
		require.ErrorIs(t, s.Flush(), ErrClosed)

		// Both readers still read everything, through the indexes.
		require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
		mid := ws[15]
		pos, h, err := s.Locate(mid.h.LastOffset())
		require.NoError(t, err)
		require.Equal(t, mid.pos, pos)
		require.Equal(t, mid.h, h)
		off, ok, err := s.OffsetForTime(mid.h.MaxTimestamp, 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.LessOrEqual(t, off, mid.h.LastOffset())
		s.Release()
		require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
		s.Release()

		// The last reference is gone: the files are closed.
		require.False(t, s.Acquire())
		_, _, err = s.Read(0, 1<<20, NoBound, true)
		require.Error(t, err)
		require.NoError(t, s.Close(), "a second close is a no-op")
	})
}

func TestCloseWithoutReaders(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		appendRecs(t, s, simple(3, 1, 10))
		require.NoError(t, s.Close())
		require.False(t, s.Acquire())
		require.NoError(t, s.Close())
		require.NoError(t, s.Delete(), "delete after close removes the files")
		_, err := fs.Stat(filepath.Join(dir, Name(0, ".log")))
		require.ErrorIs(t, err, iofs.ErrNotExist)
	})
}

// TestFlushSurvivesCrash: what Sync and Flush made durable survives a crash
// of the in-memory file system; the indexes rebuilt by recovery match.
func TestFlushSurvivesCrash(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/seg", 0o755))
	s := create(t, fs, "/seg", 0, tiny)
	require.NoError(t, fs.SyncDir("/seg"))
	ts := int64(0)
	rng := rand.New(rand.NewPCG(20, 21))
	ws := fill(t, s, rng, 30, &ts)
	require.NoError(t, s.Sync())
	synced := stateOf(s)
	fill(t, s, rng, 10, &ts) // not synced
	crashed := fs.CrashClone()
	require.NoError(t, s.Close())

	r, _ := open(t, crashed, "/seg", 0, tiny, true)
	defer r.Close()
	require.Equal(t, synced, stateOf(r))
	require.Equal(t, logBytes(ws), readAll(t, r, 1<<20))
}

// TestConcurrentReaders: readers that run while batches are appended never
// see half a batch, and see every batch once it is published.
func TestConcurrentReaders(t *testing.T) {
	leaktest.Check(t)
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, Config{IndexIntervalBytes: 300, MaxIndexBytes: 1 << 16})
		defer s.Close()
		const batches = 300
		done := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for r := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					off := s.NextOffset()
					if r > 0 {
						off /= 2
					}
					raw, _, err := s.Read(off, 4096, NoBound, true)
					if errors.Is(err, io.EOF) {
						continue
					}
					if err == nil {
						err = batch.Batches(raw, func([]byte, batch.Header) error { return nil })
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		rng := rand.New(rand.NewPCG(22, 23))
		ts := int64(0)
		ws := fill(t, s, rng, batches, &ts)
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
	})
}
