package index

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// The fuzz targets open arbitrary bytes as an index file, on both backends.
// Opening and looking up never panic; a lookup never returns an entry past
// its target nor one that is not in the file; and when SanityCheck passes,
// every lookup is exactly the largest entry at or below its target. After a
// failed check, Reset gives a working index.

const fuzzMaxBytes = 1 << 16

func FuzzOffsetIndex(f *testing.F) {
	entry := func(rel, pos uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, rel), pos)
	}
	valid := bytes.Join([][]byte{entry(0, 0), entry(3, 100), entry(9, 4000), entry(1<<31, 1<<31)}, nil)
	f.Add([]byte{}, int64(0), int64(0))
	f.Add(valid, int64(100), int64(1<<31+1))
	f.Add(valid, int64(math.MaxInt64-5), int64(1<<40))
	f.Add(valid[:13], int64(0), int64(5000))
	f.Add(append(valid[:16:16], make([]byte, 40)...), int64(7), int64(5000))
	f.Add(make([]byte, 800), int64(0), int64(1))
	f.Add(bytes.Repeat([]byte{0xff}, 64), int64(1), int64(math.MaxInt64))
	dir := f.TempDir() // one per fuzzing process, whose inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte, base, logSize int64) {
		if len(data) > fuzzMaxBytes {
			return
		}
		base &= math.MaxInt64
		for _, b := range backends {
			name := writeFile(t, dir, b.name+".index", data)
			x, err := OpenOffsetIndex(b.fs, name, base, 1024)
			if err != nil {
				t.Fatalf("open %d bytes: %v", len(data), err)
			}
			if x.Entries() != len(data)/8 {
				t.Fatalf("%d entries from %d bytes", x.Entries(), len(data))
			}
			checkOffsetLookups(t, x, data, x.SanityCheck(logSize) == nil)
			if x.SanityCheck(logSize) != nil {
				if err := x.Reset(); err != nil {
					t.Fatal(err)
				}
				if err := x.Append(base, 0); err != nil {
					t.Fatal(err)
				}
				if err := x.SanityCheck(1); err != nil {
					t.Fatalf("rebuilt index: %v", err)
				}
				checkOffsetLookups(t, x, x.m.data[:8], true)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func checkOffsetLookups(t *testing.T, x *OffsetIndex, data []byte, sane bool) {
	t.Helper()
	var all []OffsetEntry
	targets := []int64{math.MinInt64, -1, 0, x.base - 1, x.base, x.base + 1, math.MaxInt64}
	for i := 0; i+8 <= len(data); i += 8 {
		e := x.parse(data[i:])
		all = append(all, e)
		targets = append(targets, e.Offset-1, e.Offset, e.Offset+1)
	}
	empty := OffsetEntry{Offset: x.base}
	for _, target := range targets {
		got := x.Lookup(target)
		if sane {
			want := empty
			if target >= x.base {
				for _, e := range all {
					if e.Offset <= target {
						want = e
					}
				}
			}
			if got != want {
				t.Fatalf("sane index: Lookup(%d) = %+v, want %+v", target, got, want)
			}
			continue
		}
		if got == empty {
			continue
		}
		found := false
		for _, e := range all {
			// Compare relative offsets: a corrupt entry may overflow.
			if e == got && e.Offset-x.base <= target-x.base && target >= x.base {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("Lookup(%d) = %+v: not an entry at or below the target", target, got)
		}
	}
}

func FuzzTimeIndex(f *testing.F) {
	entry := func(ts int64, rel uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
	}
	valid := bytes.Join([][]byte{entry(0, 0), entry(10, 3), entry(11, 3), entry(1<<40, 1<<31)}, nil)
	f.Add([]byte{}, int64(0), int64(0))
	f.Add(valid, int64(100), int64(1<<31+101))
	f.Add(valid, int64(math.MaxInt64-5), int64(math.MaxInt64))
	f.Add(valid[:20], int64(0), int64(5000))
	f.Add(append(valid[:24:24], make([]byte, 36)...), int64(7), int64(5000))
	f.Add(bytes.Repeat([]byte{0xff}, 48), int64(1), int64(math.MaxInt64))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, base, next int64) {
		if len(data) > fuzzMaxBytes {
			return
		}
		base &= math.MaxInt64
		for _, b := range backends {
			name := writeFile(t, dir, b.name+".timeindex", data)
			x, err := OpenTimeIndex(b.fs, name, base, 1200)
			if err != nil {
				t.Fatalf("open %d bytes: %v", len(data), err)
			}
			if x.Entries() != len(data)/12 {
				t.Fatalf("%d entries from %d bytes", x.Entries(), len(data))
			}
			sane := x.SanityCheck(next) == nil
			var all []TimeEntry
			targets := []int64{math.MinInt64, -1, 0, math.MaxInt64}
			for i := 0; i+12 <= len(data); i += 12 {
				e := x.parse(data[i:])
				all = append(all, e)
				targets = append(targets, e.Timestamp-1, e.Timestamp, e.Timestamp+1)
			}
			empty := TimeEntry{Timestamp: NoTimestamp, Offset: base}
			for _, ts := range targets {
				got := x.Lookup(ts)
				want, ok := empty, got == empty
				for _, e := range all {
					if e.Timestamp <= ts {
						want = e
						ok = ok || e == got
					}
				}
				if sane && got != want || !ok {
					t.Fatalf("sane=%v: Lookup(%d) = %+v, want %+v", sane, ts, got, want)
				}
			}
			if !sane {
				if err := x.Reset(); err != nil {
					t.Fatal(err)
				}
				if err := x.MaybeAppend(5, base, false); err != nil || x.Entries() != 1 {
					t.Fatalf("append after Reset: %v", err)
				}
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
