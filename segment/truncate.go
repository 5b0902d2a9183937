package segment

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/strata-log/strata/segment/batch"
)

// TruncateTo removes every batch that ends at or after offset: the batch
// holding offset (if offset falls inside one) and all after it, so the
// segment ends on a batch boundary at or before offset. It returns the new
// next offset. An offset at or past NextOffset changes nothing.
//
// The cut is durable when TruncateTo returns, indexes first: both indexes
// lose their entries at or past the cut and are fsynced, then the .log is
// truncated and fsynced. A crash in between leaves indexes sparser than the
// .log, which is valid; a crash after it can never bring the removed batches
// back, even once new batches are appended in their place.
//
// The caller holds the writer lock. Readers that hold the segment keep
// working; one reading at or past the cut may get an error (never another
// batch's bytes: every read checks the batch framing and CRC). A segment that
// was sealed is writable again afterwards: its indexes are preallocated to
// maxIndexBytes (0: the size it was opened with).
func (s *Segment) TruncateTo(offset int64, maxIndexBytes int) (next int64, err error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if offset >= s.next.Load() {
		return s.next.Load(), nil
	}
	f, err := s.hold()
	if err != nil {
		return 0, err
	}
	defer s.Release()
	oi, ti, err := s.indexes(f)
	if err != nil {
		return 0, err
	}
	// It becomes the active segment: its files stay open.
	s.sealed.Store(false)
	if s.cfg.Cache != nil {
		s.cfg.Cache.remove(s)
	}
	pos, newNext := int64(0), s.base
	if offset > s.base {
		sp, _, _, err := s.locate(f, offset, s.size.Load())
		switch {
		case errors.Is(err, io.EOF):
			return s.next.Load(), nil
		case err != nil:
			return 0, fmt.Errorf("segment: truncate %s to %d: %w", s.path(".log"), offset, err)
		}
		pos, newNext = sp.pos, sp.base
	}
	// Forget the batches the appender remembers, then publish the shorter
	// segment: new readers stop at the cut. (Appends after it record
	// batches anew.)
	s.cuts.Add(1)
	s.recent.Store(nil)
	s.size.Store(pos)
	s.next.Store(newNext)

	if err := s.truncateTxnIndex(newNext); err != nil {
		return 0, fmt.Errorf("segment: truncate: %w", err)
	}
	if err := oi.TruncateTo(newNext); err != nil {
		return 0, fmt.Errorf("segment: truncate %s: %w", s.path(".index"), err)
	}
	if err := ti.TruncateTo(newNext); err != nil {
		return 0, fmt.Errorf("segment: truncate %s: %w", s.path(".timeindex"), err)
	}
	if maxIndexBytes <= 0 {
		maxIndexBytes = s.cfg.MaxIndexBytes
	}
	if err := s.ResizeIndexes(maxIndexBytes); err != nil {
		return 0, err
	}
	if err := s.FlushIndexes(); err != nil {
		return 0, err
	}
	if err := f.log.Truncate(pos); err != nil {
		return 0, fmt.Errorf("segment: truncate %s to %d: %w", s.path(".log"), pos, err)
	}
	if err := s.Sync(); err != nil {
		return 0, err
	}
	// The largest timestamp, the first batch's timestamp and the indexing
	// distance are recomputed from what is left.
	s.maxTs.Store(-1)
	s.offsetOfMaxTs, s.rollingTs = s.base, -1
	if err := s.load(f); err != nil {
		return 0, fmt.Errorf("segment: truncate %s: reload: %w", s.path(".log"), err)
	}
	s.bytesSinceIndex = int(pos - oi.LastEntry().Position)
	return newNext, nil
}

// BatchHeaders calls fn with the header of every batch of the segment, in
// order, until fn returns false. It reads the headers only (4 KiB of the
// .log at a time: one read for many small batches).
func (s *Segment) BatchHeaders(fn func(h batch.Header) bool) error {
	return s.BatchHeadersControl(func(h batch.Header, _ []byte) bool { return fn(h) })
}

// BatchHeadersControl is BatchHeaders that also reads each control batch
// (a transaction marker) whole: fn gets its bytes, CRC checked, in control
// (nil for other batches), valid only during the call.
func (s *Segment) BatchHeadersControl(fn func(h batch.Header, control []byte) bool) error {
	f, err := s.hold()
	if err != nil {
		return err
	}
	defer s.Release()
	end := s.size.Load()
	hr := newHeaderReader(f.log, end)
	defer hr.close()
	var buf []byte
	for pos := int64(0); pos < end; {
		h, err := s.headerAt(&hr, pos)
		if err != nil {
			return err
		}
		var control []byte
		if h.Control() {
			buf = slices.Grow(buf[:0], h.Size())[:h.Size()]
			if _, err := f.log.ReadAt(buf, pos); err != nil {
				return fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), pos, err)
			}
			if _, err := batch.Validate(buf); err != nil {
				return fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, err)
			}
			control = buf
		}
		if !fn(h, control) {
			return nil
		}
		pos += int64(h.Size())
	}
	return nil
}
