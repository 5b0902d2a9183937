package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"sync"

	"github.com/strata-log/strata/vfs"
)

// The transaction index (.txnindex), Kafka's format: one 34-byte entry per
// transaction aborted in the segment (its ABORT marker is in the segment),
// in the order of the markers, no header. Integers are big-endian.
//
//	 0  int16  version           0
//	 2  int64  producerId
//	10  int64  firstOffset       the transaction's first offset (maybe in an
//	                             earlier segment)
//	18  int64  lastOffset        the offset of its ABORT marker
//	26  int64  lastStableOffset  the partition's LSO once it was aborted
//
// Unlike the offset and time indexes it is not preallocated: the file is
// created by the first Append and grows by one entry per abort, so a file
// that is not a whole number of entries has a torn tail. A READ_COMMITTED
// fetch of [from, to) collects the entries of each segment from the one
// holding from on, until an entry's lastStableOffset reaches to.

// TxnEntrySize is the size of a .txnindex entry.
const TxnEntrySize = 34

// AbortedTxn is one entry of a transaction index: producer ProducerID's
// transaction from FirstOffset to its ABORT marker at LastOffset, after
// which the last stable offset was LastStableOffset.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

func (t AbortedTxn) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(t.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(t.LastStableOffset))
}

// parseTxn decodes an entry and its version.
func parseTxn(b []byte) (AbortedTxn, int16) {
	be := binary.BigEndian
	return AbortedTxn{
		ProducerID:       int64(be.Uint64(b[2:])),
		FirstOffset:      int64(be.Uint64(b[10:])),
		LastOffset:       int64(be.Uint64(b[18:])),
		LastStableOffset: int64(be.Uint64(b[26:])),
	}, int16(be.Uint16(b))
}

// TxnIndex is a segment's transaction index. Append, TruncateTo, Reset,
// RecoverTail, Close and Delete are the writer's (serialized by the caller,
// as for the other indexes); Collect, All, Entries, SanityCheck and Flush
// may run concurrently with them and with each other.
type TxnIndex struct {
	fsys vfs.FS
	name string
	base int64

	// mu is held in read mode by readers and Flush, in write mode by the
	// writer's operations: the index is small and aborts are rare.
	mu      sync.RWMutex
	f       vfs.File // nil until the file exists
	size    int64    // bytes in the file (a torn tail included)
	last    int64    // LastOffset of the last whole entry, -1 if none
	created bool     // the file was created since the last Flush: sync its directory too
	closed  bool
}

// OpenTxnIndex opens the transaction index name of the segment whose first
// offset is baseOffset. The file is opened if it exists and created by the
// first Append otherwise, as Kafka does. A torn tail is not checked here:
// SanityCheck reports it, and reads ignore a partial last entry.
func OpenTxnIndex(fsys vfs.FS, name string, baseOffset int64) (*TxnIndex, error) {
	if baseOffset < 0 {
		return nil, fmt.Errorf("%w: %s: negative base offset %d", ErrInvalidArgument, name, baseOffset)
	}
	x := &TxnIndex{fsys: fsys, name: name, base: baseOffset, last: -1}
	if _, err := fsys.Stat(name); errors.Is(err, fs.ErrNotExist) {
		return x, nil
	} else if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", name, err)
	}
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("index: open %s: %w", name, err)
	}
	x.f, x.size = f, st.Size()
	if n := x.size / TxnEntrySize; n > 0 {
		var b [TxnEntrySize]byte
		if _, err := f.ReadAt(b[:], (n-1)*TxnEntrySize); err != nil {
			f.Close()
			return nil, fmt.Errorf("index: open %s: %w", name, err)
		}
		t, _ := parseTxn(b[:])
		x.last = t.LastOffset
	}
	return x, nil
}

// Name returns the file name the index was opened with.
func (x *TxnIndex) Name() string { return x.name }

// BaseOffset returns the base offset of the index's segment.
func (x *TxnIndex) BaseOffset() int64 { return x.base }

// Entries returns the number of whole entries.
func (x *TxnIndex) Entries() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return int(x.size / TxnEntrySize)
}

