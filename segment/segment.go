package segment

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// Errors returned by segments.
var (
	// ErrClosed is returned by a segment whose files have been closed.
	ErrClosed = errors.New("segment: closed")
	// ErrOffsetMismatch is returned by Append when the batch does not start at
	// the segment's next offset.
	ErrOffsetMismatch = errors.New("segment: batch does not start at the next offset")
)

// Config is a segment's configuration. Zero fields take Kafka's defaults.
type Config struct {
	IndexIntervalBytes int // bytes of batches between index entries; 0 → 4096
	MaxIndexBytes      int // size each index file is preallocated to; 0 → 10 MiB
}

func (c Config) withDefaults() Config {
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = 4096
	}
	if c.MaxIndexBytes <= 0 {
		c.MaxIndexBytes = 10 << 20
	}
	return c
}

// Name returns the file name of a segment file: base offset padded to 20
// digits plus the extension (".log", ".index", ".timeindex").
func Name(base int64, ext string) string {
	if base < 0 {
		return fmt.Sprintf("%020d%s", base, ext) // never a real offset
	}
	// What "%020d" prints, without fmt: a path is made per file operation.
	var b [20]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + base%10)
		base /= 10
	}
	return string(b[:]) + ext
}

// Segment is one .log file and its two indexes.
type Segment struct {
	fs   vfs.FS
	dir  string
	base int64
	cfg  Config

	log vfs.File
	oi  *index.OffsetIndex
	ti  *index.TimeIndex

	// Published to lock-free readers after each append.
	size atomic.Int64 // bytes of whole batches in .log
	next atomic.Int64 // offset of the next record
	// maxTs is the largest timestamp in the segment (-1 when none); retention
	// reads it from another goroutine.
	maxTs atomic.Int64

	// Appender state, guarded by the caller's writer lock.
	offsetOfMaxTs   int64
	bytesSinceIndex int
	rollingTs       int64 // max timestamp of the first batch; -1 when empty
	created         time.Time

	// refs counts the owner's reference plus readers'; files close at zero.
	refs         atomic.Int64
	closed       atomic.Bool
	recovered    bool        // Open rebuilt the indexes from the .log
	indexesDirty atomic.Bool // sealed, indexes not yet fsynced
	// suffix follows the file names of a segment being cleaned (".cleaned",
	// ".swap"; see clean.go); nil for an ordinary segment.
	suffix atomic.Pointer[string]
}

// Create creates a new, empty segment with base offset base in dir. The
// caller syncs the directory.
func Create(fs vfs.FS, dir string, base int64, cfg Config, now time.Time) (*Segment, error) {
	return createSuffixed(fs, dir, base, cfg, now, "")
}

