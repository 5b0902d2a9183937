package segment

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// Flags of FuzzOpenSegment, one bit each.
const (
	fzIndex     = 1 << iota // write the .index bytes (else the file is missing)
	fzTimeIndex             // write the .timeindex bytes
	fzFixCRC                // recompute the CRC of every framed batch, to get past it
	fzInterval1             // IndexIntervalBytes 1: an entry for nearly every batch
	fzOS                    // the OS file system (mmap'd indexes) instead of MemFS
	fzBase                  // base offset: the first batch's, rather than 0
	fzMaxBatch              // maxBatchBytes 1024, rather than no limit
)

// fuzzSeeds are segments written by the code itself, whole and damaged, with
// their indexes as Close leaves them and as a crash leaves them.
func fuzzSeeds(tb testing.TB) (seeds []fuzzSeed) {
	fs := vfs.NewMem()
	require.NoError(tb, fs.MkdirAll("/s", 0o755))
	for i, cfg := range []Config{{IndexIntervalBytes: 150, MaxIndexBytes: 1024}, {IndexIntervalBytes: 1, MaxIndexBytes: 1024}} {
		base := int64(i * 100)
		s, err := Create(fs, "/s", base, cfg, t0)
		require.NoError(tb, err)
		// Small batches keep the inputs short: the fuzzer mutates and
		// minimizes them faster.
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		var ws []written
		for j := range 12 {
			recs := simple(1+rng.IntN(3), int64(10+j*3-rng.IntN(4)), rng.IntN(20))
			ws = append(ws, appendRecs(tb, s, recs))
		}
		name := func(ext string) string { return filepath.Join("/s", Name(base, ext)) }
		require.NoError(tb, s.Flush())
		// As after a crash: the indexes still preallocated.
		crashIdx, crashTime := mustRead(tb, fs, name(".index")), mustRead(tb, fs, name(".timeindex"))
		require.NoError(tb, s.Close())
		log := logBytes(ws)
		idx, tidx := mustRead(tb, fs, name(".index")), mustRead(tb, fs, name(".timeindex"))
		flags := uint8(fzIndex | fzTimeIndex)
		if base > 0 {
			flags |= fzBase
		}
		flip := bytes.Clone(log)
		flip[ws[5].pos+62] ^= 0x10
		back := bytes.Clone(log)
		binary.BigEndian.PutUint64(back[ws[7].pos:], uint64(ws[6].h.BaseOffset))
		seeds = append(seeds,
			fuzzSeed{log, idx, tidx, flags},
			fuzzSeed{log, crashIdx, crashTime, flags},
			fuzzSeed{log, idx, tidx, flags | fzOS},
			fuzzSeed{log, nil, nil, 0},
			fuzzSeed{log[:len(log)-5], idx, tidx, flags},
			fuzzSeed{log[:ws[3].pos+30], idx, tidx, flags | fzInterval1},
			fuzzSeed{append(bytes.Clone(log), make([]byte, 300)...), crashIdx, crashTime, flags},
			fuzzSeed{flip, idx, tidx, flags},
			fuzzSeed{flip, idx, tidx, flags | fzFixCRC},
			fuzzSeed{back, idx, tidx, flags | fzMaxBatch},
			fuzzSeed{log, tidx, idx, flags}, // swapped indexes
		)
	}
	seeds = append(seeds,
		fuzzSeed{nil, nil, nil, 0},
		fuzzSeed{nil, []byte{0, 0, 0, 1, 0, 0, 0, 9}, []byte{1, 2, 3}, fzIndex | fzTimeIndex},
		fuzzSeed{make([]byte, 61), nil, nil, fzFixCRC},
		fuzzSeed{bytes.Repeat([]byte{0xff}, 200), bytes.Repeat([]byte{0xff}, 16), nil, fzIndex | fzOS},
	)
	return seeds
}

type fuzzSeed struct {
	log, index, timeindex []byte
	flags                 uint8
}

func mustRead(tb testing.TB, fs vfs.FS, name string) []byte {
	tb.Helper()
	b, err := vfs.ReadFile(fs, name)
	require.NoError(tb, err)
	return b
}