// Append adds the entry of an aborted transaction. Its LastOffset must be
// above the last entry's (ErrInvalidEntry otherwise), and FirstOffset at
// most LastOffset. The entry is durable after Flush. A write error leaves
// the file as it was, or with a torn tail that the next Append overwrites.
func (x *TxnIndex) Append(t AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("%w: %s", ErrClosed, x.name)
	}
	if t.LastOffset <= x.last || t.FirstOffset > t.LastOffset || t.FirstOffset < 0 {
		return fmt.Errorf("%w: %s: aborted transaction %+v after last offset %d", ErrInvalidEntry, x.name, t, x.last)
	}
	if x.f == nil {
		f, err := x.fsys.Create(x.name)
		if err != nil {
			return fmt.Errorf("index: create %s: %w", x.name, err)
		}
		x.f, x.size, x.created = f, 0, true
	}
	// Write at the end of the whole entries: over a torn tail, if any.
	at := x.size / TxnEntrySize * TxnEntrySize
	if _, err := x.f.WriteAt(t.appendTo(make([]byte, 0, TxnEntrySize)), at); err != nil {
		return fmt.Errorf("index: append to %s: %w", x.name, err)
	}
	x.size = at + TxnEntrySize
	x.last = t.LastOffset
	return nil
}

// scanBuf is how many entries scan reads at once.
const scanBuf = 120

// scan calls fn with each whole entry from byte position start on and its
// position, stopping when fn returns false. Callers hold mu.
func (x *TxnIndex) scan(start int64, fn func(t AbortedTxn, version int16, pos int64) bool) error {
	if x.closed {
		return fmt.Errorf("%w: %s", ErrClosed, x.name)
	}
	if x.f == nil {
		return nil
	}
	end := x.size / TxnEntrySize * TxnEntrySize
	buf := make([]byte, scanBuf*TxnEntrySize)
	for pos := start; pos < end; {
		n := min(int64(len(buf)), end-pos)
		if _, err := x.f.ReadAt(buf[:n], pos); err != nil {
			return fmt.Errorf("index: read %s: %w", x.name, err)
		}
		for i := int64(0); i < n; i += TxnEntrySize {
			t, v := parseTxn(buf[i:])
			if !fn(t, v, pos+i) {
				return nil
			}
		}
		pos += n
	}
	return nil
}

// Collect returns the aborted transactions that overlap the fetch range
// [from, to): LastOffset >= from and FirstOffset < to. complete reports that
// an entry's LastStableOffset reached to, so no later segment can hold one
// that overlaps (Kafka's TxnIndexSearchResult.isComplete); otherwise the
// caller goes on with the next segment's index.
func (x *TxnIndex) Collect(from, to int64) (txns []AbortedTxn, complete bool, err error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	start, err := x.seek(from)
	if err != nil {
		return nil, false, err
	}
	err = x.scan(start, func(t AbortedTxn, _ int16, _ int64) bool {
		if t.LastOffset >= from && t.FirstOffset < to {
			txns = append(txns, t)
		}
		complete = t.LastStableOffset >= to
		return !complete
	})
	return txns, complete, err
}

// seek returns the byte position of the first whole entry whose LastOffset
// is at least from. Entries are in LastOffset order (Append keeps them so,
// as Kafka's does), so no entry before it overlaps a range that starts at
// from, nor can it end the search: its LastStableOffset is at most its
// LastOffset + 1. An index that fits scan's buffer is read whole anyway;
// a larger one (a segment with many aborts, read by every READ_COMMITTED
// fetch) is binary-searched, one 8-byte read per probe. Callers hold mu.
func (x *TxnIndex) seek(from int64) (int64, error) {
	n := x.size / TxnEntrySize
	if x.f == nil || x.closed || n <= scanBuf {
		return 0, nil
	}
	var (
		b   [8]byte
		err error
	)
	i := sort.Search(int(n), func(i int) bool {
		if err != nil {
			return true
		}
		// LastOffset follows the version, the producer id and FirstOffset.
		if _, err = x.f.ReadAt(b[:], int64(i)*TxnEntrySize+2+8+8); err != nil {
			return true
		}
		return int64(binary.BigEndian.Uint64(b[:])) >= from
	})
	if err != nil {
		return 0, fmt.Errorf("index: read %s: %w", x.name, err)
	}
	return int64(i) * TxnEntrySize, nil
}

// All returns every entry.
func (x *TxnIndex) All() ([]AbortedTxn, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var all []AbortedTxn
	err := x.scan(0, func(t AbortedTxn, _ int16, _ int64) bool { all = append(all, t); return true })
	return all, err
}

// TruncateTo drops the entries whose LastOffset is at or above offset (the
// log is truncated to offset), and a torn tail.
func (x *TxnIndex) TruncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("%w: %s", ErrClosed, x.name)
	}
	keep, last := int64(0), int64(-1)
	err := x.scan(0, func(t AbortedTxn, _ int16, pos int64) bool {
		if t.LastOffset >= offset {
			return false
		}
		keep, last = pos+TxnEntrySize, t.LastOffset
		return true
	})
	if err != nil {
		return err
	}
	return x.truncate(keep, last)
}

