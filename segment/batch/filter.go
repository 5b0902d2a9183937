package batch

import (
	"encoding/binary"
	"math"
)

// attrDeleteHorizon is attribute bit 6 (KIP-534): the batch's base timestamp
// is the time after which the log cleaner may remove its tombstones, and
// record timestamp deltas are relative to it.
const attrDeleteHorizon = 0x40

// DeleteHorizon returns the batch's delete horizon (ms) and true if the log
// cleaner has set one (attribute bit 6, KIP-534).
func (h Header) DeleteHorizon() (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// Filter copies batches keeping only some of their records: what the log
// cleaner does. The zero Filter is ready to use; it keeps scratch buffers
// between calls (for a compressed batch, its records decompressed and the
// filtered copy before it is compressed again) and is not safe for
// concurrent use.
type Filter struct {
	// Limit bounds what a compressed batch's records may decompress to
	// (DecompressLimit): 0 → DefaultMaxDecompressed. Apply returns
	// ErrTooLarge for a batch past it, having decompressed no more.
	Limit int

	keep  []bool
	rec   Record // what keep sees, not allocated per call
	plain []byte // a compressed batch, decompressed
	tmp   []byte // the filtered copy of plain, before compression
}

// filterScratchMax is the largest scratch buffer a Filter keeps between
// calls: after a larger batch it lets it go.
const filterScratchMax = 4 << 20

// Apply appends to dst a copy of the batch b, with header h (its CRC checked:
// see Check), holding only the records keep returns true for. The copy keeps
// the batch's base offset, last offset delta, leader epoch, producer fields
// and attributes, so the offsets of the records it keeps do not change and
// the batch still ends where it ended (a copy with no records is Kafka's
// empty batch). With horizon >= 0, a batch that keeps a tombstone (a record
// with a null value) and has no delete horizon yet gets one: attribute bit 6
// and base timestamp horizon, every kept record's timestamp delta
// re-encoded so that its timestamp does not change. So does a control
// batch that keeps its record (a transaction marker the cleaner may
// remove once its transaction's data is gone, Kafka's rule): the cleaner
// passes a horizon only for those.
//
// A compressed batch is decompressed (with a pooled decoder, into the
// Filter's scratch buffer) and its records checked as Validate checks them;
// as Kafka's MemoryRecords.filterTo: a batch that keeps all its records and
// needs no delete horizon is copied as it is, one that keeps some has them
// compressed again with the same codec, and one that keeps none becomes an
// empty batch without compression (a header only: there is no payload to
// compress).
//
// keep sees the record's Offset, Timestamp, Key and Value (aliasing b or the
// scratch buffer, valid during the call); Headers are not decoded. Apply
// returns the extended dst and how many records the copy holds. A malformed
// record, or a payload that does not decompress, is ErrCorrupt, one that
// decompresses past f.Limit ErrTooLarge, and dst is returned as it was.
func (f *Filter) Apply(dst, b []byte, h Header, horizon int64, keep func(r *Record) bool) ([]byte, int, error) {
	if h.Size() > len(b) || h.Length < minLength {
		return dst, 0, shortf("%d bytes, the batch needs %d", len(b), h.Size())
	}
	b = b[:h.Size()]
	codec := h.Compression()
	if codec == CompressionNone {
		out, kept, _, err := f.filter(dst, b, h, horizon, keep)
		return out, kept, err
	}
	if !ValidCompression(codec) {
		return dst, 0, corruptf("unknown compression codec %d", codec)
	}
	defer f.trim()
	plain, err := DecompressLimit(f.plain[:0], b, h, f.Limit)
	f.plain = plain[:0]
	if err != nil {
		return dst, 0, err
	}
	ph := h
	ph.Attributes &^= attrCompression
	ph.Length = int32(len(plain) - logOverhead)
	tmp, kept, changed, err := f.filter(f.tmp[:0], plain, ph, horizon, keep)
	f.tmp = tmp[:0]
	switch {
	case err != nil:
		return dst, 0, err
	case !changed:
		return append(dst, b...), kept, nil
	case kept == 0:
		return append(dst, tmp...), 0, nil
	}
	start := len(dst)
	dst = append(dst, tmp[:HeaderSize]...)
	dst, err = compress(dst, codec, tmp[HeaderSize:])
	if err != nil {
		return dst[:start], 0, err
	}
	out := dst[start:]
	if int64(len(out))-logOverhead > math.MaxInt32 {
		return dst[:start], 0, corruptf("filtered batch larger than 2 GiB")
	}
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])|uint16(codec))
	SetCRC(out)
	return dst, kept, nil
}

