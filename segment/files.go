package segment

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// files are a segment's open files: its .log and its two indexes. Of a
// sealed segment, each index is opened by the first reader that needs it
// (Kafka's LazyIndex): a fetch needs the offset index, a lookup by time
// both.
type files struct {
	log vfs.File
	oi  atomic.Pointer[index.OffsetIndex] // nil until opened
	ti  atomic.Pointer[index.TimeIndex]   // nil until opened
}

func newFiles(log vfs.File, oi *index.OffsetIndex, ti *index.TimeIndex) *files {
	f := &files{log: log}
	f.oi.Store(oi)
	f.ti.Store(ti)
	return f
}

func (f *files) close() {
	if x := f.oi.Load(); x != nil {
		x.Close()
	}
	if x := f.ti.Load(); x != nil {
		x.Close()
	}
	f.log.Close()
}

// The bits of Segment.refs besides the readers' count.
const (
	// ownerRef is held from the segment's creation until Close.
	ownerRef = 1 << 40
	// evicting is set by a Cache while it closes the files of a segment
	// that no one holds; Acquire waits for it to clear.
	evicting = 1 << 50
)

// Acquire takes a reader's reference; false if the segment is closed, or
// retired (Retire) and its files are closed. The segment's files are
// opened, if they are not, by the first method that needs them; they stay
// open until Release.
func (s *Segment) Acquire() bool {
	if !s.acquire() {
		return false
	}
	if !s.used.Load() {
		s.used.Store(true)
	}
	return true
}

func (s *Segment) acquire() bool {
	for {
		if s.closed.Load() {
			return false
		}
		n := s.refs.Load()
		if n&ownerRef == 0 {
			return false
		}
		if n&evicting != 0 {
			// A Cache holds fmu while the bit is set: wait for it.
			s.fmu.Lock()
			//lint:ignore SA2001 an empty critical section: it waits for the Cache
			s.fmu.Unlock()
			continue
		}
		if s.refs.CompareAndSwap(n, n+1) {
			break
		}
	}
	if s.unlisted.Load() && s.f.Load() == nil {
		s.Release()
		return false
	}
	return true
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
	if s.refs.Add(-ownerRef) == 0 {
		s.closeFiles()
	}
	return nil
}

// closeFiles closes the files for good.
func (s *Segment) closeFiles() {
	s.fmu.Lock()
	s.noReopen.Store(true)
	if f := s.f.Swap(nil); f != nil {
		f.close()
	}
	s.fmu.Unlock()
	s.closeTxnIndex()
	if s.cfg.Cache != nil {
		s.cfg.Cache.remove(s)
	}
}

// hold takes a reference for a method that uses the files, and returns
// them, open; the caller releases it. Unlike Acquire, it succeeds on a
// segment its owner closed while a reader still holds it (the flush of a
// segment it acquired, say).
func (s *Segment) hold() (*files, error) {
	for {
		n := s.refs.Load()
		if n&^evicting == 0 {
			return nil, ErrClosed
		}
		if n&evicting != 0 {
			s.fmu.Lock()
			//lint:ignore SA2001 an empty critical section: it waits for the Cache
			s.fmu.Unlock()
			continue
		}
		if s.refs.CompareAndSwap(n, n+1) {
			break
		}
	}
	f, err := s.files()
	if err != nil {
		s.Release()
		return nil, err
	}
	return f, nil
}

// files returns the open files, opening them if they are closed. The
// caller holds a reference, so they stay open until it releases it.
func (s *Segment) files() (*files, error) {
	if f := s.f.Load(); f != nil {
		return f, nil
	}
	return s.openLazily()
}

func (s *Segment) openLazily() (*files, error) {
	s.fmu.Lock()
	f := s.f.Load()
	if f == nil {
		if s.noReopen.Load() {
			s.fmu.Unlock()
			return nil, fmt.Errorf("segment: %s: files removed: %w", s.path(".log"), ErrClosed)
		}
		var err error
		if f, err = s.reopen(); err != nil {
			s.fmu.Unlock()
			return nil, err
		}
		s.f.Store(f)
	}
	s.fmu.Unlock()
	if s.sealed.Load() && s.cfg.Cache != nil {
		s.cfg.Cache.add(s)
	}
	return f, nil
}

