package index

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/strata-log/strata/vfs"
)

// mmapFile is the file under an index: an array of fixed-width entries. When
// the file is an OS file (it implements vfs.Fder) data is a MAP_SHARED
// mapping of it, so writes reach the page cache at once and Flush is an
// msync. Otherwise data is a heap copy: the changed byte range is tracked and
// written back with WriteAt on flush, resize and close, and Flush adds a Sync.
// Either way a crash keeps only what was flushed, and callers see the same
// behaviour. A heap copy holds only a prefix of the file, at least its
// entries: the file's bytes past it are zeros (the unused slots of a
// preallocated file), and it grows as entries are appended, so an index
// preallocated and never filled costs no memory.
//
// One writer (append, truncate, resize, close) and many readers. The writer
// fills an entry's bytes and then publishes the new count with an atomic
// store; readers load the count and read only entries below it, so they never
// see a half-written entry. Appends take no lock: a reader never reads the
// slot being written. Everything that replaces data or drops entries takes mu
// in write mode, readers take it in read mode, so no reader sees an unmapped
// or shrunk array, nor a slot reused after a truncation.
type mmapFile struct {
	fs        vfs.FS
	name      string
	f         vfs.File
	entrySize int
	maxBytes  int  // the size reset preallocates to (before rounding to entries)
	mapped    bool // data is a mapping of f; otherwise a heap copy

	mu     sync.RWMutex
	data   []byte // the file's bytes (a heap copy: a prefix of them)
	size   int    // the file's size
	closed bool

	entries  atomic.Int64 // published entries; their bytes are complete
	capacity atomic.Int64 // size / entrySize

	// Mapped file only, writer side: the bytes [0, allocated) are known to
	// have disk blocks (see reserve).
	allocated int

	// Heap copy only: the bytes [dirtyLo, dirtyHi) of data may differ from
	// the file.
	dirtyMu          sync.Mutex
	dirtyLo, dirtyHi int

	// flushMu serializes flushes, so that a Flush does not return while an
	// earlier, concurrent one is still writing back bytes it took over.
	flushMu sync.Mutex
}

// openFile opens or creates name. A new file is preallocated to maxBytes
// rounded down to a multiple of entrySize and has no entries; an existing file
// keeps its size and has size/entrySize entries.
func openFile(fsys vfs.FS, name string, entrySize, maxBytes int) (*mmapFile, error) {
	if maxBytes < entrySize {
		return nil, fmt.Errorf("%w: %s: max index size %d is below one %d-byte entry",
			ErrInvalidArgument, name, maxBytes, entrySize)
	}
	created := false
	if _, err := fsys.Stat(name); errors.Is(err, fs.ErrNotExist) {
		created = true
	} else if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", name, err)
	}
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", name, err)
	}
	m := &mmapFile{fs: fsys, name: name, f: f, entrySize: entrySize}
	_, m.mapped = f.(vfs.Fder)
	m.maxBytes = maxBytes
	if err := m.load(created, maxBytes); err != nil {
		f.Close()
		if created {
			_ = fsys.Remove(name)
		}
		return nil, fmt.Errorf("index: open %s: %w", name, err)
	}
	return m, nil
}

func (m *mmapFile) load(created bool, maxBytes int) error {
	var size int
	if created {
		size = maxBytes / m.entrySize * m.entrySize
		if err := m.f.Truncate(int64(size)); err != nil {
			return err
		}
	} else {
		st, err := m.f.Stat()
		if err != nil {
			return err
		}
		if st.Size() > int64(maxFileSize) {
			return fmt.Errorf("%w: file size %d is too large for an index", ErrCorruptIndex, st.Size())
		}
		size = int(st.Size())
	}
	var data []byte
	if m.mapped || !created {
		// A new heap copy starts empty: the file is all zeros.
		var err error
		if data, err = m.mapData(size); err != nil {
			return err
		}
	}
	m.data, m.size = data, size
	m.capacity.Store(int64(size / m.entrySize))
	if !created {
		m.entries.Store(int64(size / m.entrySize))
	}
	return nil
}

// maxFileSize bounds the size of an index file: more entries than relative
// offsets exist cannot be valid.
const maxFileSize = (MaxRelativeOffset + 1) * timeEntrySize

