package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/vfs"
)

func TestOffsetIndexEmpty(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "00000000000000000100.index")
		x := mustOpenOffset(t, b, name, 100, 80)
		if got := fileSize(t, name); got != 80 {
			t.Fatalf("new file size = %d, want 80 (preallocated)", got)
		}
		if x.Entries() != 0 || x.IsFull() || x.BaseOffset() != 100 || x.Name() != name {
			t.Fatalf("new index: entries %d full %v base %d name %q", x.Entries(), x.IsFull(), x.BaseOffset(), x.Name())
		}
		want := OffsetEntry{Offset: 100}
		if got := x.LastEntry(); got != want {
			t.Fatalf("LastEntry = %+v, want %+v", got, want)
		}
		for _, target := range []int64{math.MinInt64, -1, 0, 99, 100, 101, math.MaxInt64} {
			if got := x.Lookup(target); got != want {
				t.Errorf("Lookup(%d) = %+v, want %+v", target, got, want)
			}
		}
		if _, ok := x.Entry(0); ok {
			t.Error("Entry(0) of an empty index is ok")
		}
		if err := x.SanityCheck(0); err != nil {
			t.Errorf("SanityCheck of an empty index: %v", err)
		}
	})
}

func TestOffsetIndexAppendLookup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		x := mustOpenOffset(t, b, filepath.Join(dir, "a.index"), 100, 1024)
		entries := []OffsetEntry{{103, 0}, {110, 4096}, {111, 4200}, {150, 9000}, {4_000_000_100, 9000}}
		for _, e := range entries {
			if err := x.Append(e.Offset, e.Position); err != nil {
				t.Fatalf("Append(%+v): %v", e, err)
			}
		}
		if x.Entries() != len(entries) {
			t.Fatalf("Entries = %d, want %d", x.Entries(), len(entries))
		}
		if got := x.LastEntry(); got != entries[len(entries)-1] {
			t.Fatalf("LastEntry = %+v", got)
		}
		for i, e := range entries {
			if got, ok := x.Entry(i); !ok || got != e {
				t.Errorf("Entry(%d) = %+v %v, want %+v", i, got, ok, e)
			}
		}
		empty := OffsetEntry{Offset: 100}
		tests := []struct {
			target int64
			want   OffsetEntry
		}{
			{math.MinInt64, empty},
			{0, empty},
			{99, empty},
			{100, empty}, // base offset, before the first entry
			{102, empty},
			{103, entries[0]}, // exact hit on the first entry
			{109, entries[0]}, // between entries
			{110, entries[1]},
			{111, entries[2]},
			{149, entries[2]},
			{150, entries[3]},
			{4_000_000_099, entries[3]},
			{4_000_000_100, entries[4]}, // exact hit on the last entry
			{4_000_000_101, entries[4]}, // beyond the last entry
			{100 + MaxRelativeOffset + 1, entries[4]},
			{math.MaxInt64, entries[4]},
		}
		for _, tc := range tests {
			if got := x.Lookup(tc.target); got != tc.want {
				t.Errorf("Lookup(%d) = %+v, want %+v", tc.target, got, tc.want)
			}
		}
	})
}

// TestOffsetIndexWarmAndCold checks lookups over an index larger than the
// warm section against a linear scan, for targets in both sections, on and
// between entries.
func TestOffsetIndexWarmAndCold(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		const n = 3 * offsetWarm
		x := mustOpenOffset(t, b, filepath.Join(dir, "a.index"), 1000, n*offsetEntrySize)
		for i := range int64(n) {
			if err := x.Append(1000+3*i+1, 7*i); err != nil {
				t.Fatal(err)
			}
		}
		if !x.IsFull() {
			t.Fatal("index with every slot used is not full")
		}
		for target := int64(990); target < 1000+3*n+10; target++ {
			want := OffsetEntry{Offset: 1000}
			if target >= 1001 {
				i := min((target-1001)/3, n-1)
				want = OffsetEntry{Offset: 1000 + 3*i + 1, Position: 7 * i}
			}
			if got := x.Lookup(target); got != want {
				t.Fatalf("Lookup(%d) = %+v, want %+v", target, got, want)
			}
		}
	})
}

