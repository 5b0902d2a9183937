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
)

func TestTimeIndexEmpty(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "00000000000000000050.timeindex")
		x := mustOpenTime(t, b, name, 50, 125) // rounded down to 10 entries
		if got := fileSize(t, name); got != 120 {
			t.Fatalf("new file size %d, want 120", got)
		}
		want := TimeEntry{Timestamp: -1, Offset: 50}
		if x.LastEntry() != want || x.Entries() != 0 || x.IsFull() || x.BaseOffset() != 50 || x.Name() != name {
			t.Fatalf("new index: last %+v entries %d full %v", x.LastEntry(), x.Entries(), x.IsFull())
		}
		for _, ts := range []int64{math.MinInt64, -1, 0, 1, math.MaxInt64} {
			if got := x.Lookup(ts); got != want {
				t.Errorf("Lookup(%d) = %+v, want %+v", ts, got, want)
			}
		}
		if err := x.SanityCheck(50); err != nil {
			t.Error(err)
		}
	})
}

func TestTimeIndexMaybeAppend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		x := mustOpenTime(t, b, filepath.Join(dir, "a.timeindex"), 50, 1200)
		steps := []struct {
			ts, offset int64
			err        error
			appended   bool
		}{
			{-1, 50, nil, false}, // NoTimestamp is never indexed
			{-7, 50, nil, false}, // nor is any negative timestamp
			{0, 49, ErrInvalidEntry, false},
			{0, 50 + MaxRelativeOffset + 1, ErrInvalidEntry, false},
			{0, 50, nil, true},  // zero is a timestamp
			{0, 51, nil, false}, // not above the last timestamp
			{1000, 55, nil, true},
			{1000, 56, nil, false},             // equal timestamp: nothing
			{999, 57, nil, false},              // lower timestamp: nothing (Kafka's segment never does it)
			{2000, 54, ErrInvalidEntry, false}, // offset below the last
			{1500, 54, ErrInvalidEntry, false}, // checked before the timestamp
			{2000, 55, nil, true},              // the same offset with a larger timestamp is fine
			{3000, 60, nil, true},
			{math.MaxInt64, 50 + MaxRelativeOffset, nil, true},
		}
		var want []TimeEntry
		for _, s := range steps {
			err := x.MaybeAppend(s.ts, s.offset, false)
			if !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
				t.Fatalf("MaybeAppend(%d, %d): %v, want %v", s.ts, s.offset, err, s.err)
			}
			if s.appended {
				want = append(want, TimeEntry{s.ts, s.offset})
			}
			if x.Entries() != len(want) {
				t.Fatalf("MaybeAppend(%d, %d): %d entries, want %d", s.ts, s.offset, x.Entries(), len(want))
			}
		}
		for i, e := range want {
			if got, ok := x.Entry(i); !ok || got != e {
				t.Errorf("Entry(%d) = %+v, want %+v", i, got, e)
			}
		}
		if x.LastEntry() != want[len(want)-1] {
			t.Errorf("LastEntry = %+v", x.LastEntry())
		}
	})
}

func TestTimeIndexLookup(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		x := mustOpenTime(t, b, filepath.Join(dir, "a.timeindex"), 50, 1200)
		entries := []TimeEntry{{1000, 52}, {2000, 60}, {2500, 60}, {4000, 75}}
		for _, e := range entries {
			if err := x.MaybeAppend(e.Timestamp, e.Offset, false); err != nil {
				t.Fatal(err)
			}
		}
		empty := TimeEntry{-1, 50}
		for _, tc := range []struct {
			ts   int64
			want TimeEntry
		}{
			{math.MinInt64, empty}, {-1, empty}, {0, empty}, {999, empty},
			{1000, entries[0]}, {1999, entries[0]}, {2000, entries[1]}, {2499, entries[1]},
			{2500, entries[2]}, {3999, entries[2]}, {4000, entries[3]}, {4001, entries[3]},
			{math.MaxInt64, entries[3]},
		} {
			if got := x.Lookup(tc.ts); got != tc.want {
				t.Errorf("Lookup(%d) = %+v, want %+v", tc.ts, got, tc.want)
			}
		}
	})
}

func TestTimeIndexWarmAndCold(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		const n = 3 * timeWarm
		x := mustOpenTime(t, b, filepath.Join(dir, "a.timeindex"), 1000, (n+1)*timeEntrySize)
		for i := range int64(n) {
			if err := x.MaybeAppend(10*i+5, 1000+i/2, false); err != nil {
				t.Fatal(err)
			}
		}
		if !x.IsFull() {
			t.Fatal("not full with one slot left")
		}
		for ts := int64(-3); ts < 10*n+20; ts++ {
			want := TimeEntry{-1, 1000}
			if ts >= 5 {
				i := min((ts-5)/10, n-1)
				want = TimeEntry{10*i + 5, 1000 + i/2}
			}
			if got := x.Lookup(ts); got != want {
				t.Fatalf("Lookup(%d) = %+v, want %+v", ts, got, want)
			}
		}
	})
}