// mapData returns the first size bytes of the file: a fresh mapping or a heap
// copy.
func (m *mmapFile) mapData(size int) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	if m.mapped {
		fd := int(m.f.(vfs.Fder).Fd())
		b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("mmap: %w", err)
		}
		return b, nil
	}
	b := make([]byte, size)
	n, err := m.f.ReadAt(b, 0)
	if n == size {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

// allocChunk is how much of a mapped file reserve backs at a time: one
// write every 8192 offset entries.
const allocChunk = 64 << 10

// zeroChunk is what reserve writes.
var zeroChunk [allocChunk]byte

// reserve makes sure the disk blocks under slot i are allocated, and its page
// is in the page cache, before the writer fills it through the mapping: it
// writes zeros over the unused slots from i to the next allocChunk boundary
// with an ordinary write. A write to a hole of a mapped file that the file
// system cannot fill (a full disk) is a SIGBUS that kills the process; this
// turns it into an error from Append. (fallocate would allocate too, but
// leaves unwritten extents whose first write through the mapping is as slow
// as a hole's.) Writer side; a no-op for a heap copy.
func (m *mmapFile) reserve(i int) error {
	end := (i + 1) * m.entrySize
	if !m.mapped {
		if end > len(m.data) {
			m.grow(end)
		}
		return nil
	}
	if end <= m.allocated {
		return nil
	}
	next := min(len(m.data), max(end, m.allocated+allocChunk))
	// Slots from i on are unused (i is the next entry): writing zeros there
	// changes nothing a reader can see.
	from := max(m.allocated, i*m.entrySize)
	if _, err := m.f.WriteAt(zeroChunk[:next-from], int64(from)); err != nil {
		return fmt.Errorf("index: allocate %s: %w", m.name, err)
	}
	m.allocated = next
	return nil
}

// minHeapCopy is the least a heap copy grows to, in bytes.
const minHeapCopy = 512

// grow extends a heap copy to hold at least the first end bytes of the file
// (past its old length, zeros, as the file is there), doubling it, at most
// to the file's size. Writer side.
func (m *mmapFile) grow(end int) {
	data := make([]byte, min(m.size, max(end, 2*len(m.data), minHeapCopy)))
	copy(data, m.data)
	m.mu.Lock()
	m.data = data
	m.mu.Unlock()
}

// slot returns entry i's bytes. Readers hold mu in read mode; the writer needs
// no lock, as only it replaces data.
func (m *mmapFile) slot(i int) []byte {
	off := i * m.entrySize
	return m.data[off : off+m.entrySize : off+m.entrySize]
}

// published makes entry i, whose bytes the writer has just filled, visible:
// readers that load the new count see the complete entry.
func (m *mmapFile) published(i int) {
	if !m.mapped {
		m.markDirty(i*m.entrySize, (i+1)*m.entrySize)
	}
	m.entries.Store(int64(i + 1))
}

// rlock takes mu in read mode and returns the data and the published count,
// consistent with each other until the caller's RUnlock.
func (m *mmapFile) rlock() ([]byte, int) {
	m.mu.RLock()
	return m.data, int(m.entries.Load())
}

// truncateFrom drops the entries from the first whose offset, relative to
// base, is at or past offset's (rel reads it from an entry's bytes; entries
// are in offset order), and returns how many entries are kept. An offset past
// the last entry keeps them all.
func (m *mmapFile) truncateFrom(base, offset int64, rel func(slot []byte) int64) (int, error) {
	if m.closed {
		return 0, ErrClosed
	}
	n := int(m.entries.Load())
	keep := n
	switch {
	case offset <= base:
		keep = 0
	case offset-base <= MaxRelativeOffset:
		keep = firstGE(n, offset-base, func(i int) int64 { return rel(m.slot(i)) })
	}
	return keep, m.truncate(keep)
}

// truncate drops the entries from n on. Their bytes are zeroed, so a file
// that is not trimmed before a crash holds no stale entries past the valid
// ones. It excludes readers: no reader still using the old count can see the
// dropped slots being reused. A heap copy writes the zeros to the file at once
// (without sync), as a mapping would reach the page cache, and stops tracking
// the dropped range: a concurrent Flush must never read slots that the writer
// may be filling again.
func (m *mmapFile) truncate(n int) error {
	old := int(m.entries.Load())
	if n >= old {
		return nil
	}
	lo, hi := n*m.entrySize, old*m.entrySize
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mapped {
		if _, err := m.f.WriteAt(make([]byte, hi-lo), int64(lo)); err != nil {
			return fmt.Errorf("index: truncate %s: %w", m.name, err)
		}
		m.dirtyMu.Lock()
		m.dirtyHi = min(m.dirtyHi, lo)
		m.dirtyLo = min(m.dirtyLo, m.dirtyHi)
		m.dirtyMu.Unlock()
	}
	clear(m.data[lo:hi])
	m.entries.Store(int64(n))
	return nil
}

// resize sets the file's size, which the caller has checked holds the valid
// entries, and maps or copies it again.
func (m *mmapFile) resize(size int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if err := m.resizeLocked(size); err != nil {
		return fmt.Errorf("index: resize %s to %d bytes: %w", m.name, size, err)
	}
	return nil
}

func (m *mmapFile) resizeLocked(size int) error {
	old := m.size
	if size == old {
		return nil
	}
	if !m.mapped {
		// Write back first, so that the file holds what a mapping would.
		if err := m.writeBack(size); err != nil {
			return err
		}
		if err := m.f.Truncate(int64(size)); err != nil {
			return err
		}
		// The bytes the file gained are zeros: the copy need not hold them.
		data := make([]byte, min(size, len(m.data)))
		copy(data, m.data)
		m.data, m.size = data, size
		m.capacity.Store(int64(size / m.entrySize))
		return nil
	}
	if err := m.f.Truncate(int64(size)); err != nil {
		return err
	}
	data, err := m.mapData(size)
	if err != nil {
		// The old mapping stays in use: give the file its old size back.
		_ = m.f.Truncate(int64(old))
		return err
	}
	var uerr error
	if m.data != nil {
		uerr = unix.Munmap(m.data)
	}
	m.data, m.size = data, size
	m.allocated = min(m.allocated, size)
	m.capacity.Store(int64(size / m.entrySize))
	if uerr != nil {
		return fmt.Errorf("munmap: %w", uerr)
	}
	return nil
}

// markDirty records that data[lo:hi] changed (heap copy only).
func (m *mmapFile) markDirty(lo, hi int) {
	m.dirtyMu.Lock()
	if m.dirtyLo == m.dirtyHi {
		m.dirtyLo, m.dirtyHi = lo, hi
	} else {
		m.dirtyLo, m.dirtyHi = min(m.dirtyLo, lo), max(m.dirtyHi, hi)
	}
	m.dirtyMu.Unlock()
}

// writeBack writes the changed bytes below limit to the file (heap copy only;
// mu held in either mode). The bytes were filled before they were marked, so
// they are complete; the writer may be filling a later slot meanwhile.
func (m *mmapFile) writeBack(limit int) error {
	m.dirtyMu.Lock()
	lo, hi := m.dirtyLo, min(m.dirtyHi, limit)
	m.dirtyLo, m.dirtyHi = 0, 0
	m.dirtyMu.Unlock()
	if lo >= hi {
		return nil
	}
	if _, err := m.f.WriteAt(m.data[lo:hi], int64(lo)); err != nil {
		m.markDirty(lo, hi)
		return err
	}
	return nil
}

// flush makes the entries durable: msync of the mapping, or a write-back of
// the heap copy, then fsync.
func (m *mmapFile) flush() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	var err error
	if m.mapped {
		if len(m.data) > 0 {
			if err = unix.Msync(m.data, unix.MS_SYNC); err != nil {
				err = fmt.Errorf("msync: %w", err)
			}
		}
	} else {
		err = m.writeBack(len(m.data))
	}
	if err == nil {
		err = m.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("index: flush %s: %w", m.name, err)
	}
	return nil
}

