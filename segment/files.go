package segment

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// files are a segment's open files: its .log and its two indexes.
type files struct {
	log vfs.File
	oi  *index.OffsetIndex
	ti  *index.TimeIndex
}

func (f *files) close() {
	f.oi.Close()
	f.ti.Close()
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
	if s.cfg.Cache != nil {
		s.cfg.Cache.remove(s)
	}
}

// hold takes a reference for a method of the owner's that uses the files,
// and returns them, open; the caller releases it.
func (s *Segment) hold() (*files, error) {
	if !s.acquire() {
		return nil, ErrClosed
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

// reopen opens the files of a segment whose state is known (a sealed
// segment opened lazily, or whose files a Cache closed). The first time,
// the indexes get the sanity check Open gives them, and are rebuilt from
// the .log if they fail it or are missing. Holds fmu.
func (s *Segment) reopen() (*files, error) {
	// OpenReadWrite would create a .log that is gone: an empty segment.
	if _, err := s.fs.Stat(s.path(".log")); err != nil {
		return nil, fmt.Errorf("segment: open %s: %w", s.path(".log"), err)
	}
	rebuild := false
	for _, ext := range []string{".index", ".timeindex"} {
		if _, err := s.fs.Stat(s.path(ext)); isNotExist(err) {
			rebuild = true
		} else if err != nil {
			return nil, fmt.Errorf("segment: open %s: %w", s.path(ext), err)
		}
	}
	log, err := s.fs.OpenReadWrite(s.path(".log"))
	if err != nil {
		return nil, fmt.Errorf("segment: open %s: %w", s.path(".log"), err)
	}
	oi, ti, err := s.openIndexes()
	if err != nil {
		log.Close()
		return nil, err
	}
	f := &files{log: log, oi: oi, ti: ti}
	if !s.checked {
		if rebuild || oi.SanityCheck(s.size.Load()) != nil || ti.SanityCheck(s.next.Load()) != nil {
			if err := s.rebuildIndexes(f); err != nil {
				f.close()
				return nil, err
			}
		}
		s.checked = true
	}
	return f, nil
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

// rebuildIndexes rebuilds the indexes of a sealed segment from its .log,
// which must hold whole, valid batches up to the segment's size (nothing is
// truncated here: a reader may be looking at the segment), trims them and
// makes them durable. The largest timestamp is set from the .log too (the
// time index it was read from at open may have been the bad one).
func (s *Segment) rebuildIndexes(f *files) error {
	if err := f.oi.Reset(); err != nil {
		return fmt.Errorf("segment: rebuild indexes: %w", err)
	}
	if err := f.ti.Reset(); err != nil {
		return fmt.Errorf("segment: rebuild indexes: %w", err)
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
		if _, err := f.log.ReadAt(hdr[:], pos); err != nil {
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
		if _, err := f.log.ReadAt(buf, pos); err != nil {
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
			if !f.oi.IsFull() {
				if err := f.oi.Append(h.LastOffset(), pos); err != nil {
					return fail(pos, err)
				}
			}
			if !f.ti.IsFull() {
				if err := f.ti.MaybeAppend(maxTs, offOfMax, false); err != nil {
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
	if maxTs >= 0 {
		if err := f.ti.MaybeAppend(maxTs, offOfMax, true); err != nil && !errors.Is(err, index.ErrIndexFull) {
			return fail(size, err)
		}
	}
	s.maxTs.Store(maxTs)
	s.offsetOfMaxTs = offOfMax
	for _, err := range []error{f.oi.TrimToValidSize(), f.ti.TrimToValidSize(), f.oi.Flush(), f.ti.Flush()} {
		if err != nil {
			return fmt.Errorf("segment: rebuild indexes of %s: %w", s.path(".log"), err)
		}
	}
	return nil
}
