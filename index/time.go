package index

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-log/strata/vfs"
)

const (
	timeEntrySize = 12
	timeWarm      = warmBytes / timeEntrySize

	// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: the timestamp of the
	// entry an empty time index (or a lookup before its first entry) returns.
	NoTimestamp = -1
)

// TimeEntry is a time index entry: Timestamp is the largest timestamp of the
// segment's records up to Offset, and Offset is where that timestamp was first
// reached. So every record with a larger timestamp comes after Offset.
type TimeEntry struct {
	Timestamp int64 // milliseconds since the Unix epoch
	Offset    int64 // absolute offset
}

// TimeIndex maps timestamps to offsets in a segment: a sparse array of
// 12-byte entries in the .timeindex file, strictly increasing in timestamp and
// non-decreasing in offset. See the package documentation for the layout, the
// lifecycle and the concurrency contract.
type TimeIndex struct {
	m    *mmapFile
	base int64
	last TimeEntry // the writer's copy of the last entry
}

// OpenTimeIndex opens or creates the time index name of the segment whose
// first offset is baseOffset. A new file is preallocated to maxBytes rounded
// down to a multiple of 12 and is empty; an existing file keeps its size and
// holds size/12 entries (see OpenOffsetIndex).
func OpenTimeIndex(fsys vfs.FS, name string, baseOffset int64, maxBytes int) (*TimeIndex, error) {
	if baseOffset < 0 {
		return nil, fmt.Errorf("%w: %s: negative base offset %d", ErrInvalidArgument, name, baseOffset)
	}
	m, err := openFile(fsys, name, timeEntrySize, maxBytes)
	if err != nil {
		return nil, err
	}
	x := &TimeIndex{m: m, base: baseOffset}
	x.last = x.entryOrEmpty(int(m.entries.Load()) - 1)
	return x, nil
}

// Name returns the file name the index was opened with.
func (x *TimeIndex) Name() string { return x.m.name }

// BaseOffset returns the base offset of the index's segment.
func (x *TimeIndex) BaseOffset() int64 { return x.base }

// Entries returns the number of entries.
func (x *TimeIndex) Entries() int { return int(x.m.entries.Load()) }

// IsFull reports whether at most one slot is free. As in Kafka, the last slot
// is kept for the entry the roll adds (MaybeAppend with skipFullCheck), so
// the segment's largest timestamp can always be indexed.
func (x *TimeIndex) IsFull() bool { return x.m.entries.Load() >= x.m.capacity.Load()-1 }

// CanAppendOffset reports whether offset can be stored relative to the base
// offset.
func (x *TimeIndex) CanAppendOffset(offset int64) bool {
	return offset >= x.base && offset-x.base <= MaxRelativeOffset
}

func (x *TimeIndex) parse(b []byte) TimeEntry {
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(b)),
		Offset:    x.base + int64(binary.BigEndian.Uint32(b[8:])),
	}
}

// entryOrEmpty returns entry i, or {NoTimestamp, baseOffset} if i < 0.
// Writer side.
func (x *TimeIndex) entryOrEmpty(i int) TimeEntry {
	if i < 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: x.base}
	}
	return x.parse(x.m.slot(i))
}

// LastEntry returns the last entry, or {NoTimestamp, baseOffset} when there is
// none.
func (x *TimeIndex) LastEntry() TimeEntry {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if n == 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: x.base}
	}
	return x.parse(data[(n-1)*timeEntrySize:])
}

// Entry returns entry i, and false if there is no such entry.
func (x *TimeIndex) Entry(i int) (TimeEntry, bool) {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if i < 0 || i >= n {
		return TimeEntry{}, false
	}
	return x.parse(data[i*timeEntrySize:]), true
}

// MaybeAppend adds the entry (ts, offset) if ts is above the last entry's
// timestamp (Kafka's rule; NoTimestamp when empty, so negative timestamps are
// never indexed) and does nothing otherwise. offset below the last entry's
// offset, below the base offset or more than MaxRelativeOffset above it is
// ErrInvalidEntry. IsFull returns ErrIndexFull unless skipFullCheck, which
// the roll uses to add the segment's final entry in the slot kept for it; a
// file with no free slot at all is ErrIndexFull regardless. Errors change
// nothing.
func (x *TimeIndex) MaybeAppend(ts, offset int64, skipFullCheck bool) error {
	m := x.m
	if m.closed {
		return ErrClosed
	}
	n := int(m.entries.Load())
	if !skipFullCheck && x.IsFull() {
		return fmt.Errorf("%w: %s holds %d entries", ErrIndexFull, m.name, n)
	}
	switch {
	case n > 0 && offset < x.last.Offset:
		return fmt.Errorf("%w: %s: offset %d below the last offset %d",
			ErrInvalidEntry, m.name, offset, x.last.Offset)
	case !x.CanAppendOffset(offset):
		return fmt.Errorf("%w: %s: offset %d outside [%d, %d]",
			ErrInvalidEntry, m.name, offset, x.base, x.base+MaxRelativeOffset)
	}
	if ts <= x.last.Timestamp {
		return nil
	}
	if n >= int(m.capacity.Load()) {
		return fmt.Errorf("%w: %s holds %d entries", ErrIndexFull, m.name, n)
	}
	if err := m.reserve(n); err != nil {
		return err
	}
	b := m.slot(n)
	binary.BigEndian.PutUint64(b, uint64(ts))
	binary.BigEndian.PutUint32(b[8:], uint32(offset-x.base))
	m.published(n)
	x.last = TimeEntry{Timestamp: ts, Offset: offset}
	return nil
}

