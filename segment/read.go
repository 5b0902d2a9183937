package segment

import (
	"fmt"
	"io"
	"sync"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// headerBufs recycles the buffers header reads into: a buffer passed to
// File.ReadAt (an interface) escapes, and headers are read on every lookup.
var headerBufs = sync.Pool{New: func() any { return new([batch.HeaderSize]byte) }}

// header reads and parses the batch header at pos, which must be below end.
func (s *Segment) header(pos, end int64) (batch.Header, error) {
	buf := headerBufs.Get().(*[batch.HeaderSize]byte)
	defer headerBufs.Put(buf)
	if end-pos < batch.HeaderSize {
		return batch.Header{}, fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, batch.ErrShort)
	}
	if _, err := s.log.ReadAt(buf[:], pos); err != nil {
		return batch.Header{}, fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), pos, err)
	}
	h, err := batch.ParseHeader(buf[:])
	if err != nil {
		return batch.Header{}, fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, err)
	}
	if pos+int64(h.Size()) > end {
		return batch.Header{}, fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, batch.ErrShort)
	}
	return h, nil
}

// Locate returns the position and header of the batch that holds offset, or
// of the first batch after it. It returns io.EOF when no batch in the segment
// ends at or after offset.
func (s *Segment) Locate(offset int64) (int64, batch.Header, error) {
	end := s.size.Load()
	pos := s.oi.Lookup(offset).Position
	for pos < end {
		h, err := s.header(pos, end)
		if err != nil {
			return 0, batch.Header{}, err
		}
		if h.LastOffset() >= offset {
			return pos, h, nil
		}
		pos += int64(h.Size())
	}
	return 0, batch.Header{}, io.EOF
}

// Read returns whole batches starting with the one that holds offset (or the
// first after it): as many as fit in maxBytes, and with atLeastOne at least
// one even if it is larger; and the offset after the last of them. It
// returns io.EOF when there is nothing at or after offset in this segment.
func (s *Segment) Read(offset int64, maxBytes int, atLeastOne bool) (data []byte, next int64, err error) {
	pos, h, err := s.Locate(offset)
	if err != nil {
		return nil, 0, err
	}
	if !atLeastOne && h.Size() > maxBytes {
		return nil, offset, nil
	}
	end := s.size.Load()
	n := end - pos
	if n > int64(maxBytes) {
		n = int64(maxBytes)
	}
	if n < int64(h.Size()) {
		n = int64(h.Size())
	}
	buf := make([]byte, n)
	if _, err := s.log.ReadAt(buf, pos); err != nil {
		return nil, 0, fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), pos, err)
	}
	n, next = wholeBatches(buf)
	return buf[:n], next, nil
}

// wholeBatches returns the length of the prefix of b made of whole batches,
// and the offset after the last of them.
func wholeBatches(b []byte) (n int64, next int64) {
	last := -1
	for len(b)-int(n) >= 12 {
		size, err := batch.PeekSize(b[n:])
		if err != nil || int(n)+size > len(b) {
			break
		}
		last = int(n)
		n += int64(size)
	}
	if last >= 0 {
		if h, err := batch.ParseHeader(b[last:]); err == nil {
			next = h.NextOffset()
		}
	}
	return n, next
}

// Range returns the byte range [pos, pos+length) of whole batches that Read
// would return for offset and maxBytes, and the offset after the last of
// them, without reading their bodies: what a zero-copy send needs.
func (s *Segment) Range(offset int64, maxBytes int) (pos, length, next int64, err error) {
	pos, h, err := s.Locate(offset)
	if err != nil {
		return 0, 0, 0, err
	}
	end := s.size.Load()
	length, next = int64(h.Size()), h.NextOffset()
	for p := pos + length; p < end; {
		h, err := s.header(p, end)
		if err != nil {
			return 0, 0, 0, err
		}
		if length+int64(h.Size()) > int64(maxBytes) {
			break
		}
		length += int64(h.Size())
		next = h.NextOffset()
		p += int64(h.Size())
	}
	return pos, length, next, nil
}

// File is the .log file, for zero-copy sends; callers hold a reference.
func (s *Segment) File() vfs.File { return s.log }

// OffsetForTime returns the first offset at or after from whose record
// timestamp is at least ts (ms). ok is false when the segment has none.
func (s *Segment) OffsetForTime(ts, from int64) (off int64, ok bool, err error) {
	if s.maxTs.Load() < ts {
		return 0, false, nil
	}
	e := s.ti.Lookup(ts)
	start := e.Offset
	if from > start {
		start = from
	}
	pos := s.oi.Lookup(start).Position
	end := s.size.Load()
	for pos < end {
		h, err := s.header(pos, end)
		if err != nil {
			return 0, false, err
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= from {
			buf := make([]byte, h.Size())
			if _, err := s.log.ReadAt(buf, pos); err != nil {
				return 0, false, fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), pos, err)
			}
			found := int64(-1)
			_, err := batch.Decode(buf, func(r *batch.Record) error {
				if found < 0 && r.Offset >= from && r.Timestamp >= ts {
					found = r.Offset
				}
				return nil
			})
			if err != nil {
				return 0, false, fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, err)
			}
			if found >= 0 {
				return found, true, nil
			}
		}
		pos += int64(h.Size())
	}
	return 0, false, nil
}
