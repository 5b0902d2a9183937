package index

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-log/strata/vfs"
)

const (
	offsetEntrySize = 8
	offsetWarm      = warmBytes / offsetEntrySize

	// MaxRelativeOffset is the largest offset - baseOffset an entry can hold:
	// relative offsets are stored as uint32.
	MaxRelativeOffset = math.MaxUint32
	// MaxPosition is the largest .log byte position an offset index entry can
	// hold: positions are stored as uint32.
	MaxPosition = math.MaxUint32
)

// OffsetEntry is an offset index entry: the batch holding Offset starts at
// byte Position of the .log.
type OffsetEntry struct {
	Offset   int64 // absolute offset
	Position int64 // byte position in the .log
}

// OffsetIndex maps offsets to byte positions in a segment's .log: a sparse,
// sorted array of 8-byte entries in the .index file. See the package
// documentation for the layout, the lifecycle and the concurrency contract.
type OffsetIndex struct {
	m    *mmapFile
	base int64
	last OffsetEntry // the writer's copy of the last entry
}

// OpenOffsetIndex opens or creates the offset index name of the segment whose
// first offset is baseOffset. A new file is preallocated to maxBytes rounded
// down to a multiple of 8 and is empty. An existing file keeps its size and
// holds size/8 entries, as in Kafka: after a crash a preallocated file "has"
// zero entries at its tail, which SanityCheck reports. maxBytes (at least 8)
// is also the size Reset preallocates to again. A file larger than any index
// can be (more entries than relative offsets) is an ErrCorruptIndex from
// Open: remove it and open again.
func OpenOffsetIndex(fsys vfs.FS, name string, baseOffset int64, maxBytes int) (*OffsetIndex, error) {
	if baseOffset < 0 {
		return nil, fmt.Errorf("%w: %s: negative base offset %d", ErrInvalidArgument, name, baseOffset)
	}
	m, err := openFile(fsys, name, offsetEntrySize, maxBytes)
	if err != nil {
		return nil, err
	}
	x := &OffsetIndex{m: m, base: baseOffset}
	x.last = x.entryOrEmpty(int(m.entries.Load()) - 1)
	return x, nil
}

// Name returns the file name the index was opened with.
func (x *OffsetIndex) Name() string { return x.m.name }

// BaseOffset returns the base offset of the index's segment.
func (x *OffsetIndex) BaseOffset() int64 { return x.base }

// Entries returns the number of entries.
func (x *OffsetIndex) Entries() int { return int(x.m.entries.Load()) }

// IsFull reports whether every slot of the file holds an entry.
func (x *OffsetIndex) IsFull() bool { return x.m.entries.Load() >= x.m.capacity.Load() }

// CanAppendOffset reports whether offset can be stored relative to the base
// offset; when it cannot, the segment must roll.
func (x *OffsetIndex) CanAppendOffset(offset int64) bool {
	return offset >= x.base && offset-x.base <= MaxRelativeOffset
}

func (x *OffsetIndex) parse(b []byte) OffsetEntry {
	return OffsetEntry{
		Offset:   x.base + int64(binary.BigEndian.Uint32(b)),
		Position: int64(binary.BigEndian.Uint32(b[4:])),
	}
}

// entryOrEmpty returns entry i, or {baseOffset, 0} if i < 0. Writer side.
func (x *OffsetIndex) entryOrEmpty(i int) OffsetEntry {
	if i < 0 {
		return OffsetEntry{Offset: x.base}
	}
	return x.parse(x.m.slot(i))
}

// LastEntry returns the last entry, or {baseOffset, 0} when there is none.
func (x *OffsetIndex) LastEntry() OffsetEntry {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if n == 0 {
		return OffsetEntry{Offset: x.base}
	}
	return x.parse(data[(n-1)*offsetEntrySize:])
}

// Entry returns entry i, and false if there is no such entry.
func (x *OffsetIndex) Entry(i int) (OffsetEntry, bool) {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if i < 0 || i >= n {
		return OffsetEntry{}, false
	}
	return x.parse(data[i*offsetEntrySize:]), true
}

