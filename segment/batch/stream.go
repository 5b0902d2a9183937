package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// windowSize is the initial size of the window through which a compressed
// batch's records are validated; it grows to fit the largest record.
const windowSize = 128 << 10

// windows holds the validation windows, so that validating a compressed batch
// allocates nothing in steady state.
var windows = sync.Pool{New: func() any { b := make([]byte, 0, windowSize); return &b }}

// recordStream reads records out of a decompressing reader through a window:
// only the record being parsed (and what the last read brought after it) is
// in memory, never the whole decompressed section.
type recordStream struct {
	r     io.Reader
	codec int
	buf   []byte // buf[i:] is read and not parsed yet
	i     int
	eof   bool
	total int // bytes read from r
}

// fill makes buf[i:] hold at least n bytes, or everything that is left.
// It reports how many it holds.
func (s *recordStream) fill(n int) (int, error) {
	for len(s.buf)-s.i < n && !s.eof {
		if s.i > 0 { // slide the unparsed bytes (part of one record) to the front
			m := copy(s.buf[:cap(s.buf)], s.buf[s.i:])
			s.buf, s.i = s.buf[:m], 0
		}
		if cap(s.buf)-len(s.buf) < windowSize/2 {
			// The window is full of one record: grow it by doubling, so a
			// record promising more bytes than come costs at most twice
			// what did come.
			g := make([]byte, len(s.buf), 2*cap(s.buf)+windowSize)
			copy(g, s.buf)
			s.buf = g
		}
		m, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+m]
		s.total += m
		if s.total > maxInflated {
			return 0, corruptf("%s payload inflates to more than %d bytes", codecName(s.codec), maxInflated)
		}
		switch {
		case errors.Is(err, io.EOF):
			s.eof = true
		case err != nil:
			return 0, codecError(s.codec, err)
		}
	}
	return min(n, len(s.buf)-s.i), nil
}

// next parses the next record into r and returns the bytes it spans in
// s.buf (valid until the next call). ok is false at the end of the section.
func (s *recordStream) next(r *rawRecord) (start int, ok bool, err error) {
	got, err := s.fill(5) // a varint length takes at most 5 bytes
	if err != nil || got == 0 {
		return 0, false, err
	}
	length, j, vok := readVarint32(s.buf, s.i)
	if !vok {
		return 0, false, corruptf("record at byte %d of the records: bad length varint", s.total-len(s.buf)+s.i)
	}
	if length < minRecordBody {
		return 0, false, corruptf("record at byte %d of the records: length %d", s.total-len(s.buf)+s.i, length)
	}
	need := j - s.i + int(length)
	if got, err = s.fill(need); err != nil {
		return 0, false, err
	}
	if got < need {
		return 0, false, corruptf("record at byte %d of the records: length %d with %d bytes left", s.total-len(s.buf)+s.i, length, got-(j-s.i))
	}
	start = s.i
	end, err := parseRecord(s.buf[:start+need], start, r)
	if err != nil {
		return 0, false, err
	}
	s.i = end
	return start, true, nil
}

// scanCompressed validates the records of the compressed batch b (len(b) ==
// h.Size(), CRC and header checked) as scanRecords does an uncompressed one,
// streaming the payload through a pooled decoder and window: count, offset
// deltas, record framing, max timestamp, and that nothing follows the last
// record, not even in the compressed stream.
func scanCompressed(b []byte, h *Header) error {
	codec := h.Compression()
	f := getInflater()
	defer f.release()
	r, whole, err := f.open(codec, b[HeaderSize:])
	if err != nil {
		return err
	}
	if whole != nil { // a raw snappy block, decoded already
		return scanRecordsIn(whole, h)
	}
	wp := windows.Get().(*[]byte)
	s := recordStream{r: r, codec: codec, buf: (*wp)[:0]}
	defer func() {
		if cap(s.buf) <= 4*windowSize {
			*wp = s.buf[:0]
		}
		windows.Put(wp)
	}()
	var raw rawRecord
	prev, maxTS := int32(-1), int64(math.MinInt64)
	for n := range h.NumRecords {
		_, ok, err := s.next(&raw)
		if err != nil {
			return err
		}
		if !ok {
			return corruptf("batch holds %d records, header says %d", n, h.NumRecords)
		}
		if raw.offDelta <= prev || raw.offDelta > h.LastOffsetDelta {
			return corruptf("record %d: offset delta %d after %d, last offset delta %d", n, raw.offDelta, prev, h.LastOffsetDelta)
		}
		prev = raw.offDelta
		maxTS = max(maxTS, h.BaseTimestamp+raw.tsDelta)
	}
	if got, err := s.fill(1); err != nil {
		return err
	} else if got > 0 {
		return corruptf("bytes after the last of %d records", h.NumRecords)
	}
	if h.NumRecords > 0 && !h.LogAppendTime() && maxTS != h.MaxTimestamp {
		return corruptf("max timestamp %d, records' maximum is %d", h.MaxTimestamp, maxTS)
	}
	return nil
}

// scanRecordsIn is scanRecords over a records section held whole in recs.
func scanRecordsIn(recs []byte, h *Header) error {
	var r rawRecord
	i, prev, maxTS := 0, int32(-1), int64(math.MinInt64)
	for n := range h.NumRecords {
		if i == len(recs) {
			return corruptf("batch holds %d records, header says %d", n, h.NumRecords)
		}
		var err error
		if i, err = parseRecord(recs, i, &r); err != nil {
			return err
		}
		if r.offDelta <= prev || r.offDelta > h.LastOffsetDelta {
			return corruptf("record %d: offset delta %d after %d, last offset delta %d", n, r.offDelta, prev, h.LastOffsetDelta)
		}
		prev = r.offDelta
		maxTS = max(maxTS, h.BaseTimestamp+r.tsDelta)
	}
	if i != len(recs) {
		return corruptf("%d bytes after the last of %d records", len(recs)-i, h.NumRecords)
	}
	if h.NumRecords > 0 && !h.LogAppendTime() && maxTS != h.MaxTimestamp {
		return corruptf("max timestamp %d, records' maximum is %d", h.MaxTimestamp, maxTS)
	}
	return nil
}

// Decompress appends to dst the batch at the start of b, whose header h was
// returned by Validate, Check or a Batches callback, with its records section
// decompressed: an uncompressed batch with the same header fields (the
// compression bits cleared, the CRC recomputed), which Records and Decode
// read like any other. The records are validated as Validate does. An
// uncompressed batch is appended as it is. It returns ErrCorrupt for a
// payload that does not decompress or holds other records than h says;
// dst's contents are then unspecified.
//
// Records uses it for compressed batches; a reader that decodes many batches
// uses it directly to choose where the records go (their Key and Value alias
// the result).
func Decompress(dst, b []byte, h Header) ([]byte, error) {
	if h.Length < minLength {
		return dst, corruptf("batch length %d is less than the minimum %d", h.Length, minLength)
	}
	if h.Size() > len(b) {
		return dst, shortf("%d bytes, the batch needs %d", len(b), h.Size())
	}
	b = b[:h.Size()]
	codec := h.Compression()
	if codec == CompressionNone {
		return append(dst, b...), nil
	}
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	f := getInflater()
	defer f.release()
	r, whole, err := f.open(codec, b[HeaderSize:])
	if err != nil {
		return dst, err
	}
	if whole != nil {
		dst = append(dst, whole...)
	} else {
		// Guess a 4:1 ratio, then grow by doubling as bytes come.
		dst = grow(dst, min(4*(len(b)-HeaderSize), maxInflated))
		for {
			if len(dst) == cap(dst) {
				dst = grow(dst, max(cap(dst)-start, windowSize))
			}
			m, err := r.Read(dst[len(dst):cap(dst)])
			dst = dst[:len(dst)+m]
			if len(dst)-start-HeaderSize > maxInflated {
				return dst, corruptf("%s payload inflates to more than %d bytes", codecName(codec), maxInflated)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return dst, codecError(codec, err)
			}
		}
	}
	out := dst[start:]
	if len(out)-logOverhead > math.MaxInt32 {
		return dst, corruptf("%s payload inflates past the 2 GiB a batch can hold", codecName(codec))
	}
	if err := scanRecordsIn(out[HeaderSize:], &h); err != nil {
		return dst, err
	}
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	be.PutUint16(out[offAttributes:], uint16(h.Attributes&^attrCompression))
	SetCRC(out)
	return dst, nil
}

// Recompress appends to dst the batch at the start of b, whose header h was returned
// by Validate, with its records section compressed with codec instead (uncompressed
// for CompressionNone): the same header fields and records, a new length, codec and
// CRC. A broker whose topic stores one codec whatever the producer sent uses it.
func Recompress(dst, b []byte, h Header, codec int) ([]byte, error) {
	if !ValidCompression(codec) {
		return dst, fmt.Errorf("batch: unknown compression codec %d", codec)
	}
	plain, err := Decompress(nil, b, h)
	if err != nil || codec == CompressionNone {
		return append(dst, plain...), err
	}
	start := len(dst)
	dst = append(dst, plain[:HeaderSize]...)
	if dst, err = compress(dst, codec, plain[HeaderSize:]); err != nil {
		return dst, err
	}
	out := dst[start:]
	if int64(len(out))-logOverhead > math.MaxInt32 {
		return dst, fmt.Errorf("batch: recompressed batch larger than 2 GiB")
	}
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])&^attrCompression|uint16(codec))
	SetCRC(out)
	return dst, nil
}