// close releases the mapping and the file. With trim the file is first cut
// to its valid entries (and the heap copy written back); without, it is left
// as it is (it is about to be removed). A second close does nothing.
func (m *mmapFile) close(trim bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	valid := int(m.entries.Load()) * m.entrySize
	var errs []error
	if m.mapped {
		if m.data != nil {
			if err := unix.Munmap(m.data); err != nil {
				errs = append(errs, fmt.Errorf("munmap: %w", err))
			}
		}
	} else if trim {
		errs = append(errs, m.writeBack(valid))
	}
	if trim && valid != m.size {
		errs = append(errs, m.f.Truncate(int64(valid)))
	}
	errs = append(errs, m.f.Close())
	m.data = nil
	m.entries.Store(0)
	m.capacity.Store(0)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("index: close %s: %w", m.name, err)
	}
	return nil
}

// remove closes without trimming and removes the file. A file already gone
// is not an error.
func (m *mmapFile) remove() error {
	cerr := m.close(false)
	if err := m.fs.Remove(m.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("index: delete %s: %w", m.name, err)
	}
	return cerr
}

// reset drops every entry and preallocates the file to maxBytes again, ready
// for a rebuild.
func (m *mmapFile) reset() error {
	if m.closed {
		return ErrClosed
	}
	if err := m.truncate(0); err != nil {
		return err
	}
	return m.resize(m.maxBytes / m.entrySize * m.entrySize)
}

// preallocate resizes the file to maxBytes rounded down to whole entries and
// makes that the size reset preallocates to. maxBytes below the valid
// entries is ErrInvalidArgument.
func (m *mmapFile) preallocate(maxBytes int) error {
	if m.closed {
		return ErrClosed
	}
	size := maxBytes / m.entrySize * m.entrySize
	if n := int(m.entries.Load()); maxBytes < 0 || size < n*m.entrySize {
		return fmt.Errorf("%w: %s: size %d cannot hold its %d entries", ErrInvalidArgument, m.name, maxBytes, n)
	}
	if err := m.resize(size); err != nil {
		return err
	}
	if maxBytes >= m.entrySize {
		m.maxBytes = maxBytes
	}
	return nil
}

// trim shrinks the file to its entries.
func (m *mmapFile) trim() error {
	if m.closed {
		return ErrClosed
	}
	return m.resize(int(m.entries.Load()) * m.entrySize)
}