// TestTimeIndexFull checks Kafka's rule: full with one slot left, which only
// an append that skips the check (the roll's) may use.
func TestTimeIndexFull(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		x := mustOpenTime(t, b, filepath.Join(dir, "a.timeindex"), 0, 4*12)
		for i := range int64(3) {
			if x.IsFull() {
				t.Fatalf("full after %d of 4", i)
			}
			if err := x.MaybeAppend(i+1, i, false); err != nil {
				t.Fatal(err)
			}
		}
		if !x.IsFull() {
			t.Fatal("not full with one slot left")
		}
		if err := x.MaybeAppend(10, 10, false); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("MaybeAppend to a full index: %v, want ErrIndexFull", err)
		}
		if err := x.MaybeAppend(10, 10, true); err != nil {
			t.Fatalf("MaybeAppend skipping the full check: %v", err)
		}
		if x.Entries() != 4 {
			t.Fatalf("%d entries", x.Entries())
		}
		// No slot left at all: full even when skipping the check; a
		// timestamp that would not be appended is still fine.
		if err := x.MaybeAppend(11, 11, true); !errors.Is(err, ErrIndexFull) {
			t.Fatalf("MaybeAppend to a file with no free slot: %v, want ErrIndexFull", err)
		}
		if err := x.MaybeAppend(10, 11, true); err != nil {
			t.Fatalf("no-op MaybeAppend on a full file: %v", err)
		}
		if x.Entries() != 4 || x.LastEntry() != (TimeEntry{10, 10}) {
			t.Fatalf("failed appends changed the index")
		}
	})
}

func TestTimeIndexTruncateTo(t *testing.T) {
	// Offsets repeat: truncating to one of them drops all its entries.
	entries := []TimeEntry{{100, 50}, {200, 60}, {300, 60}, {400, 70}}
	for _, tc := range []struct {
		to   int64
		keep int
	}{
		{math.MaxInt64, 4}, {71, 4}, {70, 3}, {61, 3}, {60, 1}, {55, 1}, {51, 1}, {50, 0}, {0, 0}, {math.MinInt64, 0},
	} {
		forEachBackend(t, func(t *testing.T, b backend, dir string) {
			x := mustOpenTime(t, b, filepath.Join(dir, "a.timeindex"), 50, 1200)
			for _, e := range entries {
				if err := x.MaybeAppend(e.Timestamp, e.Offset, false); err != nil {
					t.Fatal(err)
				}
			}
			if err := x.TruncateTo(tc.to); err != nil {
				t.Fatal(err)
			}
			wantLast := TimeEntry{-1, 50}
			if tc.keep > 0 {
				wantLast = entries[tc.keep-1]
			}
			if x.Entries() != tc.keep || x.LastEntry() != wantLast || x.Lookup(math.MaxInt64) != wantLast {
				t.Fatalf("TruncateTo(%d): %d entries, last %+v; want %d, %+v", tc.to, x.Entries(), x.LastEntry(), tc.keep, wantLast)
			}
			if !allZero(x.m.data[tc.keep*12 : 4*12]) {
				t.Errorf("TruncateTo(%d): dropped slots not zeroed", tc.to)
			}
			// Appends continue from the new last entry.
			if err := x.MaybeAppend(wantLast.Timestamp+1, wantLast.Offset, false); err != nil || x.Entries() != tc.keep+1 {
				t.Fatalf("TruncateTo(%d): append after: %v, %d entries", tc.to, err, x.Entries())
			}
		})
	}
}

func TestTimeIndexReopenAndReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.timeindex")
		x := mustOpenTime(t, b, name, 10, 12*100)
		for i := range int64(20) {
			if err := x.MaybeAppend(1000+i*i, 10+3*i, false); err != nil {
				t.Fatal(err)
			}
		}
		// The roll: the final entry in the kept slot, then trim.
		if err := x.MaybeAppend(5000, 70, true); err != nil {
			t.Fatal(err)
		}
		if err := x.TrimToValidSize(); err != nil {
			t.Fatal(err)
		}
		if !x.IsFull() || fileSize(t, name) != 21*12 {
			t.Fatalf("after trim: full %v size %d", x.IsFull(), fileSize(t, name))
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		y := mustOpenTime(t, b, name, 10, 12*100)
		if y.Entries() != 21 || y.LastEntry() != (TimeEntry{5000, 70}) {
			t.Fatalf("reopened: %d entries, last %+v", y.Entries(), y.LastEntry())
		}
		if err := y.SanityCheck(71); err != nil {
			t.Fatal(err)
		}
		if got := y.Lookup(1000 + 5*5 + 1); got != (TimeEntry{1025, 25}) {
			t.Fatalf("Lookup = %+v", got)
		}
		if err := y.Reset(); err != nil {
			t.Fatal(err)
		}
		if y.Entries() != 0 || y.IsFull() || fileSize(t, name) != 1200 || y.LastEntry() != (TimeEntry{-1, 10}) {
			t.Fatalf("after Reset: %d entries, full %v, size %d", y.Entries(), y.IsFull(), fileSize(t, name))
		}
		if err := y.Resize(12 * 3); err != nil {
			t.Fatal(err)
		}
		if err := y.Resize(12*3 - 1); err != nil { // rounds down to 24: still holds 0 entries
			t.Fatal(err)
		}
		if err := y.MaybeAppend(1, 10, false); err != nil {
			t.Fatal(err)
		}
		if err := y.Resize(11); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Resize below the entries: %v", err)
		}
	})
}