// reopen opens the .log of a segment whose state is known (a sealed
// segment opened lazily, or whose files a Cache closed); its indexes are
// opened when needed (offsetIndex, indexes). Holds fmu.
func (s *Segment) reopen() (*files, error) {
	// OpenReadWrite would create a .log that is gone: an empty segment.
	if _, err := s.fs.Stat(s.path(".log")); err != nil {
		return nil, fmt.Errorf("segment: open %s: %w", s.path(".log"), err)
	}
	log, err := s.fs.OpenReadWrite(s.path(".log"))
	if err != nil {
		return nil, fmt.Errorf("segment: open %s: %w", s.path(".log"), err)
	}
	return &files{log: log}, nil
}

// offsetIndex returns the offset index of f, opening it if need be. The
// caller holds a reference.
func (s *Segment) offsetIndex(f *files) (*index.OffsetIndex, error) {
	if x := f.oi.Load(); x != nil {
		return x, nil
	}
	s.fmu.Lock()
	err := s.loadIndexes(f, true, false)
	s.fmu.Unlock()
	return f.oi.Load(), err
}

// indexes returns both indexes of f, opening them if need be. The caller
// holds a reference.
func (s *Segment) indexes(f *files) (*index.OffsetIndex, *index.TimeIndex, error) {
	oi, ti := f.oi.Load(), f.ti.Load()
	if oi != nil && ti != nil {
		return oi, ti, nil
	}
	s.fmu.Lock()
	err := s.loadIndexes(f, true, true)
	s.fmu.Unlock()
	return f.oi.Load(), f.ti.Load(), err
}

// loadIndexes opens the indexes of f asked for that are not open. The
// first time, an index gets the sanity check Open gives it, and is rebuilt
// from the .log if it fails it or is missing; only then is it published to
// readers. Holds fmu.
func (s *Segment) loadIndexes(f *files, wantOI, wantTI bool) error {
	wantOI = wantOI && f.oi.Load() == nil
	wantTI = wantTI && f.ti.Load() == nil
	if !wantOI && !wantTI {
		return nil
	}
	if s.noReopen.Load() {
		return fmt.Errorf("segment: %s: files removed: %w", s.path(".log"), ErrClosed)
	}
	var (
		oi                 *index.OffsetIndex
		ti                 *index.TimeIndex
		rebuildOI, rebuild bool
		err                error
	)
	closeNew := func() {
		if oi != nil {
			oi.Close()
		}
		if ti != nil {
			ti.Close()
		}
	}
	if wantOI {
		missing, serr := s.missing(".index")
		if serr != nil {
			return serr
		}
		if oi, err = index.OpenOffsetIndex(s.fs, s.path(".index"), s.base, s.cfg.MaxIndexBytes); err != nil {
			return fmt.Errorf("segment: %w", err)
		}
		rebuildOI = !s.oiChecked && (missing || oi.SanityCheck(s.size.Load()) != nil)
		rebuild = rebuildOI
	}
	rebuildTI := false
	if wantTI {
		missing, serr := s.missing(".timeindex")
		if serr != nil {
			closeNew()
			return serr
		}
		if ti, err = index.OpenTimeIndex(s.fs, s.path(".timeindex"), s.base, s.cfg.MaxIndexBytes); err != nil {
			closeNew()
			return fmt.Errorf("segment: %w", err)
		}
		rebuildTI = !s.tiChecked && (missing || ti.SanityCheck(s.next.Load()) != nil)
		rebuild = rebuild || rebuildTI
	}
	if rebuild {
		var roi *index.OffsetIndex
		var rti *index.TimeIndex
		if rebuildOI {
			roi = oi
		}
		if rebuildTI {
			rti = ti
		}
		if err := s.rebuildIndexes(f.log, roi, rti); err != nil {
			closeNew()
			return err
		}
	}
	if oi != nil {
		s.oiChecked = true
		f.oi.Store(oi)
	}
	if ti != nil {
		s.tiChecked = true
		f.ti.Store(ti)
	}
	return nil
}

// missing reports whether the segment file with extension ext is absent.
func (s *Segment) missing(ext string) (bool, error) {
	_, err := s.fs.Stat(s.path(ext))
	if isNotExist(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("segment: open %s: %w", s.path(ext), err)
	}
	return false, nil
}

