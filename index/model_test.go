package index

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// Randomized operation sequences checked against a slice of entries, on both
// backends. STRATA_SOAK=1 runs many more; STRATA_SEED replays a failure.

func modelOps() int {
	if soak() {
		return 200_000
	}
	return 3000
}

// offsetModel is what an OffsetIndex should hold.
type offsetModel struct {
	base     int64
	entries  []OffsetEntry
	capacity int // slots in the file
	maxBytes int // what Reset preallocates to
}

func (m *offsetModel) last() OffsetEntry {
	if len(m.entries) == 0 {
		return OffsetEntry{Offset: m.base}
	}
	return m.entries[len(m.entries)-1]
}

func (m *offsetModel) lookup(target int64) OffsetEntry {
	e := OffsetEntry{Offset: m.base}
	for _, c := range m.entries {
		if c.Offset <= target {
			e = c
		}
	}
	return e
}

func (m *offsetModel) logSize() int64 {
	if len(m.entries) == 0 {
		return 0
	}
	return m.last().Position + 1
}

func TestOffsetIndexModel(t *testing.T) {
	s := seed(t)
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		rng := rand.New(rand.NewPCG(s, 1))
		name := filepath.Join(dir, "00000000000000001000.index")
		m := &offsetModel{base: 1000, capacity: 32, maxBytes: 32 * 8}
		x, err := OpenOffsetIndex(b.fs, name, m.base, m.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = x.Close() }()
		expect := func(op string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) || (want == nil) != (err == nil) {
				t.Fatalf("%s: %v, want %v", op, err, want)
			}
		}
		reopen := func(maxBytes int) {
			y, err := OpenOffsetIndex(b.fs, name, m.base, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			x, m.maxBytes = y, maxBytes
		}
		for op := range modelOps() {
			last, full := m.last(), len(m.entries) >= m.capacity
			switch r := rng.IntN(100); {
			case r < 55: // a valid append
				off := last.Offset + 1 + rng.Int64N(4)
				if len(m.entries) == 0 {
					off = m.base + rng.Int64N(3)
				}
				pos := last.Position + rng.Int64N(100)
				err := x.Append(off, pos)
				if full {
					expect("append to full", err, ErrIndexFull)
				} else {
					expect("append", err, nil)
					m.entries = append(m.entries, OffsetEntry{off, pos})
				}
			case r < 62: // an invalid append
				off, pos := last.Offset-rng.Int64N(3), last.Position
				if len(m.entries) == 0 || rng.IntN(2) == 0 {
					off, pos = last.Offset+1, last.Position-1-rng.Int64N(5)
				}
				want := ErrInvalidEntry
				if full {
					want = ErrIndexFull
				}
				expect("invalid append", x.Append(off, pos), want)
			case r < 72:
				to := m.base - 2 + rng.Int64N(last.Offset-m.base+5)
				expect("truncate", x.TruncateTo(to), nil)
				keep := 0
				for keep < len(m.entries) && m.entries[keep].Offset < to {
					keep++
				}
				m.entries = m.entries[:keep]
			case r < 74:
				expect("reset", x.Reset(), nil)
				m.entries, m.capacity = nil, m.maxBytes/8
			case r < 80:
				size := len(m.entries)*8 + rng.IntN(300) - 20
				err := x.Resize(size)
				if size < len(m.entries)*8 || size/8*8 < len(m.entries)*8 {
					expect("resize below entries", err, ErrInvalidArgument)
				} else {
					expect("resize", err, nil)
					m.capacity = size / 8
					if size >= 8 {
						m.maxBytes = size
					}
				}
			case r < 85:
				expect("trim", x.TrimToValidSize(), nil)
				m.capacity = len(m.entries)
			case r < 87:
				expect("flush", x.Flush(), nil)
			case r < 93: // clean close and reopen: the file is trimmed
				expect("close", x.Close(), nil)
				reopen(8 + rng.IntN(400))
				m.capacity = len(m.entries)
			default: // flush, crash, reopen: the segment checks and rebuilds
				expect("flush", x.Flush(), nil)
				crash(t, x.m)
				reopen(max(8+rng.IntN(400), len(m.entries)*8))
				if x.Entries() != m.capacity {
					t.Fatalf("op %d: reopened after crash with %d entries, want the file's %d slots", op, x.Entries(), m.capacity)
				}
				err := x.SanityCheck(m.logSize())
				if len(m.entries) == m.capacity {
					expect("sanity check of a full index after crash", err, nil)
				} else {
					expect("sanity check after crash", err, ErrCorruptIndex)
					expect("reset", x.Reset(), nil)
					m.capacity = m.maxBytes / 8
					for _, e := range m.entries {
						expect("rebuild", x.Append(e.Offset, e.Position), nil)
					}
				}
			}
			// The index agrees with the model.
			if x.Entries() != len(m.entries) || x.LastEntry() != m.last() || x.IsFull() != (len(m.entries) >= m.capacity) {
				t.Fatalf("op %d: entries %d last %+v full %v; model %d %+v capacity %d",
					op, x.Entries(), x.LastEntry(), x.IsFull(), len(m.entries), m.last(), m.capacity)
			}
			for range 4 {
				target := m.base - 1 + rng.Int64N(m.last().Offset-m.base+4)
				if got, want := x.Lookup(target), m.lookup(target); got != want {
					t.Fatalf("op %d: Lookup(%d) = %+v, want %+v", op, target, got, want)
				}
			}
			if err := x.SanityCheck(m.logSize()); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		}
	})
}