// FuzzOpenSegment opens arbitrary bytes as a segment's .log (and .index and
// .timeindex), with and without recovery.
//
// Without recovery (the clean-shutdown path, which trusts a sane index and
// does not check CRCs) Open and reads must not panic, and what Read returns
// is whole batches. With recovery, Open must succeed and keep exactly the
// longest prefix of intact batches whose offsets increase within the
// segment; every Read from the start returns only batches that pass
// batch.Validate, with increasing offsets, and the bytes of that prefix;
// lookups by offset and by time agree with a scan; and the segment reopens,
// with and without recovery, to the same state and indexes.
func FuzzOpenSegment(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.log, s.index, s.timeindex, s.flags)
	}
	f.Fuzz(func(t *testing.T, log, idx, tidx []byte, flags uint8) {
		checkOpenSegment(t, log, idx, tidx, flags)
	})
}

func checkOpenSegment(t *testing.T, log, idx, tidx []byte, flags uint8) {
	log = bytes.Clone(log)
	if flags&fzFixCRC != 0 {
		fixCRCs(log)
	}
	var fs vfs.FS
	var root string
	if flags&fzOS != 0 {
		fs, root = vfs.Default, t.TempDir()
	} else {
		m := vfs.NewMem()
		fs, root = m, "/r"
	}
	base := int64(0)
	if flags&fzBase != 0 && len(log) >= 8 {
		if b := int64(binary.BigEndian.Uint64(log)); b >= 0 && b < math.MaxInt64/2 {
			base = b
		}
	}
	maxBatch := 0
	if flags&fzMaxBatch != 0 {
		maxBatch = 1024
	}
	cfg := Config{IndexIntervalBytes: 4096, MaxIndexBytes: 12 * (len(log)/batch.HeaderSize + 4)}
	if flags&fzInterval1 != 0 {
		cfg.IndexIntervalBytes = 1
	}
	put := func(dir string) {
		require.NoError(t, fs.MkdirAll(dir, 0o755))
		write := func(ext string, b []byte) {
			f, err := fs.Create(filepath.Join(dir, Name(base, ext)))
			require.NoError(t, err)
			_, err = f.Write(b)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		write(".log", log)
		if flags&fzIndex != 0 {
			write(".index", idx)
		}
		if flags&fzTimeIndex != 0 {
			write(".timeindex", tidx)
		}
	}

	// Without recovery: no panic; reads return whole batches or errors.
	dirA := filepath.Join(root, "a")
	put(dirA)
	s, _, err := Open(fs, dirA, base, cfg, false, maxBatch, t0)
	require.NoError(t, err)
	off := base
	for range len(log)/batch.HeaderSize + 2 {
		raw, next, err := s.Read(off, 1000, NoBound, true)
		if err != nil || next <= off {
			break
		}
		n := 0
		for n < len(raw) {
			size, err := batch.PeekSize(raw[n:])
			require.NoError(t, err)
			n += size
		}
		require.Equal(t, len(raw), n, "whole batches")
		// Range, for a zero-copy send: within the file, whatever the
		// indexes say.
		if pos, length, _, err := s.Range(off, 1000, next, true); err == nil {
			require.GreaterOrEqual(t, pos, int64(0))
			require.GreaterOrEqual(t, length, int64(0))
			require.LessOrEqual(t, pos+length, s.Size())
		}
		off = next
	}
	_, _, _ = s.OffsetForTime(0, base)
	require.NoError(t, s.Close())

	// With recovery: the longest valid prefix, and nothing else.
	dirB := filepath.Join(root, "b")
	put(dirB)
	s, truncated, err := Open(fs, dirB, base, cfg, true, maxBatch, t0)
	require.NoError(t, err)
	want := validPrefix(log, base, maxBatch)
	require.Equal(t, want.size, s.Size())
	require.Equal(t, int64(len(log))-want.size, truncated)
	require.Equal(t, want.size, fileSize(t, fs, filepath.Join(dirB, Name(base, ".log"))))
	require.Equal(t, want.next, s.NextOffset())
	require.Equal(t, want.maxTs, s.MaxTimestamp())
	require.True(t, bytes.Equal(log[:want.size], readAll(t, s, 1000)), "read everything in small steps")
	require.True(t, bytes.Equal(log[:want.size], readAll(t, s, 1<<20)), "read everything")
	for i, h := range want.batches {
		pos, got, err := s.Locate(h.BaseOffset)
		if err != nil || pos != want.positions[i] || got != h {
			t.Fatalf("Locate(%d) = %d, %+v, %v; want %d, %+v", h.BaseOffset, pos, got, err, want.positions[i], h)
		}
	}
	checkOffsetForTime(t, s, want)
	recovered := stateOf(s)
	require.NoError(t, s.Close())

	// Recovered, the segment reopens as it was, by either path.
	for _, recover := range []bool{false, true} {
		s, truncated, err := Open(fs, dirB, base, cfg, recover, maxBatch, t0)
		require.NoError(t, err)
		require.Zero(t, truncated)
		require.Equal(t, recovered, stateOf(s), "recover=%v", recover)
		require.NoError(t, s.Close())
	}
}

// prefix is what recovery must keep of a .log.
type prefix struct {
	size, next, maxTs int64
	batches           []batch.Header
	positions         []int64
	records           []tsOffset
}

type tsOffset struct{ off, ts int64 }

// validPrefix is the model of recovery: batches are kept from the start of
// the file while each is whole, no larger than maxBatch (if > 0), intact
// (batch.Validate), starts at or after the offset that follows the one
// before (the segment's base offset for the first) and ends within 2^31-1
// of the base offset.
func validPrefix(b []byte, base int64, maxBatch int) prefix {
	p := prefix{next: base, maxTs: -1}
	for int(p.size) < len(b) {
		rest := b[p.size:]
		n, err := batch.PeekSize(rest)
		if err != nil || n > len(rest) || (maxBatch > 0 && n > maxBatch) {
			break
		}
		h, err := batch.Validate(rest[:n])
		if err != nil || h.BaseOffset < p.next || h.LastOffset()-base > math.MaxInt32 {
			break
		}
		_, err = batch.Decode(rest[:n], func(r *batch.Record) error {
			p.records = append(p.records, tsOffset{r.Offset, r.Timestamp})
			return nil
		})
		if err != nil {
			panic(err) // Validate passed
		}
		p.batches = append(p.batches, h)
		p.positions = append(p.positions, p.size)
		p.maxTs = max(p.maxTs, h.MaxTimestamp)
		p.next = h.NextOffset()
		p.size += int64(n)
	}
	return p
}

// checkOffsetForTime compares OffsetForTime with a scan of the records, for
// a few timestamps around the records'.
func checkOffsetForTime(t *testing.T, s *Segment, p prefix) {
	targets := []int64{math.MinInt64, -1, 0, p.maxTs, p.maxTs + 1}
	for i, r := range p.records {
		if i%max(1, len(p.records)/16) == 0 {
			targets = append(targets, r.ts, r.ts+1)
		}
	}
	froms := []int64{s.BaseOffset(), (s.BaseOffset() + s.NextOffset()) / 2}
	for _, ts := range targets {
		for _, from := range froms {
			want, wantOK := int64(0), false
			for _, r := range p.records {
				if r.off >= from && r.ts >= ts {
					want, wantOK = r.off, true
					break
				}
			}
			got, ok, err := s.OffsetForTime(ts, from)
			if err != nil || ok != wantOK || (ok && got != want) {
				t.Fatalf("OffsetForTime(%d, %d) = %d, %v, %v; want %d, %v", ts, from, got, ok, err, want, wantOK)
			}
		}
	}
}

// fixCRCs recomputes the CRC of every batch that the length fields frame.
func fixCRCs(b []byte) {
	for pos := 0; pos < len(b); {
		n, err := batch.PeekSize(b[pos:])
		if err != nil || n > len(b)-pos {
			return
		}
		fixCRC(b[pos : pos+n])
		pos += n
	}
}

// TestOpenSegmentRandomDamage runs the fuzz check over randomly damaged
// segments (bytes flipped, cut, inserted), beyond the seed corpus that plain
// go test runs. Replay with STRATA_SEED.
func TestOpenSegmentRandomDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 31))
	seeds := fuzzSeeds(t)
	for i := range 200 {
		sd := seeds[rng.IntN(len(seeds))]
		log := bytes.Clone(sd.log)
		for range 1 + rng.IntN(4) {
			if len(log) == 0 {
				break
			}
			switch rng.IntN(3) {
			case 0:
				log[rng.IntN(len(log))] ^= byte(1 + rng.IntN(255))
			case 1:
				log = log[:rng.IntN(len(log))]
			case 2:
				p := rng.IntN(len(log))
				log = append(log[:p:p], append(make([]byte, rng.IntN(100)), log[p:]...)...)
			}
		}
		flags := sd.flags | uint8(rng.IntN(2))*fzFixCRC
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("case %d: flags %#x, log %x", i, flags, log)
				}
			}()
			checkOpenSegment(t, log, sd.index, sd.timeindex, flags)
		})
	}
}