func TestOffsetIndexAppendInvalid(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		x := mustOpenOffset(t, b, filepath.Join(dir, "a.index"), 100, 1024)
		// Before any entry: below the base, beyond a uint32, bad positions.
		for _, e := range []OffsetEntry{
			{99, 0}, {-1, 0}, {100 + MaxRelativeOffset + 1, 0}, {math.MaxInt64, 0},
			{100, -1}, {100, MaxPosition + 1},
		} {
			if err := x.Append(e.Offset, e.Position); !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("Append(%+v) on empty index: %v, want ErrInvalidEntry", e, err)
			}
		}
		if x.Entries() != 0 {
			t.Fatalf("invalid appends added %d entries", x.Entries())
		}
		if err := x.Append(100, 0); err != nil { // the base offset itself is fine
			t.Fatal(err)
		}
		if err := x.Append(100+MaxRelativeOffset, MaxPosition); err != nil { // so are the limits
			t.Fatal(err)
		}
		if err := x.TruncateTo(101); err != nil {
			t.Fatal(err)
		}
		if err := x.Append(120, 500); err != nil {
			t.Fatal(err)
		}
		last := x.LastEntry()
		for _, e := range []OffsetEntry{
			{120, 600}, // same offset
			{119, 600}, // lower offset
			{121, 499}, // lower position
			{121, -5},
			{121, MaxPosition + 1},
			{100 + MaxRelativeOffset + 1, 600},
		} {
			err := x.Append(e.Offset, e.Position)
			if !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("Append(%+v) after %+v: %v, want ErrInvalidEntry", e, last, err)
			}
			if err != nil && !strings.Contains(err.Error(), "a.index") {
				t.Errorf("error %q does not name the file", err)
			}
		}
		if x.Entries() != 2 || x.LastEntry() != last {
			t.Fatalf("invalid appends changed the index: %d entries, last %+v", x.Entries(), x.LastEntry())
		}
		if err := x.Append(121, 500); err != nil { // equal position is fine
			t.Fatal(err)
		}
	})
}

func TestOffsetIndexFull(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 0, 4*8+5) // rounded down to 4 entries
		if got := fileSize(t, name); got != 32 {
			t.Fatalf("file size %d, want 32", got)
		}
		for i := range int64(4) {
			if x.IsFull() {
				t.Fatalf("full after %d entries", i)
			}
			if err := x.Append(i*10, i*100); err != nil {
				t.Fatal(err)
			}
		}
		if !x.IsFull() {
			t.Fatal("not full after 4 entries")
		}
		if err := x.Append(50, 500); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append to a full index: %v, want ErrIndexFull", err)
		}
		if x.Entries() != 4 || x.LastEntry() != (OffsetEntry{30, 300}) {
			t.Fatalf("failed append changed the index")
		}
	})
}

func TestOffsetIndexTruncateTo(t *testing.T) {
	entries := []OffsetEntry{{10, 0}, {20, 100}, {30, 200}, {40, 300}}
	tests := []struct {
		to   int64
		keep int
	}{
		{math.MaxInt64, 4}, {1 << 40, 4}, {41, 4}, {40, 3}, {35, 3}, {31, 3}, {30, 2}, {21, 2}, {20, 1},
		{11, 1}, {10, 0}, {5, 0}, {0, 0}, {-1, 0}, {math.MinInt64, 0},
	}
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		for _, tc := range tests {
			name := filepath.Join(dir, "a.index")
			os.Remove(name)
			x := mustOpenOffset(t, b, name, 5, 1024)
			for _, e := range entries {
				if err := x.Append(e.Offset, e.Position); err != nil {
					t.Fatal(err)
				}
			}
			if err := x.TruncateTo(tc.to); err != nil {
				t.Fatal(err)
			}
			if x.Entries() != tc.keep {
				t.Errorf("TruncateTo(%d): %d entries, want %d", tc.to, x.Entries(), tc.keep)
			}
			wantLast := OffsetEntry{Offset: 5}
			if tc.keep > 0 {
				wantLast = entries[tc.keep-1]
			}
			if got := x.LastEntry(); got != wantLast {
				t.Errorf("TruncateTo(%d): LastEntry %+v, want %+v", tc.to, got, wantLast)
			}
			if got := x.Lookup(1 << 40); got != wantLast {
				t.Errorf("TruncateTo(%d): Lookup(max) %+v, want %+v", tc.to, got, wantLast)
			}
			// Dropped slots are zeroed, and appends continue after the
			// new last entry, even with offsets that were dropped.
			if !allZero(x.m.data[tc.keep*8 : 4*8]) {
				t.Errorf("TruncateTo(%d): dropped slots not zeroed", tc.to)
			}
			next := max(wantLast.Offset+1, 6)
			if err := x.Append(next, wantLast.Position); err != nil {
				t.Errorf("TruncateTo(%d): Append(%d): %v", tc.to, next, err)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestOffsetIndexReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 0, 80)
		for i := range int64(5) {
			if err := x.Append(i+1, i*10); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.TrimToValidSize(); err != nil {
			t.Fatal(err)
		}
		if !x.IsFull() || fileSize(t, name) != 40 {
			t.Fatalf("after trim: full %v size %d", x.IsFull(), fileSize(t, name))
		}
		if err := x.Reset(); err != nil {
			t.Fatal(err)
		}
		if x.Entries() != 0 || x.IsFull() || x.LastEntry() != (OffsetEntry{}) {
			t.Fatalf("after Reset: %d entries, full %v, last %+v", x.Entries(), x.IsFull(), x.LastEntry())
		}
		if got := fileSize(t, name); got != 80 {
			t.Fatalf("Reset left the file at %d bytes, want 80 (preallocated again)", got)
		}
		// A rebuild may start below the old entries.
		for i := range int64(10) {
			if err := x.Append(i, i); err != nil {
				t.Fatalf("rebuild append %d: %v", i, err)
			}
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := x.SanityCheck(100); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOffsetIndexBytes checks the on-disk layout byte for byte after Flush.
func TestOffsetIndexBytes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "00000000000000000100.index")
		x := mustOpenOffset(t, b, name, 100, 32)
		if err := x.Append(130, 4150); err != nil {
			t.Fatal(err)
		}
		if err := x.Append(100+0xfffffffe, 0xfffffff0); err != nil {
			t.Fatal(err)
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		want := []byte{
			0x00, 0x00, 0x00, 0x1e, 0x00, 0x00, 0x10, 0x36,
			0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xf0,
			0, 0, 0, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0, 0,
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("file after Flush:\n got % x\nwant % x", got, want)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ = os.ReadFile(name)
		if !bytes.Equal(got, want[:16]) {
			t.Fatalf("file after Close:\n got % x\nwant % x", got, want[:16])
		}
	})
}

func TestOffsetIndexReopen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 1000, 800)
		var want []OffsetEntry
		for i := range int64(37) {
			e := OffsetEntry{1000 + 2*i, 50 * i}
			want = append(want, e)
			if err := x.Append(e.Offset, e.Position); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, name); got != 37*8 {
			t.Fatalf("closed file is %d bytes, want %d (trimmed)", got, 37*8)
		}

		// Reopened with a different max size: the file keeps its size and
		// its exact entries, and is full until resized.
		y := mustOpenOffset(t, b, name, 1000, 4096)
		if y.Entries() != 37 || !y.IsFull() || y.LastEntry() != want[36] {
			t.Fatalf("reopened: %d entries, full %v, last %+v", y.Entries(), y.IsFull(), y.LastEntry())
		}
		if err := y.SanityCheck(50*36 + 1); err != nil {
			t.Fatal(err)
		}
		for i, e := range want {
			if got := y.Lookup(e.Offset); got != e {
				t.Fatalf("reopened Lookup(%d) = %+v, want %+v", e.Offset, got, want[i])
			}
		}
		if err := y.Append(2000, 5000); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append to a reopened trimmed index: %v, want ErrIndexFull", err)
		}
		if err := y.Resize(4096); err != nil {
			t.Fatal(err)
		}
		if y.IsFull() || fileSize(t, name) != 4096 {
			t.Fatalf("after Resize: full %v, size %d", y.IsFull(), fileSize(t, name))
		}
		if err := y.Append(2000, 5000); err != nil {
			t.Fatal(err)
		}
		if err := y.Close(); err != nil {
			t.Fatal(err)
		}
		z := mustOpenOffset(t, b, name, 1000, 4096)
		if z.Entries() != 38 || z.LastEntry() != (OffsetEntry{2000, 5000}) {
			t.Fatalf("second reopen: %d entries, last %+v", z.Entries(), z.LastEntry())
		}
		// Backing the slots past the old entries (reserve) left them alone.
		for i, e := range want {
			if got, _ := z.Entry(i); got != e {
				t.Fatalf("second reopen: entry %d = %+v, want %+v", i, got, e)
			}
		}
	})
}