func (x *TxnIndex) truncate(size, last int64) error {
	if x.f == nil || size == x.size {
		return nil
	}
	if err := x.f.Truncate(size); err != nil {
		return fmt.Errorf("index: truncate %s: %w", x.name, err)
	}
	x.size, x.last = size, last
	return nil
}

// Reset drops every entry, to rebuild the index from the .log.
func (x *TxnIndex) Reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("%w: %s", ErrClosed, x.name)
	}
	return x.truncate(0, -1)
}

// check returns the reason the entry at pos, after one whose LastOffset was
// prev, is invalid, or "".
func (x *TxnIndex) check(t AbortedTxn, version int16, prev int64) string {
	switch {
	case version != 0:
		return fmt.Sprintf("version %d", version)
	case t.LastOffset < x.base:
		return fmt.Sprintf("last offset %d below the base offset %d", t.LastOffset, x.base)
	case t.LastOffset <= prev:
		return fmt.Sprintf("last offset %d not above the previous %d", t.LastOffset, prev)
	case t.FirstOffset < 0 || t.FirstOffset > t.LastOffset:
		return fmt.Sprintf("first offset %d outside [0, last offset %d]", t.FirstOffset, t.LastOffset)
	}
	return ""
}

// SanityCheck reports an ErrCorruptIndex if the file is not a whole number
// of entries (a torn tail), or an entry has another version than 0, a
// LastOffset below the base offset (Kafka's check) or not above the one
// before, or a FirstOffset after its LastOffset. The cure is RecoverTail
// (keeping the valid entries before the damage) or Reset and a rebuild.
func (x *TxnIndex) SanityCheck() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.size%TxnEntrySize != 0 {
		return corrupt(x.name, "size %d is not a multiple of %d", x.size, TxnEntrySize)
	}
	var bad string
	prev := int64(-1)
	err := x.scan(0, func(t AbortedTxn, v int16, pos int64) bool {
		if r := x.check(t, v, prev); r != "" {
			bad = fmt.Sprintf("entry %d: %s", pos/TxnEntrySize, r)
			return false
		}
		prev = t.LastOffset
		return true
	})
	if err != nil {
		return err
	}
	if bad != "" {
		return corrupt(x.name, "%s", bad)
	}
	return nil
}

// RecoverTail drops what a crash can leave after the valid entries: a
// partial entry, and every entry from the first that SanityCheck would
// reject (zeros or garbage written but not synced), then syncs the file. It
// returns how many whole entries it dropped. The entries it keeps pass
// SanityCheck; the flushed ones are intact. It cannot do more: entries carry
// no checksum (as in Kafka), so unsynced garbage that happens to read as
// valid entries stays, and aborts not flushed before a crash are missing.
// Recovery after an unclean shutdown therefore rebuilds the index of every
// segment past the recovery point from the .log, as Kafka does.
func (x *TxnIndex) RecoverTail() (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return 0, fmt.Errorf("%w: %s", ErrClosed, x.name)
	}
	keep, prev := int64(0), int64(-1)
	err := x.scan(0, func(t AbortedTxn, v int16, pos int64) bool {
		if x.check(t, v, prev) != "" {
			return false
		}
		keep, prev = pos+TxnEntrySize, t.LastOffset
		return true
	})
	if err != nil {
		return 0, err
	}
	dropped := int((x.size - keep) / TxnEntrySize)
	if err := x.truncate(keep, prev); err != nil {
		return 0, err
	}
	if x.f != nil {
		if err := x.f.Sync(); err != nil {
			return 0, fmt.Errorf("index: sync %s: %w", x.name, err)
		}
	}
	return dropped, nil
}

// Flush makes the entries durable: fsync of the file and, the first time
// after the file was created, of its directory.
func (x *TxnIndex) Flush() error {
	x.mu.Lock() // created is cleared; Flush is rare
	defer x.mu.Unlock()
	if x.f == nil || x.closed {
		return nil
	}
	if err := x.f.Sync(); err != nil {
		return fmt.Errorf("index: sync %s: %w", x.name, err)
	}
	if x.created {
		if err := x.fsys.SyncDir(filepath.Dir(x.name)); err != nil {
			return fmt.Errorf("index: sync directory of %s: %w", x.name, err)
		}
		x.created = false
	}
	return nil
}

// Close closes the file; it does not flush. Later changes return ErrClosed.
func (x *TxnIndex) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	if x.f == nil {
		return nil
	}
	if err := x.f.Close(); err != nil {
		return fmt.Errorf("index: close %s: %w", x.name, err)
	}
	return nil
}

// Delete closes the index and removes its file, if any; the caller syncs
// the directory.
func (x *TxnIndex) Delete() error {
	if err := x.Close(); err != nil {
		return err
	}
	if err := x.fsys.Remove(x.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("index: remove %s: %w", x.name, err)
	}
	return nil
}
