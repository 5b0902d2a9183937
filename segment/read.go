package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// headerBufs recycles the buffers header reads into: a buffer passed to
// File.ReadAt (an interface) escapes, and headers are read on every lookup.
var headerBufs = sync.Pool{New: func() any { return new([batch.HeaderSize]byte) }}

// header reads and parses the batch header at pos, which must be below end.
func (s *Segment) header(f *files, pos, end int64) (batch.Header, error) {
	buf := headerBufs.Get().(*[batch.HeaderSize]byte)
	defer headerBufs.Put(buf)
	if end-pos < batch.HeaderSize {
		return batch.Header{}, fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, batch.ErrShort)
	}
	if _, err := f.log.ReadAt(buf[:], pos); err != nil {
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
//
// The methods that read (Locate, Read, Range, File, OffsetForTime,
// ReadInto) are called by a reader that holds the segment (Acquire); they
// open its files if they are closed, and return that error if they cannot
// (out of file descriptors, say), which does not stick.
func (s *Segment) Locate(offset int64) (int64, batch.Header, error) {
	f, err := s.files()
	if err != nil {
		return 0, batch.Header{}, err
	}
	end := s.size.Load()
	sp, _, _, err := s.locate(f, offset, end)
	if err != nil {
		return 0, batch.Header{}, err
	}
	h, err := s.header(f, sp.pos, end)
	if err != nil {
		return 0, batch.Header{}, err
	}
	return sp.pos, h, nil
}

// locate finds the batch that holds offset, or the first after it, below
// end (the published size, loaded by the caller); io.EOF if none ends at or
// after offset. At the end of the active segment it finds it among the
// batches the appender remembers (recent), reading nothing: r is then that
// ring and k the batch's number in it. Elsewhere it reads the batch headers
// from the offset-index entry on (headerReader: a read per 4 KiB of small
// batches, not one per header).
func (s *Segment) locate(f *files, offset, end int64) (sp span, r *recent, k uint64, err error) {
	if r = s.recent.Load(); r != nil {
		sp, k, eof, ok := r.find(offset, end)
		switch {
		case ok && eof:
			return span{}, nil, 0, io.EOF
		case ok:
			return sp, r, k, nil
		}
	}
	oi, err := s.offsetIndex(f)
	if err != nil {
		return span{}, nil, 0, err
	}
	hr := newHeaderReader(f.log, end)
	defer hr.close()
	pos := oi.Lookup(offset).Position
	for pos < end {
		h, err := s.headerAt(&hr, pos)
		if err != nil {
			return span{}, nil, 0, err
		}
		if h.LastOffset() >= offset {
			return spanOf(pos, h), nil, 0, nil
		}
		pos += int64(h.Size())
	}
	return span{}, nil, 0, io.EOF
}

// NoBound is a maxOffset that bounds nothing: Read and Range to the end of
// the segment.
const NoBound = math.MaxInt64

// Read returns whole batches starting with the one that holds offset (or the
// first after it), none whose base offset is at or past maxOffset (the high
// watermark a consumer reads below, the end offset a follower reads below):
// as many as fit in maxBytes, and with atLeastOne at least one even if it is
// larger; and the offset after the last of them. With nothing to return
// (the first batch starts at or past maxOffset, or does not fit and
// atLeastOne is false) it returns no data and next = offset. It returns
// io.EOF when there is nothing at or after offset in this segment.
func (s *Segment) Read(offset int64, maxBytes int, maxOffset int64, atLeastOne bool) (data []byte, next int64, err error) {
	f, err := s.files()
	if err != nil {
		return nil, 0, err
	}
	end := s.size.Load()
	sp, _, _, err := s.locate(f, offset, end)
	if err != nil {
		return nil, 0, err
	}
	if sp.base >= maxOffset || (!atLeastOne && sp.size > int64(maxBytes)) {
		return nil, offset, nil
	}
	n := end - sp.pos
	if n > int64(maxBytes) {
		n = int64(maxBytes)
	}
	if n < sp.size {
		n = sp.size
	}
	buf := make([]byte, n)
	if _, err := f.log.ReadAt(buf, sp.pos); err != nil {
		return nil, 0, fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), sp.pos, err)
	}
	n, next = wholeBatches(buf, maxOffset)
	return buf[:n], next, nil
}