func TestTimeIndexCrash(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.timeindex")
		x := mustOpenTime(t, b, name, 0, 12*8)
		for i := range int64(3) {
			if err := x.MaybeAppend(100+i, i, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Flush(); err != nil {
			t.Fatal(err)
		}
		crash(t, x.m)
		y := mustOpenTime(t, b, name, 0, 12*8)
		if y.Entries() != 8 {
			t.Fatalf("%d entries, want 8", y.Entries())
		}
		if err := y.SanityCheck(10); !errors.Is(err, ErrCorruptIndex) {
			t.Fatalf("SanityCheck after crash: %v", err)
		}
	})
}

func TestTimeIndexSanityCheck(t *testing.T) {
	entry := func(ts int64, rel uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name   string
		base   int64
		data   []byte
		next   int64
		reason string
	}{
		{"empty", 5, nil, 5, ""},
		{"valid", 5, cat(entry(0, 0), entry(10, 3), entry(11, 3), entry(20, 9)), 15, ""},
		{"odd size", 5, cat(entry(0, 0), []byte{0}), 15, "not a multiple of 12"},
		{"negative timestamp", 5, cat(entry(-1, 0)), 15, "entry 0: negative timestamp -1"},
		{"equal timestamps", 5, cat(entry(10, 0), entry(10, 1)), 15, "entry 1: timestamp 10 not above"},
		{"decreasing timestamps", 5, cat(entry(10, 0), entry(9, 1)), 15, "entry 1: timestamp 9 not above"},
		{"zero tail", 5, cat(entry(10, 0), entry(20, 1), make([]byte, 24)), 15, "entry 2: timestamp 0 not above"},
		{"decreasing offsets", 5, cat(entry(10, 4), entry(20, 3)), 15, "entry 1: offset 8 below the previous offset 9"},
		{"offset at next", 5, cat(entry(10, 4), entry(20, 10)), 15, "entry 1: offset 15 outside the segment's [5, 15)"},
		{"offset past next", 5, cat(entry(10, 40)), 15, "entry 0: offset 45 outside"},
		{"entry in empty segment", 5, entry(10, 0), 5, "entry 0: offset 5 outside"},
		{"below base", math.MaxInt64 - 2, entry(10, 7), math.MaxInt64, "entry 0: offset -9223372036854775804 outside"},
	}
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				name := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "_")+".timeindex", tc.data)
				x := mustOpenTime(t, b, name, tc.base, 1200)
				err := x.SanityCheck(tc.next)
				if tc.reason == "" {
					if err != nil {
						t.Fatalf("SanityCheck: %v", err)
					}
					return
				}
				if !errors.Is(err, ErrCorruptIndex) || !strings.Contains(err.Error(), tc.reason) ||
					!strings.Contains(err.Error(), name) {
					t.Fatalf("SanityCheck: %v, want ErrCorruptIndex naming the file and %q", err, tc.reason)
				}
				for _, ts := range []int64{-1, 0, 10, 15, math.MaxInt64} {
					if got := x.Lookup(ts); got.Timestamp > ts {
						t.Errorf("Lookup(%d) = %+v on a corrupt index", ts, got)
					}
				}
			})
		}
	})
}

func TestTimeIndexOpenErrorsAndClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		name := filepath.Join(dir, "a.timeindex")
		if _, err := OpenTimeIndex(b.fs, name, -5, 1200); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("negative base: %v", err)
		}
		if _, err := OpenTimeIndex(b.fs, name, 0, 11); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("max below one entry: %v", err)
		}
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("failed open created the file")
		}
		x := mustOpenTime(t, b, name, 0, 1200)
		if err := x.MaybeAppend(1, 1, false); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		for op, f := range map[string]func() error{
			"MaybeAppend":     func() error { return x.MaybeAppend(2, 2, true) },
			"TruncateTo":      func() error { return x.TruncateTo(0) },
			"Reset":           x.Reset,
			"Resize":          func() error { return x.Resize(1200) },
			"TrimToValidSize": x.TrimToValidSize,
			"Flush":           x.Flush,
			"SanityCheck":     func() error { return x.SanityCheck(5) },
		} {
			if err := f(); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", op, err)
			}
		}
		if got := x.Lookup(5); got != (TimeEntry{-1, 0}) {
			t.Errorf("Lookup after Close = %+v", got)
		}
		if fileSize(t, name) != 12 {
			t.Fatalf("closed file size %d", fileSize(t, name))
		}
		y := mustOpenTime(t, b, name, 0, 1200)
		if err := y.Delete(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("file still there after Delete")
		}
	})
}