// timeModel is what a TimeIndex should hold.
type timeModel struct {
	base     int64
	entries  []TimeEntry
	capacity int
	maxBytes int
}

func (m *timeModel) last() TimeEntry {
	if len(m.entries) == 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: m.base}
	}
	return m.entries[len(m.entries)-1]
}

func (m *timeModel) lookup(ts int64) TimeEntry {
	e := TimeEntry{Timestamp: NoTimestamp, Offset: m.base}
	for _, c := range m.entries {
		if c.Timestamp <= ts {
			e = c
		}
	}
	return e
}

func TestTimeIndexModel(t *testing.T) {
	s := seed(t)
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		rng := rand.New(rand.NewPCG(s, 2))
		name := filepath.Join(dir, "00000000000000000500.timeindex")
		m := &timeModel{base: 500, capacity: 24, maxBytes: 24 * 12}
		x, err := OpenTimeIndex(b.fs, name, m.base, m.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = x.Close() }()
		expect := func(op string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) || (want == nil) != (err == nil) {
				t.Fatalf("%s: %v, want %v", op, err, want)
			}
		}
		for op := range modelOps() {
			last := m.last()
			switch r := rng.IntN(100); {
			case r < 60: // an append, maybe with a timestamp that is not new
				ts := last.Timestamp - 2 + rng.Int64N(10)
				off := last.Offset + rng.Int64N(3)
				skip := rng.IntN(10) == 0
				err := x.MaybeAppend(ts, off, skip)
				switch {
				case !skip && len(m.entries) >= m.capacity-1:
					expect("append to full", err, ErrIndexFull)
				case ts <= last.Timestamp:
					expect("append of an old timestamp", err, nil)
				case len(m.entries) >= m.capacity:
					expect("append with no slot", err, ErrIndexFull)
				default:
					expect("append", err, nil)
					m.entries = append(m.entries, TimeEntry{ts, off})
				}
			case r < 65:
				if len(m.entries) > 0 && len(m.entries) < m.capacity-1 {
					expect("append of a lower offset", x.MaybeAppend(last.Timestamp+1, last.Offset-1, false), ErrInvalidEntry)
				}
			case r < 75:
				to := m.base - 1 + rng.Int64N(last.Offset-m.base+3)
				expect("truncate", x.TruncateTo(to), nil)
				keep := 0
				for keep < len(m.entries) && m.entries[keep].Offset < to {
					keep++
				}
				m.entries = m.entries[:keep]
			case r < 77:
				expect("reset", x.Reset(), nil)
				m.entries, m.capacity = nil, m.maxBytes/12
			case r < 83:
				size := len(m.entries)*12 + rng.IntN(300)
				expect("resize", x.Resize(size), nil)
				m.capacity = size / 12
				if size >= 12 {
					m.maxBytes = size
				}
			case r < 87:
				expect("trim", x.TrimToValidSize(), nil)
				m.capacity = len(m.entries)
			case r < 89:
				expect("flush", x.Flush(), nil)
			default:
				expect("close", x.Close(), nil)
				maxBytes := 12 + rng.IntN(400)
				if x, err = OpenTimeIndex(b.fs, name, m.base, maxBytes); err != nil {
					t.Fatal(err)
				}
				m.capacity, m.maxBytes = len(m.entries), maxBytes
			}
			if x.Entries() != len(m.entries) || x.LastEntry() != m.last() || x.IsFull() != (len(m.entries) >= m.capacity-1) {
				t.Fatalf("op %d: entries %d last %+v full %v; model %d %+v capacity %d",
					op, x.Entries(), x.LastEntry(), x.IsFull(), len(m.entries), m.last(), m.capacity)
			}
			for range 4 {
				ts := -2 + rng.Int64N(m.last().Timestamp+5)
				if got, want := x.Lookup(ts), m.lookup(ts); got != want {
					t.Fatalf("op %d: Lookup(%d) = %+v, want %+v", op, ts, got, want)
				}
			}
			if err := x.SanityCheck(m.last().Offset + 1); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		}
	})
}