// openAll opens the files and both indexes, if they are not open, for
// readers of a segment whose files are about to go (Retire, Unlink); on
// error they get it when they read. Holds fmu.
func (s *Segment) openAll() {
	f := s.f.Load()
	if f == nil {
		var err error
		if f, err = s.reopen(); err != nil {
			return
		}
		s.f.Store(f)
	}
	_ = s.loadIndexes(f, true, true)
}

// evict closes the files of a sealed segment that no one holds, for its
// Cache; false if it is held, or not sealed, or its files are closed.
func (s *Segment) evict() bool {
	s.fmu.Lock()
	f := s.f.Load()
	if f == nil || !s.sealed.Load() || s.noReopen.Load() || !s.refs.CompareAndSwap(ownerRef, ownerRef|evicting) {
		s.fmu.Unlock()
		return false
	}
	s.f.Store(nil)
	f.close()
	if s.cfg.Cache != nil {
		s.cfg.Cache.remove(s)
	}
	n := s.refs.Add(-evicting)
	s.fmu.Unlock()
	if n == 0 { // closed meanwhile
		s.closeFiles()
	}
	return true
}

// rebuildIndexes rebuilds the given indexes (nil: not that one) of a sealed
// segment from its .log,
// which must hold whole, valid batches up to the segment's size (nothing is
// truncated here: a reader may be looking at the segment), trims them and
// makes them durable. The largest timestamp is set from the .log too (the
// time index it was read from at open may have been the bad one).
func (s *Segment) rebuildIndexes(log vfs.File, oi *index.OffsetIndex, ti *index.TimeIndex) error {
	if oi != nil {
		if err := oi.Reset(); err != nil {
			return fmt.Errorf("segment: rebuild indexes: %w", err)
		}
	}
	if ti != nil {
		if err := ti.Reset(); err != nil {
			return fmt.Errorf("segment: rebuild indexes: %w", err)
		}
	}
	size := s.size.Load()
	var (
		since    = 0
		maxTs    = int64(-1)
		offOfMax = s.base
		next     = s.base
		hdr      [12]byte
		buf      []byte
		fail     = func(pos int64, err error) error {
			return fmt.Errorf("segment: rebuild indexes of %s at %d: %w", s.path(".log"), pos, err)
		}
	)
	for pos := int64(0); pos < size; {
		if size-pos < int64(len(hdr)) {
			return fail(pos, batch.ErrCorrupt)
		}
		if _, err := log.ReadAt(hdr[:], pos); err != nil {
			return fail(pos, err)
		}
		n, err := batch.PeekSize(hdr[:])
		if err != nil || pos+int64(n) > size {
			return fail(pos, batch.ErrCorrupt)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := log.ReadAt(buf, pos); err != nil {
			return fail(pos, err)
		}
		h, err := batch.Validate(buf)
		if err != nil {
			return fail(pos, err)
		}
		if h.BaseOffset < next {
			return fail(pos, batch.ErrCorrupt)
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offOfMax = h.MaxTimestamp, h.LastOffset()
		}
		if since > s.cfg.IndexIntervalBytes {
			if oi != nil && !oi.IsFull() {
				if err := oi.Append(h.LastOffset(), pos); err != nil {
					return fail(pos, err)
				}
			}
			if ti != nil && !ti.IsFull() {
				if err := ti.MaybeAppend(maxTs, offOfMax, false); err != nil {
					return fail(pos, err)
				}
			}
			since = 0
		}
		since += n
		next = h.NextOffset()
		pos += int64(n)
	}
	if next != s.next.Load() {
		return fail(size, fmt.Errorf("%w: the batches end at %d, not %d", batch.ErrCorrupt, next, s.next.Load()))
	}
	if ti != nil && maxTs >= 0 {
		if err := ti.MaybeAppend(maxTs, offOfMax, true); err != nil && !errors.Is(err, index.ErrIndexFull) {
			return fail(size, err)
		}
	}
	s.maxTs.Store(maxTs)
	s.offsetOfMaxTs = offOfMax
	var errs []error
	if oi != nil {
		errs = append(errs, oi.TrimToValidSize(), oi.Flush())
	}
	if ti != nil {
		errs = append(errs, ti.TrimToValidSize(), ti.Flush())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segment: rebuild indexes of %s: %w", s.path(".log"), err)
	}
	return nil
}