// Append adds an entry: the batch holding offset starts at position. offset
// must be above the last entry's offset and at most MaxRelativeOffset above
// the base offset; position must be in [0, MaxPosition] and not below the
// last entry's. A full index returns ErrIndexFull, an entry that breaks those
// rules ErrInvalidEntry; either way nothing changes.
func (x *OffsetIndex) Append(offset, position int64) error {
	m := x.m
	if m.closed {
		return ErrClosed
	}
	n := int(m.entries.Load())
	if n >= int(m.capacity.Load()) {
		return fmt.Errorf("%w: %s holds %d entries", ErrIndexFull, m.name, n)
	}
	switch {
	case !x.CanAppendOffset(offset):
		return fmt.Errorf("%w: %s: offset %d outside [%d, %d]",
			ErrInvalidEntry, m.name, offset, x.base, x.base+MaxRelativeOffset)
	case n > 0 && offset <= x.last.Offset:
		return fmt.Errorf("%w: %s: offset %d not above the last offset %d",
			ErrInvalidEntry, m.name, offset, x.last.Offset)
	case position < 0 || position > MaxPosition:
		return fmt.Errorf("%w: %s: position %d outside [0, %d]", ErrInvalidEntry, m.name, position, int64(MaxPosition))
	case n > 0 && position < x.last.Position:
		return fmt.Errorf("%w: %s: position %d below the last position %d",
			ErrInvalidEntry, m.name, position, x.last.Position)
	}
	if err := m.reserve(n); err != nil {
		return err
	}
	b := m.slot(n)
	binary.BigEndian.PutUint32(b, uint32(offset-x.base))
	binary.BigEndian.PutUint32(b[4:], uint32(position))
	m.published(n)
	x.last = OffsetEntry{Offset: offset, Position: position}
	return nil
}

// Lookup returns the entry with the largest offset <= offset: the batch
// holding offset is at or after its position. With no such entry it returns
// {baseOffset, 0}, the start of the segment.
func (x *OffsetIndex) Lookup(offset int64) OffsetEntry {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if offset < x.base {
		return OffsetEntry{Offset: x.base}
	}
	slot := largestLE(n, offsetWarm, offset-x.base, func(i int) int64 {
		return int64(binary.BigEndian.Uint32(data[i*offsetEntrySize:]))
	})
	if slot < 0 {
		return OffsetEntry{Offset: x.base}
	}
	return x.parse(data[slot*offsetEntrySize:])
}

// TruncateTo removes the entries whose offset is >= offset. Truncating to an
// offset above the last entry changes nothing.
func (x *OffsetIndex) TruncateTo(offset int64) error {
	keep, err := x.m.truncateFrom(x.base, offset, func(slot []byte) int64 {
		return int64(binary.BigEndian.Uint32(slot))
	})
	if err != nil {
		return err
	}
	x.last = x.entryOrEmpty(keep - 1)
	return nil
}

// Reset removes every entry and preallocates the file again to the maximum
// size given to OpenOffsetIndex (or to the last Resize), ready for a rebuild
// from the .log.
func (x *OffsetIndex) Reset() error {
	if x.m.closed {
		return ErrClosed
	}
	err := x.m.reset()
	x.last = x.entryOrEmpty(x.Entries() - 1)
	return err
}

// Resize preallocates the file to maxBytes rounded down to a multiple of 8,
// as for the active segment of a reopened log, and makes that the size Reset
// preallocates to. maxBytes below the valid entries is ErrInvalidArgument.
func (x *OffsetIndex) Resize(maxBytes int) error { return x.m.preallocate(maxBytes) }

// TrimToValidSize shrinks the file to its entries, as on roll; afterwards the
// index is full.
func (x *OffsetIndex) TrimToValidSize() error { return x.m.trim() }

// SanityCheck reports, as an ErrCorruptIndex naming the file and the reason,
// an index that cannot be trusted: a file size that is not a multiple of 8,
// an entry whose offset is not above the one before or whose position is
// below it, an offset below the base offset, or a last position at or past
// logSize (the entry would point at no batch). The caller then resets the
// index and rebuilds it from the .log.
func (x *OffsetIndex) SanityCheck(logSize int64) error {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if x.m.closed {
		return ErrClosed
	}
	if x.m.size%offsetEntrySize != 0 {
		return corrupt(x.m.name, "file size %d is not a multiple of %d", x.m.size, offsetEntrySize)
	}
	var prev OffsetEntry
	for i := range n {
		e := x.parse(data[i*offsetEntrySize:])
		switch {
		case e.Offset < x.base:
			return corrupt(x.m.name, "entry %d: offset %d below the base offset %d", i, e.Offset, x.base)
		case i > 0 && e.Offset <= prev.Offset:
			return corrupt(x.m.name, "entry %d: offset %d not above the previous offset %d", i, e.Offset, prev.Offset)
		case i > 0 && e.Position < prev.Position:
			return corrupt(x.m.name, "entry %d: position %d below the previous position %d", i, e.Position, prev.Position)
		}
		prev = e
	}
	if n > 0 && prev.Position >= logSize {
		return corrupt(x.m.name, "last entry: position %d is at or past the end of the %d-byte log", prev.Position, logSize)
	}
	return nil
}

// Flush makes the entries durable: msync (or write-back) and fsync. It may
// run concurrently with Append.
func (x *OffsetIndex) Flush() error { return x.m.flush() }

// Close trims the file to its entries, unmaps it and closes it. It does not
// fsync: Flush first for that. A second Close returns nil.
func (x *OffsetIndex) Close() error { return x.m.close(true) }

// Delete closes the index and removes its file; the caller syncs the
// directory. A file already gone is not an error.
func (x *OffsetIndex) Delete() error { return x.m.remove() }
