package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// windowSize is the size of the window through which a compressed batch's
// records are validated: records that fit in it are parsed in place, larger
// ones (and those that straddle a refill) field by field, their bytes skipped.
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
	limit int // more than this many bytes from r is inflateError
	empty int // reads in a row that returned nothing
}

// fill makes buf[i:] hold at least n bytes, or everything that is left.
// It reports how many it holds.
func (s *recordStream) fill(n int) (int, error) {
	for len(s.buf)-s.i < n && !s.eof {
		if s.i > 0 { // slide the unparsed bytes (part of one record) to the front
			m := copy(s.buf[:cap(s.buf)], s.buf[s.i:])
			s.buf, s.i = s.buf[:m], 0
		}
		if len(s.buf) == cap(s.buf) { // a window smaller than a varint: grow it
			g := make([]byte, len(s.buf), max(2*cap(s.buf), 16))
			copy(g, s.buf)
			s.buf = g
		}
		m, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+m]
		s.total += m
		if m == 0 && err == nil {
			if s.empty++; s.empty > 100 {
				return 0, corruptf("%s decoder makes no progress", codecName(s.codec))
			}
		} else {
			s.empty = 0
		}
		if s.total > s.limit {
			return 0, inflateError(s.codec, s.limit)
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

// consumed is the position in the decompressed records section of s.buf[s.i].
func (s *recordStream) consumed() int { return s.total - (len(s.buf) - s.i) }

// view returns s.buf holding up to n bytes after s.i (fewer at the end).
func (s *recordStream) view(n int) ([]byte, error) {
	got, err := s.fill(n)
	if err != nil {
		return nil, err
	}
	return s.buf[:s.i+got], nil
}

// varint reads a varint (max 5 bytes) or varlong (max 10) that must end by
// the section position end.
func (s *recordStream) varint(end int, long bool) (int64, bool, error) {
	if long {
		b, err := s.view(min(10, end-s.consumed()))
		if err != nil {
			return 0, false, err
		}
		v, next, ok := readVarint64(b, s.i)
		if ok {
			s.i = next
		}
		return v, ok, nil
	}
	b, err := s.view(min(5, end-s.consumed()))
	if err != nil {
		return 0, false, err
	}
	v, next, ok := readVarint32(b, s.i)
	if ok {
		s.i = next
	}
	return int64(v), ok, nil
}

// skip consumes n bytes without keeping them; false if the stream ends first.
func (s *recordStream) skip(n int) (bool, error) {
	for n > 0 {
		if s.i == len(s.buf) {
			got, err := s.fill(1)
			if err != nil || got == 0 {
				return false, err
			}
		}
		k := min(n, len(s.buf)-s.i)
		s.i += k
		n -= k
	}
	return true, nil
}

// nullable skips a length-prefixed byte string that must end by end
// (length -1 is null); false if it is malformed.
func (s *recordStream) nullable(end int) (bool, error) {
	n, ok, err := s.varint(end, false)
	if err != nil || !ok {
		return false, err
	}
	if n < 0 {
		return n == -1, nil
	}
	if n > int64(end-s.consumed()) {
		return false, nil
	}
	return s.skip(int(n))
}

// next reads the next record, checking its framing as parseRecord does,
// without holding its key, value or headers in memory: they are skipped
// through the window (as Kafka's LogValidator skips them), so the memory of
// a validation is the window's, whatever the records' size. ok is false at
// the end of the section.
func (s *recordStream) next(r *rawRecord) (ok bool, err error) {
	// Fast path: the whole record is in the window already (all but the
	// few that straddle a refill): parse it in place.
	if length, j, vok := readVarint32(s.buf, s.i); vok && length >= minRecordBody && int(length) <= len(s.buf)-j {
		end, err := parseRecord(s.buf[:j+int(length)], s.i, r)
		if err != nil {
			return false, err
		}
		s.i = end
		return true, nil
	}
	b, err := s.view(1)
	if err != nil || len(b) == s.i {
		return false, err
	}
	start := s.consumed()
	bad := func(what string) error { return corruptf("record at byte %d of the records: %s", start, what) }
	length, vok, err := s.varint(math.MaxInt, false)
	if err != nil {
		return false, err
	}
	if !vok {
		return false, bad("bad length varint")
	}
	if length < minRecordBody {
		return false, bad(fmt.Sprintf("length %d", length))
	}
	end := s.consumed() + int(length)
	if end < 0 || end > s.limit { // known before the record's bytes are inflated
		return false, inflateError(s.codec, s.limit)
	}
	if ok, err := s.skip(1); err != nil || !ok { // attributes
		return false, cmp(err, bad("cut short"))
	}
	if r.tsDelta, vok, err = s.varint(end, true); err != nil || !vok {
		return false, cmp(err, bad("bad timestamp delta"))
	}
	off, vok, err := s.varint(end, false)
	if err != nil || !vok {
		return false, cmp(err, bad("bad offset delta"))
	}
	r.offDelta = int32(off)
	if ok, err := s.nullable(end); err != nil || !ok {
		return false, cmp(err, bad("bad key"))
	}
	if ok, err := s.nullable(end); err != nil || !ok {
		return false, cmp(err, bad("bad value"))
	}
	n, vok, err := s.varint(end, false)
	if err != nil || !vok {
		return false, cmp(err, bad("bad header count"))
	}
	if n < 0 || n > int64(end-s.consumed())/2 { // a header takes at least 2 bytes
		return false, bad(fmt.Sprintf("bad header count %d", n))
	}
	for range n {
		kl, vok, err := s.varint(end, false)
		if err != nil || !vok || kl < 0 || kl > int64(end-s.consumed()) {
			return false, cmp(err, bad("bad header key"))
		}
		if ok, err := s.skip(int(kl)); err != nil || !ok {
			return false, cmp(err, bad("bad header key"))
		}
		if ok, err := s.nullable(end); err != nil || !ok {
			return false, cmp(err, bad("bad header value"))
		}
	}
	if got := s.consumed(); got != end {
		return false, bad(fmt.Sprintf("length %d, fields take %d", length, got-(end-int(length))))
	}
	return true, nil
}

// cmp returns err if it is set, else alt.
func cmp(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// scanCompressed validates the records of the compressed batch b (len(b) ==
// h.Size(), CRC and header checked) as scanRecords does an uncompressed one,
// streaming the payload through a pooled decoder and window: count, offset
// deltas, record framing, max timestamp, and that nothing follows the last
// record, not even in the compressed stream. Records that inflate past limit
// (inflateLimit applied) are inflateError, found as soon as they pass it.
func scanCompressed(b []byte, h *Header, limit int) error {
	codec := h.Compression()
	f := getInflater()
	defer f.release()
	r, whole, err := f.open(codec, b[HeaderSize:], limit)
	if err != nil {
		return err
	}
	if whole != nil { // a raw snappy block, decoded already
		return scanRecordsIn(whole, h)
	}
	wp := windows.Get().(*[]byte)
	defer windows.Put(wp)
	return scanStream(r, codec, h, (*wp)[:0], limit)
}

// scanStream is scanCompressed's walk over the records read from r through
// the window buf (its capacity; tests give a tiny one, so that records
// straddle refills), reading at most limit bytes from r.
func scanStream(r io.Reader, codec int, h *Header, buf []byte, limit int) error {
	s := recordStream{r: r, codec: codec, buf: buf, limit: limit}
	var raw rawRecord
	prev, maxTS := int32(-1), int64(math.MinInt64)
	for n := range h.NumRecords {
		ok, err := s.next(&raw)
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

// Decompress is DecompressLimit with limit DefaultMaxDecompressed.
//
// Records uses it for compressed batches; a reader that decodes many batches
// uses it (or DecompressLimit) directly to choose where the records go
// (their Key and Value alias the result).
func Decompress(dst, b []byte, h Header) ([]byte, error) {
	return DecompressLimit(dst, b, h, DefaultMaxDecompressed)
}

// DecompressLimit appends to dst the batch at the start of b, whose header h
// was returned by Validate, Check or a Batches callback, with its records
// section decompressed: an uncompressed batch with the same header fields
// (the compression bits cleared, the CRC recomputed), which Records and
// Decode read like any other. The records are validated as Validate does.
// An uncompressed batch is appended as it is.
//
// Decompression stops as soon as the records pass limit bytes (0 or less:
// DefaultMaxDecompressed; at most 1 GiB) and returns ErrTooLarge: what it
// allocates grows with what the payload inflates to, up to limit, never
// with what it would inflate to. It returns ErrCorrupt for a payload that
// does not decompress or holds other records than h says. On an error dst's
// contents are unspecified.
func DecompressLimit(dst, b []byte, h Header, limit int) ([]byte, error) {
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
	limit = inflateLimit(limit)
	start := len(dst)
	dst = append(dst, b[:HeaderSize]...)
	f := getInflater()
	defer f.release()
	// Every codec streams, zstd too: its DecodeAll (as fast, measured)
	// grows its output 1.25 times at a time, allocating 6 times the limit
	// before it stops a bomb, and sizes it anew for each frame.
	r, whole, err := f.open(codec, b[HeaderSize:], limit)
	if err != nil {
		return dst, err
	}
	if whole != nil {
		dst = append(dst, whole...)
	} else {
		// Guess a 4:1 ratio (or, for lz4, what its frames say at most,
		// when that is less), then grow by doubling as bytes come, never
		// past the limit (and one byte, to see it passed): a bomb costs
		// at most twice the limit in allocations.
		guess := min(4*(len(b)-HeaderSize), limit+1)
		if codec == CompressionLz4 {
			if n, ok := lz4Bound(b[HeaderSize:]); ok {
				guess = min(guess, n)
			}
		}
		dst = grow(dst, guess)
		end := start + HeaderSize + limit + 1 // the most dst may hold
		for {
			if len(dst) == cap(dst) {
				c := len(dst) + max(len(dst)-start, windowSize)
				if c > end-(c-start) { // the next doubling would pass end: go there now
					c = end
				}
				g := make([]byte, len(dst), c)
				copy(g, dst)
				dst = g
			}
			m, err := r.Read(dst[len(dst):min(cap(dst), end)])
			dst = dst[:len(dst)+m]
			if len(dst)-start-HeaderSize > limit {
				return dst, inflateError(codec, limit)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return dst, codecError(codec, err)
			}
		}
	}
	return finishDecompressed(dst, start, codec, h)
}

// finishDecompressed checks the records of the batch decompressed into
// dst[start:] and makes its header that of an uncompressed batch.
func finishDecompressed(dst []byte, start, codec int, h Header) ([]byte, error) {
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

// Recompress is RecompressLimit with limit DefaultMaxDecompressed.
func Recompress(dst, b []byte, h Header, codec int) ([]byte, error) {
	return RecompressLimit(dst, b, h, codec, DefaultMaxDecompressed)
}

// RecompressLimit appends to dst the batch at the start of b, whose header h
// was returned by Validate, with its records section compressed with codec
// instead (uncompressed for CompressionNone): the same header fields and
// records, a new length, codec and CRC. A broker whose topic stores one
// codec whatever the producer sent uses it. The records are checked as
// Validate checks them.
//
// The records may decompress to limit bytes at most (0 or less:
// DefaultMaxDecompressed), as for DecompressLimit: past it, RecompressLimit
// stops and returns ErrTooLarge. To gzip, lz4 or zstd it streams them from
// one codec to the other through a window, so its memory is the codecs' and
// the result's, however large the records; to snappy (one raw block) or
// none it holds them whole.
func RecompressLimit(dst, b []byte, h Header, codec, limit int) ([]byte, error) {
	if !ValidCompression(codec) {
		return dst, fmt.Errorf("batch: unknown compression codec %d", codec)
	}
	if h.Size() > len(b) || h.Length < minLength {
		return dst, shortf("%d bytes, the batch needs %d", len(b), h.Size())
	}
	b = b[:h.Size()]
	start := len(dst)
	var err error
	switch {
	case codec == CompressionNone:
		return DecompressLimit(dst, b, h, limit)
	case h.Compression() == CompressionNone: // validated already: compress its records
		dst = append(dst, b[:HeaderSize]...)
		dst, err = compress(dst, codec, b[HeaderSize:])
	case codec == CompressionSnappy:
		var plain []byte
		if plain, err = DecompressLimit(nil, b, h, limit); err != nil {
			return dst, err
		}
		dst = append(dst, plain[:HeaderSize]...)
		dst, err = compress(dst, codec, plain[HeaderSize:])
	default:
		dst, err = recompressStream(dst, b, h, codec, inflateLimit(limit))
	}
	if err != nil {
		return dst[:start], err
	}
	out := dst[start:]
	if int64(len(out))-logOverhead > math.MaxInt32 {
		return dst[:start], fmt.Errorf("batch: recompressed batch larger than 2 GiB")
	}
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])&^attrCompression|uint16(codec))
	SetCRC(out)
	return dst, nil
}

// recompressStream appends to dst the header of the compressed batch b and
// its records decompressed and compressed again with codec (gzip, lz4 or
// zstd), validating them on the way (scanStream reads them through a
// window, and what it reads goes on to the compressor).
func recompressStream(dst, b []byte, h Header, codec, limit int) ([]byte, error) {
	f := getInflater()
	defer f.release()
	r, whole, err := f.open(h.Compression(), b[HeaderSize:], limit)
	if err != nil {
		return dst, err
	}
	w := appendWriter{b: append(dst, b[:HeaderSize]...)}
	zw, put := compressor(codec, &w)
	defer put()
	if whole != nil { // a raw snappy block, decoded already
		if err := scanRecordsIn(whole, &h); err != nil {
			return dst, err
		}
		if _, err := zw.Write(whole); err != nil {
			return dst, fmt.Errorf("batch: %s: %w", codecName(codec), err)
		}
	} else {
		wp := windows.Get().(*[]byte)
		defer windows.Put(wp)
		tee := teeReader{r: r, w: zw}
		err := scanStream(&tee, h.Compression(), &h, (*wp)[:0], limit)
		if tee.err != nil {
			return dst, fmt.Errorf("batch: %s: %w", codecName(codec), tee.err)
		}
		if err != nil {
			return dst, err
		}
	}
	if err := zw.Close(); err != nil {
		return dst, fmt.Errorf("batch: %s: %w", codecName(codec), err)
	}
	return w.b, nil
}

// teeReader reads r and writes what it read to w; a failed write ends the
// reading (io.EOF) and is kept in err.
type teeReader struct {
	r   io.Reader
	w   io.Writer
	err error
}

func (t *teeReader) Read(p []byte) (int, error) {
	if t.err != nil {
		return 0, io.EOF
	}
	n, err := t.r.Read(p)
	if n > 0 {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.err = werr
			return 0, io.EOF
		}
	}
	return n, err
}