// trim drops scratch buffers grown past filterScratchMax.
func (f *Filter) trim() {
	if cap(f.plain) > filterScratchMax {
		f.plain = nil
	}
	if cap(f.tmp) > filterScratchMax {
		f.tmp = nil
	}
}

// filter is Apply for the uncompressed batch b (len(b) == h.Size()).
// changed is false when the copy is b itself: every record kept and no
// delete horizon set.
func (f *Filter) filter(dst, b []byte, h Header, horizon int64, keep func(r *Record) bool) (_ []byte, kept int, changed bool, _ error) {
	f.keep = f.keep[:0]
	var (
		raw       rawRecord
		err       error
		tombstone bool
	)
	rec := &f.rec
	appendTime := h.LogAppendTime()
	i := HeaderSize
	for range h.NumRecords {
		if i, err = parseRecord(b, i, &raw); err != nil {
			return dst, 0, false, err
		}
		rec.Offset = h.BaseOffset + int64(raw.offDelta)
		if appendTime {
			rec.Timestamp = h.MaxTimestamp
		} else {
			rec.Timestamp = h.BaseTimestamp + raw.tsDelta
		}
		rec.Key, rec.Value = raw.key, raw.value
		k := keep(rec)
		f.keep = append(f.keep, k)
		if k {
			kept++
			tombstone = tombstone || raw.value == nil
		}
	}
	if i != len(b) {
		return dst, 0, false, corruptf("%d bytes after the last of %d records", len(b)-i, h.NumRecords)
	}
	rebase := horizon >= 0 && (tombstone || h.Control() && kept > 0) && h.Attributes&attrDeleteHorizon == 0
	if !rebase && kept == int(h.NumRecords) {
		return append(dst, b...), kept, false, nil
	}
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	base := h.BaseTimestamp
	if rebase {
		base = horizon
	}
	maxTS := int64(math.MinInt64)
	i = HeaderSize
	for _, k := range f.keep {
		recStart := i
		i, _ = parseRecord(b, i, &raw) // parsed above
		if !k {
			continue
		}
		ts := h.BaseTimestamp + raw.tsDelta
		maxTS = max(maxTS, ts)
		if !rebase {
			dst = append(dst, b[recStart:i]...)
			continue
		}
		// length, attributes, timestamp delta, then the rest unchanged.
		_, j, _ := readVarint32(b, recStart)
		_, tail, _ := readVarint64(b, j+1)
		delta := ts - base
		body := 1 + varintLen(delta) + (i - tail)
		dst = binary.AppendVarint(dst, int64(body))
		dst = append(dst, b[j])
		dst = binary.AppendVarint(dst, delta)
		dst = append(dst, b[tail:i]...)
	}
	out := dst[start:]
	if int64(len(out))-logOverhead > math.MaxInt32 {
		return dst[:start], 0, false, corruptf("filtered batch larger than 2 GiB")
	}
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	if rebase {
		be.PutUint16(out[offAttributes:], uint16(h.Attributes|attrDeleteHorizon))
		be.PutUint64(out[offBaseTimestamp:], uint64(base))
	}
	if kept > 0 && !appendTime {
		be.PutUint64(out[offMaxTimestamp:], uint64(maxTS))
	}
	be.PutUint32(out[offNumRecords:], uint32(kept))
	SetCRC(out)
	return dst, kept, true, nil
}