// TestOffsetIndexCrash reopens indexes abandoned without Close, as after a
// crash: the preallocated tail reads as zero entries and SanityCheck fails;
// an index that was full keeps every flushed entry.
func TestOffsetIndexCrash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 0, 80)
		for i := range int64(4) {
			if err := x.Append(10*i+1, 100*i); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		crash(t, x.m)

		y := mustOpenOffset(t, b, name, 0, 80)
		if y.Entries() != 10 {
			t.Fatalf("reopened preallocated file: %d entries, want 10 (its size / 8)", y.Entries())
		}
		err := y.SanityCheck(1 << 20)
		if !errors.Is(err, ErrCorruptIndex) || !strings.Contains(err.Error(), name) {
			t.Fatalf("SanityCheck after crash: %v, want ErrCorruptIndex naming the file", err)
		}
		// The segment's cure: reset and rebuild.
		if err := y.Reset(); err != nil {
			t.Fatal(err)
		}
		for i := range int64(10) {
			if err := y.Append(10*i+1, 100*i); err != nil {
				t.Fatal(err)
			}
		}
		if err := y.Flush(); err != nil {
			t.Fatal(err)
		}
		crash(t, y.m)

		// Full when it crashed: no zero tail, every entry intact.
		z := mustOpenOffset(t, b, name, 0, 80)
		if z.Entries() != 10 {
			t.Fatalf("reopened full file: %d entries", z.Entries())
		}
		if err := z.SanityCheck(901); err != nil {
			t.Fatal(err)
		}
		if got := z.Lookup(55); got != (OffsetEntry{51, 500}) {
			t.Fatalf("Lookup(55) = %+v", got)
		}
	})
}