func createSuffixed(fs vfs.FS, dir string, base int64, cfg Config, now time.Time, suffix string) (*Segment, error) {
	cfg = cfg.withDefaults()
	s := newSegment(fs, dir, base, cfg, now)
	if suffix != "" {
		s.suffix.Store(&suffix)
	}
	f, err := fs.Create(s.path(".log"))
	if err != nil {
		return nil, fmt.Errorf("segment: create %s: %w", s.path(".log"), err)
	}
	s.log = f
	// Remove stale indexes left by an earlier life of this base offset.
	for _, ext := range []string{".index", ".timeindex"} {
		if err := fs.Remove(s.path(ext)); err != nil && !isNotExist(err) {
			f.Close()
			return nil, fmt.Errorf("segment: remove stale %s: %w", s.path(ext), err)
		}
	}
	if err := s.openIndexes(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// Open opens an existing segment. With recover set, or when the segment's
// indexes fail their sanity check or its tail does not parse, the whole .log
// is scanned and the indexes rebuilt ([Segment.Recover]); truncated reports
// how many bytes of torn or corrupt tail that dropped.
func Open(fs vfs.FS, dir string, base int64, cfg Config, recover bool, maxBatchBytes int, now time.Time) (s *Segment, truncated int64, err error) {
	cfg = cfg.withDefaults()
	s = newSegment(fs, dir, base, cfg, now)
	f, err := fs.OpenReadWrite(s.path(".log"))
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open %s: %w", s.path(".log"), err)
	}
	s.log = f
	if err := s.openIndexes(); err != nil {
		f.Close()
		return nil, 0, err
	}
	if !recover {
		if err := s.load(); err != nil {
			recover = true
		}
	}
	if recover {
		truncated, err = s.Recover(maxBatchBytes)
		if err != nil {
			s.closeFiles()
			return nil, 0, err
		}
		s.recovered = true
	}
	return s, truncated, nil
}

func newSegment(fs vfs.FS, dir string, base int64, cfg Config, now time.Time) *Segment {
	s := &Segment{fs: fs, dir: dir, base: base, cfg: cfg, created: now, rollingTs: -1, offsetOfMaxTs: base}
	s.next.Store(base)
	s.maxTs.Store(-1)
	s.refs.Store(1)
	return s
}

func (s *Segment) path(ext string) string {
	name := Name(s.base, ext)
	if sfx := s.suffix.Load(); sfx != nil {
		name += *sfx
	}
	return filepath.Join(s.dir, name)
}

func (s *Segment) openIndexes() error {
	oi, err := index.OpenOffsetIndex(s.fs, s.path(".index"), s.base, s.cfg.MaxIndexBytes)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	ti, err := index.OpenTimeIndex(s.fs, s.path(".timeindex"), s.base, s.cfg.MaxIndexBytes)
	if err != nil {
		oi.Close()
		return fmt.Errorf("segment: %w", err)
	}
	s.oi, s.ti = oi, ti
	return nil
}

// load sets the segment's state from its files after a clean shutdown: the
// size from the file, the next offset and largest timestamp from the last
// index entries plus a walk of the batch headers after them. It fails if the
// indexes are not sane or the tail does not parse; the caller then recovers.
func (s *Segment) load() error {
	fi, err := s.log.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if err := s.oi.SanityCheck(size); err != nil {
		return err
	}
	last := s.ti.LastEntry()
	start := s.oi.Lookup(last.Offset).Position
	if p := s.oi.LastEntry().Position; p < start {
		start = p
	}
	next, maxTs, offOfMax := s.base, last.Timestamp, last.Offset
	var hdr [batch.HeaderSize]byte
	for pos := start; pos < size; {
		if size-pos < batch.HeaderSize {
			return batch.ErrShort
		}
		if _, err := s.log.ReadAt(hdr[:], pos); err != nil {
			return err
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil {
			return err
		}
		if pos+int64(h.Size()) > size {
			return batch.ErrShort
		}
		next = h.NextOffset()
		if h.MaxTimestamp > maxTs {
			maxTs, offOfMax = h.MaxTimestamp, h.LastOffset()
		}
		pos += int64(h.Size())
	}
	if err := s.ti.SanityCheck(next); err != nil {
		return err
	}
	if size > 0 {
		if _, err := s.log.ReadAt(hdr[:], 0); err != nil {
			return err
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil {
			return err
		}
		s.rollingTs = h.MaxTimestamp
	}
	s.size.Store(size)
	s.next.Store(next)
	s.maxTs.Store(maxTs)
	s.offsetOfMaxTs = offOfMax
	return nil
}

// Recovered reports whether Open rebuilt the indexes from the .log: a
// segment that is not the active one must then be sealed again.
func (s *Segment) Recovered() bool { return s.recovered }

// BaseOffset is the offset of the segment's first record.
func (s *Segment) BaseOffset() int64 { return s.base }

// NextOffset is the offset the next appended record gets.
func (s *Segment) NextOffset() int64 { return s.next.Load() }

// Size is the number of bytes of whole batches in the .log.
func (s *Segment) Size() int64 { return s.size.Load() }

// MaxTimestamp is the largest record timestamp in the segment (ms), -1 if empty.
func (s *Segment) MaxTimestamp() int64 { return s.maxTs.Load() }

// Dir is the directory holding the segment's files.
func (s *Segment) Dir() string { return s.dir }

// ShouldRoll reports whether a batch of batchSize bytes ending at lastOffset,
// with largest timestamp maxTs, must go to a new segment: Kafka's rules. The
// segment is full by size or an index is full, the segment's first batch is
// older than segmentTime, or a relative offset would overflow.
func (s *Segment) ShouldRoll(batchSize int, lastOffset, maxTs int64, segmentBytes int64, segmentTime time.Duration, now time.Time) bool {
	size := s.size.Load()
	if size == 0 {
		return false
	}
	if size+int64(batchSize) > segmentBytes || s.oi.IsFull() || s.ti.IsFull() {
		return true
	}
	if lastOffset-s.base > math.MaxInt32 {
		return true
	}
	var waited time.Duration
	if s.rollingTs >= 0 {
		waited = time.Duration(maxTs-s.rollingTs) * time.Millisecond
	} else {
		waited = now.Sub(s.created)
	}
	return waited > segmentTime
}

// Append writes one whole, validated batch whose base offset is the segment's
// next offset, and indexes it. The caller holds the writer lock. On a write
// error the segment's published state is unchanged.
func (s *Segment) Append(b []byte, h batch.Header) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if h.BaseOffset != s.next.Load() {
		return fmt.Errorf("%w: batch at %d, segment next %d", ErrOffsetMismatch, h.BaseOffset, s.next.Load())
	}
	pos := s.size.Load()
	if _, err := s.log.WriteAt(b, pos); err != nil {
		return fmt.Errorf("segment: write %s: %w", s.path(".log"), err)
	}
	if err := s.index(h, pos); err != nil {
		return err
	}
	if s.rollingTs < 0 {
		s.rollingTs = h.MaxTimestamp
	}
	s.size.Store(pos + int64(len(b)))
	s.next.Store(h.NextOffset())
	return nil
}

// index updates the largest timestamp and adds index entries for the batch
// at pos, as Kafka does: when more than IndexIntervalBytes were written since
// the last entry.
func (s *Segment) index(h batch.Header, pos int64) error {
	if h.MaxTimestamp > s.maxTs.Load() {
		s.maxTs.Store(h.MaxTimestamp)
		s.offsetOfMaxTs = h.LastOffset()
	}
	// A full index only happens while rebuilding one (appends roll the
	// segment first): a rebuilt index may be sparser than the original.
	if s.bytesSinceIndex > s.cfg.IndexIntervalBytes {
		if !s.oi.IsFull() {
			if err := s.oi.Append(h.LastOffset(), pos); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
			s.indexesDirty.Store(true)
		}
		if !s.ti.IsFull() {
			if err := s.ti.MaybeAppend(s.maxTs.Load(), s.offsetOfMaxTs, false); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.Size()
	return nil
}

// Seal is called when the segment stops being the active one: the time
// index gets a final entry for the largest timestamp, and both indexes are
// trimmed to their entries. The indexes are not fsynced here (a roll must
// not stall appends): IndexesDirty reports it until FlushIndexes.
func (s *Segment) Seal() error {
	if s.maxTs.Load() >= 0 {
		err := s.ti.MaybeAppend(s.maxTs.Load(), s.offsetOfMaxTs, true)
		if err != nil && !errors.Is(err, index.ErrIndexFull) {
			return fmt.Errorf("segment: seal: %w", err)
		}
	}
	if err := s.oi.TrimToValidSize(); err != nil {
		return fmt.Errorf("segment: seal: %w", err)
	}
	if err := s.ti.TrimToValidSize(); err != nil {
		return fmt.Errorf("segment: seal: %w", err)
	}
	s.indexesDirty.Store(true)
	return nil
}

// IndexesDirty reports whether the indexes changed (an entry was added, or
// the segment was sealed) since they were last made durable by FlushIndexes
// or Flush.
func (s *Segment) IndexesDirty() bool { return s.indexesDirty.Load() }

// FlushIndexes makes the indexes durable.
func (s *Segment) FlushIndexes() error {
	s.indexesDirty.Store(false)
	if err := s.oi.Flush(); err != nil {
		s.indexesDirty.Store(true)
		return fmt.Errorf("segment: %w", err)
	}
	if err := s.ti.Flush(); err != nil {
		s.indexesDirty.Store(true)
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// ResizeIndexes preallocates the indexes again to maxBytes: a reopened
// active segment's indexes were trimmed at close.
func (s *Segment) ResizeIndexes(maxBytes int) error {
	if err := s.oi.Resize(maxBytes); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if err := s.ti.Resize(maxBytes); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// Sync makes the .log durable (fsync). The indexes are not: they are
// rebuilt from the .log by recovery, and made durable when the segment is
// sealed or flushed.
func (s *Segment) Sync() error {
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", s.path(".log"), err)
	}
	return nil
}

// Flush makes the .log and its indexes durable.
func (s *Segment) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.Sync(); err != nil {
		return err
	}
	if !s.indexesDirty.Load() {
		return nil
	}
	return s.FlushIndexes()
}

// Acquire takes a reader's reference; false if the segment is closed.
func (s *Segment) Acquire() bool {
	if s.closed.Load() {
		return false
	}
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference taken by Acquire.
func (s *Segment) Release() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

// Close drops the owner's reference: the files are closed once no reader
// holds the segment.
func (s *Segment) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.Release()
	return nil
}

// Delete removes the segment's files and closes it. Readers holding a
// reference keep reading the unlinked files until they release it. The
// caller syncs the directory.
func (s *Segment) Delete() error {
	err := s.Unlink()
	s.Close()
	return err
}

// Unlink removes the segment's files but leaves it open: it can still be
// read (and closed) through the files it holds, while new files of the same
// name are created. The caller syncs the directory.
func (s *Segment) Unlink() error {
	var first error
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := s.fs.Remove(s.path(ext)); err != nil && !isNotExist(err) && first == nil {
			first = fmt.Errorf("segment: delete %s: %w", s.path(ext), err)
		}
	}
	return first
}

func (s *Segment) closeFiles() {
	s.oi.Close()
	s.ti.Close()
	s.log.Close()
}

func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }
