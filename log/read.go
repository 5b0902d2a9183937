package log

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/strata-log/strata/segment"
)

// segmentFor returns, acquired, the segment that holds offset: the last one
// whose base offset is at or below it. nil if none.
func (p *Partition) segmentFor(offset int64) *segment.Segment {
	for {
		segs := *p.segs.Load()
		i := sort.Search(len(segs), func(i int) bool { return segs[i].BaseOffset() > offset }) - 1
		if i < 0 {
			return nil
		}
		if segs[i].Acquire() {
			return segs[i]
		}
		// Deleted under us by retention: the list has changed; look again.
		if p.closed.Load() {
			return nil
		}
	}
}

func (p *Partition) outOfRange(offset int64) error {
	return &OffsetOutOfRangeError{Topic: p.topic, Partition: p.id, Requested: offset, Start: p.StartOffset(), End: p.EndOffset()}
}

// checkRange returns an error unless offset is in [start, end].
func (p *Partition) checkRange(offset int64) error {
	if p.closed.Load() {
		return p.closedErr()
	}
	if offset < p.start.Load() || offset > p.leo.Load() {
		return p.outOfRange(offset)
	}
	return nil
}

// Read returns records from offset on, whole batches up to maxBytes, and at
// least one record if any exists at offset. Reading at the end offset
// returns no records and no error. Offsets outside [StartOffset, EndOffset]
// get an *OffsetOutOfRangeError. Corrupt data is an error (ErrCorrupt),
// never records.
func (p *Partition) Read(offset int64, maxBytes int) ([]Record, error) {
	return p.ReadAppend(nil, offset, maxBytes)
}

// ReadAppend is Read appending to dst, so that a reader going through a
// partition can reuse one slice (dst[:0]) instead of allocating one per
// call. On error dst is returned unchanged.
func (p *Partition) ReadAppend(dst []Record, offset int64, maxBytes int) ([]Record, error) {
	hw := p.HighWatermark()
	raw, err := p.ReadBatches(offset, maxBytes, hw)
	if err != nil || len(raw) == 0 {
		return dst, err
	}
	n := len(dst)
	var hdrs []Header
	recs, _, err := decodeFrom(slices.Grow(dst, countRecords(raw)), &hdrs, raw, TopicPartition{Topic: p.topic, Partition: p.id}, offset)
	if err != nil {
		clear(recs[n:])
		return dst[:n], fmt.Errorf("log: read %s at %d: %w", p, offset, err)
	}
	// Only committed records: none at or past the high watermark.
	i := len(recs)
	for i > n && recs[i-1].Offset >= hw {
		i--
	}
	return recs[:i], nil
}

// ReadBatches returns the raw record batches from the one holding offset on,
// whole batches up to maxBytes (at least one), none starting at or after
// maxOffset; they may span segments. They are the bytes on disk, CRCs
// unchecked.
func (p *Partition) ReadBatches(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	return p.readBatches(offset, maxBytes, maxOffset, true)
}

// readBatches is ReadBatches, with at least one batch only if atLeastOne.
func (p *Partition) readBatches(offset int64, maxBytes int, maxOffset int64, atLeastOne bool) ([]byte, error) {
	if err := p.checkRange(offset); err != nil {
		return nil, err
	}
	var out []byte
	first := true
	for offset < maxOffset && (first || len(out) < maxBytes) {
		seg := p.segmentFor(offset)
		if seg == nil {
			if !first {
				break
			}
			return nil, p.outOfRange(offset)
		}
		raw, next, err := seg.Read(offset, maxBytes-len(out), maxOffset, first && atLeastOne)
		first = false
		segNext := seg.NextOffset()
		seg.Release()
		switch {
		case errors.Is(err, io.EOF):
			// Nothing at or after offset in that segment (a gap at its
			// end): go on in the next one.
			next = segNext
		case err != nil:
			return nil, fmt.Errorf("log: read %s at %d: %w", p, offset, err)
		case out == nil:
			out = raw
		default:
			out = append(out, raw...)
		}
		if next < segNext || next <= offset {
			break // maxBytes reached within the segment
		}
		offset = next
	}
	return out, nil
}

// OffsetForTime returns the first offset whose record timestamp is at or after
// ts. If no record is that recent it returns the end offset.
func (p *Partition) OffsetForTime(ts time.Time) (int64, error) {
	if p.closed.Load() {
		return 0, p.closedErr()
	}
	ms := ts.UnixMilli()
	from := p.start.Load()
	for _, s := range *p.segs.Load() {
		if s.NextOffset() <= from || s.MaxTimestamp() < ms || !s.Acquire() {
			continue
		}
		off, ok, err := s.OffsetForTime(ms, from)
		s.Release()
		if err != nil {
			return 0, fmt.Errorf("log: offset for time in %s: %w", p, err)
		}
		if ok {
			return off, nil
		}
	}
	return p.EndOffset(), nil
}