func TestOffsetIndexResize(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 0, 64)
		for i := range int64(5) {
			if err := x.Append(i, i); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			maxBytes int
			size     int64
			full     bool
		}{
			{4099, 4096, false}, {47, 40, true}, {41, 40, true}, {100, 96, false}, {1 << 20, 1 << 20, false},
		} {
			if err := x.Resize(tc.maxBytes); err != nil {
				t.Fatalf("Resize(%d): %v", tc.maxBytes, err)
			}
			if got := fileSize(t, name); got != tc.size || x.IsFull() != tc.full {
				t.Errorf("Resize(%d): size %d full %v, want %d %v", tc.maxBytes, got, x.IsFull(), tc.size, tc.full)
			}
			if x.Entries() != 5 || x.Lookup(3) != (OffsetEntry{3, 3}) {
				t.Fatalf("Resize(%d) lost entries", tc.maxBytes)
			}
		}
		for _, bad := range []int{39, 8, 0, -8} {
			if err := x.Resize(bad); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Resize(%d) below the entries: %v, want ErrInvalidArgument", bad, err)
			}
		}
		if got := fileSize(t, name); got != 1<<20 {
			t.Fatalf("failed Resize changed the file to %d bytes", got)
		}
		if err := x.Append(5, 5); err != nil {
			t.Fatal(err)
		}
		if err := x.TrimToValidSize(); err != nil {
			t.Fatal(err)
		}
		if !x.IsFull() || fileSize(t, name) != 48 {
			t.Fatalf("after trim: full %v size %d", x.IsFull(), fileSize(t, name))
		}
		if err := x.Append(6, 6); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("Append after trim: %v, want ErrIndexFull", err)
		}
		// An empty index trims to an empty file and stays usable.
		if err := x.TruncateTo(0); err != nil {
			t.Fatal(err)
		}
		if err := x.TrimToValidSize(); err != nil {
			t.Fatal(err)
		}
		if fileSize(t, name) != 0 || !x.IsFull() || x.Lookup(3) != (OffsetEntry{}) {
			t.Fatalf("empty trimmed index: size %d full %v", fileSize(t, name), x.IsFull())
		}
		if err := x.Resize(16); err != nil {
			t.Fatal(err)
		}
		if err := x.Append(7, 7); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOffsetIndexSanityCheck(t *testing.T) {
	entry := func(rel, pos uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, rel), pos)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name    string
		base    int64
		data    []byte
		logSize int64
		reason  string // "" → valid
	}{
		{"empty", 0, nil, 0, ""},
		{"valid", 10, cat(entry(0, 0), entry(5, 100), entry(9, 100)), 101, ""},
		{"one entry", 10, entry(3, 7), 8, ""},
		{"odd size", 10, cat(entry(0, 0), entry(5, 100), []byte{1, 2, 3}), 1000, "not a multiple of 8"},
		{"equal offsets", 10, cat(entry(0, 0), entry(5, 100), entry(5, 200)), 1000, "entry 2: offset 15 not above"},
		{"decreasing offsets", 10, cat(entry(4, 0), entry(2, 100)), 1000, "entry 1: offset 12 not above"},
		{"zero tail", 10, cat(entry(1, 0), entry(5, 100), entry(0, 0), entry(0, 0)), 1000, "entry 2: offset 10 not above"},
		{"all zero", 10, make([]byte, 64), 1000, "entry 1: offset 10 not above"},
		{"decreasing positions", 10, cat(entry(0, 200), entry(5, 100)), 1000, "entry 1: position 100 below"},
		{"below base", math.MaxInt64 - 10, cat(entry(0, 0), entry(20, 1)), 1000, "entry 1: offset -9223372036854775799 below the base"},
		{"position past log", 10, cat(entry(0, 0), entry(5, 100)), 100, "position 100 is at or past the end"},
		{"position past empty log", 10, entry(0, 0), 0, "position 0 is at or past the end"},
	}
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				name := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".index", tc.data)
				x := mustOpenOffset(t, b, name, tc.base, 1024)
				if x.Entries() != len(tc.data)/8 {
					t.Fatalf("%d entries from %d bytes", x.Entries(), len(tc.data))
				}
				err := x.SanityCheck(tc.logSize)
				if tc.reason == "" {
					if err != nil {
						t.Fatalf("SanityCheck: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrCorruptIndex) {
					t.Fatalf("SanityCheck: %v, want ErrCorruptIndex", err)
				}
				if msg := err.Error(); !strings.Contains(msg, tc.reason) || !strings.Contains(msg, name) ||
					!strings.HasPrefix(msg, "index: corrupt index: ") {
					t.Fatalf("SanityCheck error %q: want the file name and %q", msg, tc.reason)
				}
				// Lookups on a corrupt index do not panic and never go
				// past their target.
				for _, target := range []int64{tc.base, tc.base + 3, tc.base + 10, math.MaxInt64} {
					if got := x.Lookup(target); got.Offset > target {
						t.Errorf("Lookup(%d) = %+v on a corrupt index", target, got)
					}
				}
			})
		}
	})
}

func TestOffsetIndexOpenErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		for _, tc := range []struct {
			base     int64
			maxBytes int
		}{{-1, 1024}, {0, 7}, {0, 0}, {0, -8}} {
			if _, err := OpenOffsetIndex(b.fs, name, tc.base, tc.maxBytes); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("OpenOffsetIndex(base %d, max %d): %v, want ErrInvalidArgument", tc.base, tc.maxBytes, err)
			}
			if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("failed open created the file")
			}
		}
		if _, err := OpenOffsetIndex(b.fs, filepath.Join(dir, "missing", "a.index"), 0, 1024); err == nil {
			t.Error("open in a missing directory succeeded")
		}
		// A (sparse) file larger than any index can be is refused before
		// it is mapped or read.
		huge := filepath.Join(dir, "huge.index")
		if err := os.WriteFile(huge, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(huge, maxFileSize+8); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenOffsetIndex(b.fs, huge, 0, 1024); !errors.Is(err, ErrCorruptIndex) {
			t.Errorf("open of a %d-byte file: %v, want ErrCorruptIndex", int64(maxFileSize+8), err)
		}
	})
}

func TestOffsetIndexClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 0, 64)
		if err := x.Append(1, 1); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for op, f := range map[string]func() error{
			"Append":          func() error { return x.Append(2, 2) },
			"TruncateTo":      func() error { return x.TruncateTo(0) },
			"Reset":           x.Reset,
			"Resize":          func() error { return x.Resize(128) },
			"TrimToValidSize": x.TrimToValidSize,
			"Flush":           x.Flush,
			"SanityCheck":     func() error { return x.SanityCheck(100) },
		} {
			if err := f(); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", op, err)
			}
		}
		if got := x.Lookup(5); got != (OffsetEntry{}) {
			t.Errorf("Lookup after Close = %+v", got)
		}
		if x.Entries() != 0 {
			t.Errorf("Entries after Close = %d", x.Entries())
		}
		if got := fileSize(t, name); got != 8 {
			t.Fatalf("closed file size %d, want 8", got)
		}
		// Delete after Close removes the file; a second Delete is fine.
		if err := x.Delete(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("file still there after Delete: %v", err)
		}
		if err := x.Delete(); err != nil {
			t.Fatalf("second Delete: %v", err)
		}
	})
}

func TestOffsetIndexDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.index")
		x := mustOpenOffset(t, b, name, 0, 64)
		if err := x.Append(1, 1); err != nil {
			t.Fatal(err)
		}
		if err := x.Delete(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("file still there after Delete: %v", err)
		}
		if err := x.Append(2, 2); !errors.Is(err, ErrClosed) {
			t.Fatalf("Append after Delete: %v", err)
		}
	})
}

// TestHeapCopyGrowsAsFilled: on a file system without mappings, a new index
// preallocated to 10 MiB holds no copy of its unused slots; the copy grows
// with the entries, and what was flushed reopens whole.
func TestHeapCopyGrowsAsFilled(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	x, err := OpenOffsetIndex(fsys, "/d/0.index", 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.m.data) != 0 || x.m.size != 10<<20 || x.m.capacity.Load() != (10<<20)/8 {
		t.Fatalf("new index: copy of %d bytes, size %d, capacity %d", len(x.m.data), x.m.size, x.m.capacity.Load())
	}
	for i := range 1000 {
		if err := x.Append(int64(i), int64(i)*100); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(x.m.data); n < 8000 || n > 16000 {
		t.Fatalf("copy of %d bytes for 1000 entries", n)
	}
	if got := x.Lookup(555); got != (OffsetEntry{Offset: 555, Position: 55500}) {
		t.Fatalf("Lookup(555) = %+v", got)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	fsys.Crash()
	y, err := OpenOffsetIndex(fsys, "/d/0.index", 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Entries() != (10<<20)/8 { // not trimmed: the recovery's job
		t.Fatalf("after a crash: %d entries", y.Entries())
	}
	if got, ok := y.Entry(999); !ok || got != (OffsetEntry{Offset: 999, Position: 99900}) {
		t.Fatalf("after a crash: Entry(999) = %+v, %v", got, ok)
	}
	if got, ok := y.Entry(1000); !ok || got != (OffsetEntry{Offset: 0, Position: 0}) {
		t.Fatalf("after a crash: Entry(1000) = %+v, %v, want the zeros of an unused slot", got, ok)
	}
}
