package segment

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// Errors returned by segments.
var (
	// ErrClosed is returned by a segment whose files have been closed.
	ErrClosed = errs.Mark("segment: closed", errs.ErrClosed) // matches log.ErrClosed
	// ErrOffsetMismatch is returned by Append when the batch does not start at
	// the segment's next offset.
	ErrOffsetMismatch = errors.New("segment: batch does not start at the next offset")
)

// Config is a segment's configuration. Zero fields take Kafka's defaults.
type Config struct {
	IndexIntervalBytes int // bytes of batches between index entries; 0 → 4096
	MaxIndexBytes      int // size each index file is preallocated to; 0 → 10 MiB
	// Cache bounds the sealed segments whose files are open, shared by the
	// segments given the same one; nil: a sealed segment's files, once
	// opened, stay open until it is closed.
	Cache *Cache
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

	// f holds the open files; nil while they are closed (a sealed segment
	// opened lazily, or closed by its Cache). Readers load it after taking
	// a reference (files); fmu serializes opening and closing them.
	f   atomic.Pointer[files]
	fmu sync.Mutex
	// oiChecked, tiChecked: the index passed its sanity check since Open
	// (guarded by fmu). A segment opened lazily checks each index when it
	// first opens it.
	oiChecked, tiChecked bool
	// sealed: not the active segment; its files may be closed when idle.
	sealed atomic.Bool
	// noReopen: the files are being removed or replaced (Unlink, Retire):
	// never open them again by name.
	noReopen atomic.Bool
	// unlisted: out of its partition's list (Retire): Acquire fails once
	// its files are closed, so a reader looks the list up again.
	unlisted atomic.Bool
	// used is set by Acquire: the Cache's second chance.
	used atomic.Bool
	// cacheIdx is the segment's place in its Cache's list, -1 when not
	// there; guarded by the Cache's mu.
	cacheIdx int

	// Published to lock-free readers after each append.
	size atomic.Int64 // bytes of whole batches in .log
	next atomic.Int64 // offset of the next record
	// maxTs is the largest timestamp in the segment (-1 when none); retention
	// reads it from another goroutine.
	maxTs atomic.Int64
	// recent remembers the positions of the active segment's last batches
	// (recent.go); nil until the first Append, and once sealed.
	recent atomic.Pointer[recent]
	// cuts counts the truncations of the .log (TruncateTo, Recover):
	// bumped before the size goes down, so a reader that saw the same
	// count before and after reading knows its bytes were not cut.
	cuts atomic.Uint64

	// Appender state, guarded by the caller's writer lock.
	offsetOfMaxTs   int64
	bytesSinceIndex int
	rollingTs       int64 // max timestamp of the first batch; -1 when empty
	created         time.Time

	// refs is ownerRef while the owner holds the segment, plus one per
	// reader (and per method that uses the files of a sealed one), plus
	// evicting while a Cache closes the files; the files close at zero.
	refs         atomic.Int64
	closed       atomic.Bool
	recovered    bool        // Open rebuilt the indexes from the .log
	indexesDirty atomic.Bool // sealed, indexes not yet fsynced
	// suffix follows the file names of a segment being cleaned (".cleaned",
	// ".swap"; see clean.go); nil for an ordinary segment.
	suffix atomic.Pointer[string]

	// txn is the .txnindex (txnindex.go), nil until first used; txnMu
	// guards it. txnDirty: entries were appended or removed since its last
	// fsync.
	txnMu    sync.Mutex
	txn      *index.TxnIndex
	txnDirty atomic.Bool
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
	// failed removes what was created: a roll that runs out of file
	// descriptors leaves nothing behind, and is tried again.
	failed := func() {
		f.Close()
		_ = s.remove()
	}
	// Remove stale indexes left by an earlier life of this base offset.
	for _, ext := range []string{".index", ".timeindex", ".txnindex"} {
		if err := fs.Remove(s.path(ext)); err != nil && !isNotExist(err) {
			failed()
			return nil, fmt.Errorf("segment: remove stale %s: %w", s.path(ext), err)
		}
	}
	oi, ti, err := s.openIndexes()
	if err != nil {
		failed()
		return nil, err
	}
	s.f.Store(newFiles(f, oi, ti))
	s.oiChecked, s.tiChecked = true, true
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
	oi, ti, err := s.openIndexes()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	fl := newFiles(f, oi, ti)
	s.f.Store(fl)
	if !recover {
		if err := s.load(fl); err != nil {
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
	s.oiChecked, s.tiChecked = true, true
	return s, truncated, nil
}

func newSegment(fs vfs.FS, dir string, base int64, cfg Config, now time.Time) *Segment {
	s := &Segment{fs: fs, dir: dir, base: base, cfg: cfg, created: now, rollingTs: -1, offsetOfMaxTs: base, cacheIdx: -1}
	s.next.Store(base)
	s.maxTs.Store(-1)
	s.refs.Store(ownerRef)
	return s
}

func (s *Segment) path(ext string) string {
	name := Name(s.base, ext)
	if sfx := s.suffix.Load(); sfx != nil {
		name += *sfx
	}
	return filepath.Join(s.dir, name)
}

func (s *Segment) openIndexes() (*index.OffsetIndex, *index.TimeIndex, error) {
	oi, err := index.OpenOffsetIndex(s.fs, s.path(".index"), s.base, s.cfg.MaxIndexBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("segment: %w", err)
	}
	ti, err := index.OpenTimeIndex(s.fs, s.path(".timeindex"), s.base, s.cfg.MaxIndexBytes)
	if err != nil {
		oi.Close()
		return nil, nil, fmt.Errorf("segment: %w", err)
	}
	return oi, ti, nil
}

// load sets the segment's state from its files after a clean shutdown: the
// size from the file, the next offset and largest timestamp from the last
// index entries plus a walk of the batch headers after them. It fails if the
// indexes are not sane or the tail does not parse; the caller then recovers.
func (s *Segment) load(f *files) error {
	fi, err := f.log.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	oi, ti := f.oi.Load(), f.ti.Load()
	if err := oi.SanityCheck(size); err != nil {
		return err
	}
	last := ti.LastEntry()
	start := oi.Lookup(last.Offset).Position
	if p := oi.LastEntry().Position; p < start {
		start = p
	}
	next, maxTs, offOfMax, err := walkHeaders(f.log, start, size, s.base, last.Timestamp, last.Offset)
	if err != nil {
		return err
	}
	if err := ti.SanityCheck(next); err != nil {
		return err
	}
	if size > 0 {
		var hdr [batch.HeaderSize]byte
		if _, err := f.log.ReadAt(hdr[:], 0); err != nil {
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

// walkHeaders walks the batch headers of log from start to size, which must
// end on a batch boundary, and returns the offset after the last batch (next
// when there is none) and the largest timestamp, from maxTs (at offOfMax)
// and the batches walked, with the offset that carries it.
func walkHeaders(log io.ReaderAt, start, size, next, maxTs, offOfMax int64) (int64, int64, int64, error) {
	hr := newHeaderReader(log, size)
	defer hr.close()
	for pos := start; pos < size; {
		h, err := hr.header(pos)
		if err != nil {
			return 0, 0, 0, err
		}
		next = h.NextOffset()
		if h.MaxTimestamp > maxTs {
			maxTs, offOfMax = h.MaxTimestamp, h.LastOffset()
		}
		pos += int64(h.Size())
	}
	return next, maxTs, offOfMax, nil
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

// Cuts counts the truncations of the segment's .log so far (TruncateTo;
// none by appends): a reader that reads on from a position it found
// earlier checks that the count is the same before and after its read,
// which then holds the batches that were there.
func (s *Segment) Cuts() uint64 { return s.cuts.Load() }

// MaxTimestamp is the largest record timestamp in the segment (ms), -1 if empty.
func (s *Segment) MaxTimestamp() int64 { return s.maxTs.Load() }

// Dir is the directory holding the segment's files.
func (s *Segment) Dir() string { return s.dir }

// ShouldRoll reports whether a batch of batchSize bytes ending at lastOffset,
// with largest timestamp maxTs, must go to a new segment: Kafka's rules. The
// segment is full by size or an index is full, the segment's first batch is
// older than segmentTime, or a relative offset would overflow. The caller
// holds the writer lock and s is the active segment.
func (s *Segment) ShouldRoll(batchSize int, lastOffset, maxTs int64, segmentBytes int64, segmentTime time.Duration, now time.Time) bool {
	size := s.size.Load()
	if size == 0 {
		return false
	}
	if size+int64(batchSize) > segmentBytes {
		return true
	}
	if f := s.f.Load(); f == nil || f.oi.Load() == nil || f.ti.Load() == nil ||
		f.oi.Load().IsFull() || f.ti.Load().IsFull() {
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
// next offset, and indexes it. The caller holds the writer lock and s is the
// active segment. On a write error the segment's published state is
// unchanged.
func (s *Segment) Append(b []byte, h batch.Header) error {
	if s.closed.Load() {
		return ErrClosed
	}
	f := s.f.Load()
	if f == nil || s.sealed.Load() || f.oi.Load() == nil || f.ti.Load() == nil {
		return fmt.Errorf("segment: append to %s: sealed", s.path(".log"))
	}
	if h.BaseOffset != s.next.Load() {
		return fmt.Errorf("%w: batch at %d, segment next %d", ErrOffsetMismatch, h.BaseOffset, s.next.Load())
	}
	pos := s.size.Load()
	if _, err := f.log.WriteAt(b, pos); err != nil {
		return fmt.Errorf("segment: write %s: %w", s.path(".log"), err)
	}
	if err := s.index(f, h, pos); err != nil {
		return err
	}
	if s.rollingTs < 0 {
		s.rollingTs = h.MaxTimestamp
	}
	r := s.recent.Load()
	if r == nil {
		r = new(recent)
		s.recent.Store(r)
	}
	r.add(pos, h) // before the size that publishes the batch
	s.size.Store(pos + int64(len(b)))
	s.next.Store(h.NextOffset())
	return nil
}

// index updates the largest timestamp and adds index entries for the batch
// at pos, as Kafka does: when more than IndexIntervalBytes were written since
// the last entry.
func (s *Segment) index(f *files, h batch.Header, pos int64) error {
	if h.MaxTimestamp > s.maxTs.Load() {
		s.maxTs.Store(h.MaxTimestamp)
		s.offsetOfMaxTs = h.LastOffset()
	}
	// A full index only happens while rebuilding one (appends roll the
	// segment first): a rebuilt index may be sparser than the original.
	if s.bytesSinceIndex > s.cfg.IndexIntervalBytes {
		// The active segment's indexes (or those Recover rebuilds) are
		// open.
		oi, ti := f.oi.Load(), f.ti.Load()
		if !oi.IsFull() {
			if err := oi.Append(h.LastOffset(), pos); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
			s.indexesDirty.Store(true)
		}
		if !ti.IsFull() {
			if err := ti.MaybeAppend(s.maxTs.Load(), s.offsetOfMaxTs, false); err != nil {
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
// not stall appends): IndexesDirty reports it until FlushIndexes. From then
// on the segment's files may be closed while no reader holds it (its
// Config's Cache decides), and are opened again when one needs them.
func (s *Segment) Seal() error {
	f, err := s.hold()
	if err != nil {
		return err
	}
	defer s.Release()
	oi, ti, err := s.indexes(f)
	if err != nil {
		return err
	}
	if s.maxTs.Load() >= 0 {
		err := ti.MaybeAppend(s.maxTs.Load(), s.offsetOfMaxTs, true)
		if err != nil && !errors.Is(err, index.ErrIndexFull) {
			return fmt.Errorf("segment: seal: %w", err)
		}
	}
	if err := oi.TrimToValidSize(); err != nil {
		return fmt.Errorf("segment: seal: %w", err)
	}
	if err := ti.TrimToValidSize(); err != nil {
		return fmt.Errorf("segment: seal: %w", err)
	}
	s.indexesDirty.Store(true)
	s.MarkSealed()
	return nil
}

// MarkSealed tells a segment that it is not the active one, without
// changing its files (Seal does both): its files may then be closed while
// no reader holds it. A segment opened with Open is taken for the active one
// until then.
func (s *Segment) MarkSealed() {
	s.recent.Store(nil) // readers of a sealed segment read its index
	if s.sealed.Swap(true) || s.cfg.Cache == nil {
		return
	}
	if s.f.Load() != nil {
		s.cfg.Cache.add(s)
	}
}

// IndexesDirty reports whether the indexes changed (an entry was added, or
// the segment was sealed) since they were last made durable by FlushIndexes
// or Flush.
func (s *Segment) IndexesDirty() bool { return s.indexesDirty.Load() }

// FlushIndexes makes the indexes durable.
func (s *Segment) FlushIndexes() error {
	f, err := s.hold()
	if err != nil {
		return err
	}
	defer s.Release()
	// An index not open may have been closed with entries the file
	// system holds but has not made durable: open it to fsync it.
	oi, ti, err := s.indexes(f)
	if err != nil {
		return err
	}
	s.indexesDirty.Store(false)
	if err := oi.Flush(); err != nil {
		s.indexesDirty.Store(true)
		return fmt.Errorf("segment: %w", err)
	}
	if err := ti.Flush(); err != nil {
		s.indexesDirty.Store(true)
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// ResizeIndexes preallocates the indexes again to maxBytes: a reopened
// active segment's indexes were trimmed at close.
func (s *Segment) ResizeIndexes(maxBytes int) error {
	f, err := s.hold()
	if err != nil {
		return err
	}
	defer s.Release()
	oi, ti, err := s.indexes(f)
	if err != nil {
		return err
	}
	if err := oi.Resize(maxBytes); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if err := ti.Resize(maxBytes); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// Sync makes the .log durable (fsync), and the .txnindex entries appended
// since the last Sync. The offset and time indexes are not: they are
// rebuilt from the .log by recovery, and made durable when the segment is
// sealed or flushed.
func (s *Segment) Sync() error {
	f, err := s.hold()
	if err != nil {
		return err
	}
	defer s.Release()
	if err := f.log.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", s.path(".log"), err)
	}
	return s.syncTxnIndex()
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

// Delete removes the segment's files and closes it: the owner has taken it
// out of its list of segments. Readers holding a reference keep reading the
// files they have open (unlinked) until they release it; a reader that
// acquires it later, when its files are closed, is refused (Acquire), and
// looks the list up again. The caller syncs the directory.
func (s *Segment) Delete() error {
	s.Retire()
	err := s.remove()
	s.Close()
	return err
}

// Retire tells the segment that its owner took it out of its list and is
// about to remove or replace its files (a cleaned segment installed under
// the same name): they are never opened again by name. Readers holding
// it, and those acquiring it while its files are open, read those files;
// Acquire refuses it once they are closed.
func (s *Segment) Retire() {
	s.fmu.Lock()
	s.unlisted.Store(true)
	// A reader that acquired it before it was unlisted reads it: open its
	// files for it if they are closed. (One that acquires it after sees
	// it unlisted: Acquire refuses it if the files are closed.)
	if !s.noReopen.Load() && (s.f.Load() != nil || (s.refs.Load()&^evicting)%ownerRef != 0) {
		s.openAll() // on error the reader gets it
	}
	s.noReopen.Store(true)
	s.fmu.Unlock()
}

// Unlink removes the segment's files but leaves it open: it can still be
// read (and closed) through the files it holds, while new files of the same
// name are created. Its files are opened first if a reader holds it or
// some are open; a reader that acquires it later, when they are closed,
// gets ErrClosed from its reads. The caller syncs the directory.
func (s *Segment) Unlink() error {
	s.fmu.Lock()
	// Not every closed segment's files: a partition truncated fully would
	// open thousands at once. A reader that acquires one whose files are
	// closed gets ErrClosed.
	if !s.noReopen.Load() && (s.f.Load() != nil || (s.refs.Load()&^evicting)%ownerRef != 0) {
		s.openAll() // on error readers get it
	}
	s.noReopen.Store(true)
	s.fmu.Unlock()
	return s.remove()
}

func (s *Segment) remove() error {
	var first error
	for _, ext := range []string{".log", ".index", ".timeindex", ".txnindex"} {
		if err := s.fs.Remove(s.path(ext)); err != nil && !isNotExist(err) && first == nil {
			first = fmt.Errorf("segment: delete %s: %w", s.path(ext), err)
		}
	}
	return first
}

func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }
