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
	n, buf := len(dst), dst // buf: dst, grown by a read that found only records to skip
	for {
		raw, err := p.ReadBatches(offset, maxBytes, hw)
		if err != nil {
			return dst, err
		}
		if len(raw) > 0 {
			var hdrs []Header
			recs, next, err := decodeBatches(slices.Grow(buf[:n], countRecords(raw)), &hdrs, raw, nil, nil, TopicPartition{Topic: p.topic, Partition: p.id}, offset, p.maxInflate)
			if err != nil {
				clear(recs[n:])
				return dst[:n], fmt.Errorf("log: read %s at %d: %w", p, offset, err)
			}
			// Only committed records: none at or past the high watermark.
			i := len(recs)
			for i > n && recs[i-1].Offset >= hw {
				i--
			}
			if i > n {
				return recs[:i], nil
			}
			clear(recs[n:])
			buf = recs
			// Nothing below hw: only batches that compaction emptied. Read
			// on after them.
			if next > offset && next < hw {
				offset = next
				continue
			}
		}
		// No record from offset up to hw. If offset is below hw there were
		// some when hw was read: a cleaning pass has since removed them,
		// superseded by records appended after hw was read (a pass maps
		// only records below the high watermark as it is when it runs), so
		// those are below the high watermark as it is now: read up to it.
		if now := p.HighWatermark(); now > hw {
			hw = now
			continue
		}
		return buf[:n], nil
	}
}

// ReadBatches returns the raw record batches from the one holding offset on,
// whole batches up to maxBytes (at least one), none starting at or after
// maxOffset; they may span segments. They are the bytes on disk, CRCs
// unchecked, read into a new slice: [Partition.Slice] and [Batches.Bytes].
func (p *Partition) ReadBatches(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	b, err := p.Slice(offset, maxBytes, maxOffset)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	b.tail = nil // the slice is the caller's, to change as it likes
	raw, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("log: read %s at %d: %w", p, offset, err)
	}
	return raw, nil
}

// Slice returns a handle on the record batches from the one holding offset
// on: whole batches up to maxBytes (at least one, however large), none
// starting at or after maxOffset (the high watermark for a consumer, the end
// offset for a follower); they may span segments. Nothing is read but batch
// headers: the bytes stay in the segment files, which the handle holds
// until its Release. Offsets outside [StartOffset, EndOffset] get an
// *OffsetOutOfRangeError; at or past maxOffset the handle is empty.
func (p *Partition) Slice(offset int64, maxBytes int, maxOffset int64) (Batches, error) {
	return p.slice(offset, maxBytes, maxOffset, true)
}

// slice is Slice, with at least one batch only if atLeastOne.
func (p *Partition) slice(offset int64, maxBytes int, maxOffset int64, atLeastOne bool) (Batches, error) {
	if err := p.checkRange(offset); err != nil {
		return Batches{}, err
	}
	var out Batches
	for firstSeg := true; offset < maxOffset && (out.n == 0 || out.size < int64(maxBytes)); firstSeg = false {
		list := p.segs.Load()
		seg := p.segmentFor(offset)
		if seg == nil {
			if !firstSeg {
				break
			}
			return Batches{}, p.outOfRange(offset)
		}
		pos, length, next, err := seg.Range(offset, maxBytes-int(out.size), maxOffset, out.n == 0 && atLeastOne)
		segNext := seg.NextOffset()
		if (length == 0 || errors.Is(err, io.EOF)) && p.segs.Load() != list {
			// The cleaner replaced segments under us: the one found may be
			// on its way out. Look again in the new list.
			seg.Release()
			continue
		}
		switch {
		case errors.Is(err, io.EOF):
			// Nothing at or after offset in that segment (a gap at its
			// end): go on in the next one.
			seg.Release()
			next = segNext
		case err != nil:
			seg.Release()
			out.Release()
			return Batches{}, fmt.Errorf("log: read %s at %d: %w", p, offset, err)
		case length == 0:
			seg.Release()
		default:
			out.add(seg, pos, length, next) // the handle keeps the reference
		}
		stop := next < segNext || next <= offset // maxBytes or maxOffset reached within the segment
		offset = max(offset, next)
		if stop {
			break
		}
	}
	out.next = offset
	if out.n == 1 {
		out.tail = p.tail.Load()
	}
	return out, nil
}

// readable is how many bytes of whole batches a read at offset would find
// below maxOffset, counted up to about limit: what a parked fetch waits for.
func (p *Partition) readable(offset, maxOffset int64, limit int) (int64, error) {
	if offset >= maxOffset {
		return 0, p.checkRange(offset)
	}
	b, err := p.slice(offset, limit, maxOffset, true)
	if err != nil {
		return 0, err
	}
	n := b.Len()
	b.Release()
	return n, nil
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