// Lookup returns the entry with the largest timestamp <= ts: the first record
// with a timestamp >= ts is in or after the batch holding its offset. With no
// such entry it returns {NoTimestamp, baseOffset}, the start of the segment.
func (x *TimeIndex) Lookup(ts int64) TimeEntry {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	slot := largestLE(n, timeWarm, ts, func(i int) int64 {
		return int64(binary.BigEndian.Uint64(data[i*timeEntrySize:]))
	})
	if slot < 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: x.base}
	}
	return x.parse(data[slot*timeEntrySize:])
}

// TruncateTo removes the entries whose offset is >= offset. Truncating to an
// offset above the last entry changes nothing.
func (x *TimeIndex) TruncateTo(offset int64) error {
	// Offsets may repeat (a later entry can raise the timestamp of the same
	// offset), so the cut is at the first entry at or past offset.
	keep, err := x.m.truncateFrom(x.base, offset, func(slot []byte) int64 {
		return int64(binary.BigEndian.Uint32(slot[8:]))
	})
	if err != nil {
		return err
	}
	x.last = x.entryOrEmpty(keep - 1)
	return nil
}

// Reset removes every entry and preallocates the file again to the maximum
// size given to OpenTimeIndex (or to the last Resize), ready for a rebuild.
func (x *TimeIndex) Reset() error {
	if x.m.closed {
		return ErrClosed
	}
	err := x.m.reset()
	x.last = x.entryOrEmpty(x.Entries() - 1)
	return err
}

// Resize preallocates the file to maxBytes rounded down to a multiple of 12
// and makes that the size Reset preallocates to. maxBytes below the valid
// entries is ErrInvalidArgument.
func (x *TimeIndex) Resize(maxBytes int) error { return x.m.preallocate(maxBytes) }

// TrimToValidSize shrinks the file to its entries, as on roll; afterwards the
// index is full.
func (x *TimeIndex) TrimToValidSize() error { return x.m.trim() }

// SanityCheck reports, as an ErrCorruptIndex naming the file and the reason,
// a time index that cannot be trusted: a file size that is not a multiple of
// 12, a negative timestamp, a timestamp not above the one before, an offset
// below the one before, or an offset outside [baseOffset, nextOffset) where
// nextOffset is the offset after the segment's last record. The caller then
// resets the index and rebuilds it from the .log.
func (x *TimeIndex) SanityCheck(nextOffset int64) error {
	data, n := x.m.rlock()
	defer x.m.mu.RUnlock()
	if x.m.closed {
		return ErrClosed
	}
	if x.m.size%timeEntrySize != 0 {
		return corrupt(x.m.name, "file size %d is not a multiple of %d", x.m.size, timeEntrySize)
	}
	var prev TimeEntry
	for i := range n {
		e := x.parse(data[i*timeEntrySize:])
		switch {
		case e.Timestamp < 0:
			return corrupt(x.m.name, "entry %d: negative timestamp %d", i, e.Timestamp)
		case i > 0 && e.Timestamp <= prev.Timestamp:
			return corrupt(x.m.name, "entry %d: timestamp %d not above the previous timestamp %d", i, e.Timestamp, prev.Timestamp)
		case i > 0 && e.Offset < prev.Offset:
			return corrupt(x.m.name, "entry %d: offset %d below the previous offset %d", i, e.Offset, prev.Offset)
		case e.Offset < x.base || e.Offset >= nextOffset:
			return corrupt(x.m.name, "entry %d: offset %d outside the segment's [%d, %d)", i, e.Offset, x.base, nextOffset)
		}
		prev = e
	}
	return nil
}

// Flush makes the entries durable: msync (or write-back) and fsync. It may
// run concurrently with MaybeAppend.
func (x *TimeIndex) Flush() error { return x.m.flush() }

// Close trims the file to its entries, unmaps it and closes it. It does not
// fsync: Flush first for that. A second Close returns nil.
func (x *TimeIndex) Close() error { return x.m.close(true) }

// Delete closes the index and removes its file; the caller syncs the
// directory. A file already gone is not an error.
func (x *TimeIndex) Delete() error { return x.m.remove() }