// wholeBatches returns the length of the prefix of b made of whole batches
// whose base offsets are below maxOffset, and the offset after the last of
// them.
func wholeBatches(b []byte, maxOffset int64) (n int64, next int64) {
	for len(b)-int(n) >= batch.HeaderSize {
		size, err := batch.PeekSize(b[n:])
		if err != nil || int(n)+size > len(b) {
			break
		}
		h, err := batch.ParseHeader(b[n:])
		if err != nil || h.BaseOffset >= maxOffset {
			break
		}
		next = h.NextOffset()
		n += int64(size)
	}
	return n, next
}

// Range returns the byte range [pos, pos+length) of whole batches that Read
// would return for the same arguments, and the offset after the last of
// them, without reading their bodies: what a zero-copy send needs. With
// nothing to return, length is 0 and next = offset.
//
// At the end of the active segment it reads nothing: the batches are among
// those the appender remembers. Elsewhere it reads few headers: the offset
// index gives the last indexed batch that ends within maxBytes and starts
// below maxOffset, and only the batches after it (about IndexIntervalBytes
// of them) are walked.
func (s *Segment) Range(offset int64, maxBytes int, maxOffset int64, atLeastOne bool) (pos, length, next int64, err error) {
	f, err := s.files()
	if err != nil {
		return 0, 0, 0, err
	}
	end := s.size.Load()
	sp, r, k, err := s.locate(f, offset, end)
	if err != nil {
		return 0, 0, 0, err
	}
	pos = sp.pos
	if sp.base >= maxOffset || (!atLeastOne && sp.size > int64(maxBytes)) {
		return pos, 0, offset, nil
	}
	limit := min(end, pos+max(int64(maxBytes), sp.size))
	length, next = sp.size, sp.next
	p := pos + length
	if r != nil {
		// The batches after it, as long as the ring has them.
		for _, hi := r.window(); k+1 < hi && p < end; k++ {
			b, ok := r.get(k + 1)
			if !ok || b.pos != p {
				break // overwritten meanwhile: the file has them
			}
			if b.base >= maxOffset || p+b.size > limit {
				return pos, length, next, nil
			}
			length += b.size
			next = b.next
			p += b.size
		}
		if p >= end {
			return pos, length, next, nil
		}
	}
	if _, err := s.offsetIndex(f); err != nil {
		return 0, 0, 0, err
	}
	// Jump over the batches the index shows to be wholly within the
	// limits: an entry is a batch's last offset and its position, so
	// every batch before an entry's position ends at or before it, and
	// starts below the entry's offset.
	if e, ok := s.lastEntryWithin(f, p, limit, maxOffset, end); ok {
		p = e.Position
		length = p - pos
		next = -1 // the offset after the batch before p: the walk sets it
	}
	hr := newHeaderReader(f.log, end)
	defer hr.close()
	for p < end {
		h, err := s.headerAt(&hr, p)
		if err != nil {
			return 0, 0, 0, err
		}
		if h.BaseOffset >= maxOffset || p+int64(h.Size()) > limit {
			if next < 0 {
				next = h.BaseOffset // where the next read starts
			}
			break
		}
		length += int64(h.Size())
		next = h.NextOffset()
		p += int64(h.Size())
	}
	return pos, length, next, nil
}

// lastEntryWithin returns the offset-index entry with the largest position
// in (from, limit] whose batch (the one at that position) starts below
// maxOffset and below end, the segment's published end the caller read;
// false if there is none. (An end read again here could be past the
// caller's: an entry of a batch appended since, at the caller's end, would
// leave the caller's walk no batch to read its next offset from.)
func (s *Segment) lastEntryWithin(f *files, from, limit, maxOffset, end int64) (index.OffsetEntry, bool) {
	ok := func(e index.OffsetEntry) bool {
		return e.Position <= limit && e.Position < end && e.Offset < maxOffset
	}
	oi := f.oi.Load() // the caller opened it
	n := oi.Entries()
	// Entries are sorted by offset and position: ok holds for a prefix.
	i := sort.Search(n, func(i int) bool {
		e, found := oi.Entry(i)
		return !found || !ok(e)
	}) - 1
	if i < 0 {
		return index.OffsetEntry{}, false
	}
	e, found := oi.Entry(i)
	if !found || !ok(e) || e.Position <= from {
		return index.OffsetEntry{}, false
	}
	return e, true
}

// File is the .log file, for zero-copy sends; callers hold a reference
// (and have found the bytes to send with Range or Read, which opened it).
// If the file cannot be opened, the returned File fails every call with
// that error.
func (s *Segment) File() vfs.File {
	f, err := s.files()
	if err != nil {
		return errFile{err}
	}
	return f.log
}

// errFile is a File that fails every call.
type errFile struct{ err error }

func (e errFile) Read([]byte) (int, error)           { return 0, e.err }
func (e errFile) ReadAt([]byte, int64) (int, error)  { return 0, e.err }
func (e errFile) Write([]byte) (int, error)          { return 0, e.err }
func (e errFile) WriteAt([]byte, int64) (int, error) { return 0, e.err }
func (e errFile) Close() error                       { return e.err }
func (e errFile) Sync() error                        { return e.err }
func (e errFile) Truncate(int64) error               { return e.err }
func (e errFile) Stat() (os.FileInfo, error)         { return nil, e.err }

// OffsetForTime returns the first offset at or after from whose record
// timestamp is at least ts (ms). ok is false when the segment has none.
func (s *Segment) OffsetForTime(ts, from int64) (off int64, ok bool, err error) {
	if s.maxTs.Load() < ts {
		return 0, false, nil
	}
	f, err := s.files()
	if err != nil {
		return 0, false, err
	}
	oi, ti, err := s.indexes(f)
	if err != nil {
		return 0, false, err
	}
	e := ti.Lookup(ts)
	start := e.Offset
	if from > start {
		start = from
	}
	pos := oi.Lookup(start).Position
	end := s.size.Load()
	hr := newHeaderReader(f.log, end)
	defer hr.close()
	for pos < end {
		h, err := s.headerAt(&hr, pos)
		if err != nil {
			return 0, false, err
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= from {
			buf := make([]byte, h.Size())
			if _, err := f.log.ReadAt(buf, pos); err != nil {
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

// headerReadSize is how much of the .log a headerReader reads at a time: the
// headers of the small batches between two offset-index entries
// (IndexIntervalBytes, 4 KiB by default) in one read.
const headerReadSize = 4 << 10

var headerReadBufs = sync.Pool{New: func() any { return new([headerReadSize]byte) }}

// headerReader reads the batch headers of a .log below end,
// headerReadSize bytes at a time: walking small batches costs a read per
// 4 KiB, not one per batch. Its errors are bare (batch.ErrShort when a
// batch runs past end, the read's error, the header's); Segment.headerAt
// names the file.
type headerReader struct {
	r   io.ReaderAt
	end int64
	buf *[headerReadSize]byte
	at  int64 // file position of buf[0]
	n   int   // valid bytes in buf
}

func newHeaderReader(r io.ReaderAt, end int64) headerReader {
	return headerReader{r: r, end: end, buf: headerReadBufs.Get().(*[headerReadSize]byte)}
}

func (r *headerReader) close() {
	headerReadBufs.Put(r.buf)
	r.buf = nil
}

// header reads and parses the batch header at pos, which must be below end,
// and checks that the batch ends by end.
func (r *headerReader) header(pos int64) (batch.Header, error) {
	if r.end-pos < batch.HeaderSize {
		return batch.Header{}, batch.ErrShort
	}
	if pos < r.at || pos+batch.HeaderSize > r.at+int64(r.n) {
		n := int(min(int64(headerReadSize), r.end-pos))
		if _, err := r.r.ReadAt(r.buf[:n], pos); err != nil {
			r.n = 0
			return batch.Header{}, err
		}
		r.at, r.n = pos, n
	}
	h, err := batch.ParseHeader(r.buf[pos-r.at : r.n])
	if err != nil {
		return batch.Header{}, err
	}
	if pos+int64(h.Size()) > r.end {
		return batch.Header{}, batch.ErrShort
	}
	return h, nil
}

// headerAt is hr.header(pos), its error naming the segment's .log.
func (s *Segment) headerAt(hr *headerReader, pos int64) (batch.Header, error) {
	h, err := hr.header(pos)
	if err != nil {
		if errors.Is(err, batch.ErrShort) || errors.Is(err, batch.ErrCorrupt) {
			return batch.Header{}, fmt.Errorf("segment %s at %d: %w", s.path(".log"), pos, err)
		}
		return batch.Header{}, fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), pos, err)
	}
	return h, nil
}
