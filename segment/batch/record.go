package batch

import "math"

// RecordHeader is one key/value header of a record. The key cannot be null; a nil Value
// is encoded as null.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one decoded record.
type Record struct {
	Offset    int64 // absolute: the batch's BaseOffset + the record's offset delta
	Timestamp int64 // ms: BaseTimestamp + the record's delta, or MaxTimestamp for LogAppendTime batches
	Key       []byte
	Value     []byte // Key and Value are nil when null; they alias the batch bytes
	Headers   []RecordHeader
}

// minRecordBody is the smallest record body: attributes, timestamp delta, offset
// delta, key length, value length and header count, one byte each.
const minRecordBody = 6

// rawRecord is one record as parseRecord finds it.
type rawRecord struct {
	tsDelta  int64
	offDelta int32
	key      []byte
	value    []byte
	nHeaders int
	hdrStart int // index in the batch of the first header
}

// parseRecord reads the record that starts at b[i:], where b is the whole batch, and
// checks its framing: every length within the record, the headers, and that the
// fields fill exactly the record's declared length. It returns the index after it.
//
// It is the hot loop of Validate and Decode: the one-byte case of each varint (every
// length below 64, every small delta) is written out here so that it needs no call.
func parseRecord(b []byte, i int, r *rawRecord) (int, error) {
	start := i
	var (
		length int32
		ok     bool
	)
	switch {
	case i < len(b) && b[i] < 0x80:
		length, i = unzig32(b[i]), i+1
	case i+1 < len(b) && b[i+1] < 0x80: // two bytes: records of 64 B to 8 KiB
		length, i = unzig2(b[i], b[i+1]), i+2
	default:
		if length, i, ok = readVarint32Slow(b, i); !ok {
			return 0, corruptf("record at byte %d: bad length varint", start)
		}
	}
	if length < minRecordBody || int(length) > len(b)-i {
		return 0, corruptf("record at byte %d: length %d with %d bytes left in the batch", start, length, len(b)-i)
	}
	end := i + int(length)
	rec := b[:end] // no field may reach past the record
	i++            // attributes: unused in magic 2; length >= 6 keeps i < end
	if c := rec[i]; c < 0x80 {
		r.tsDelta, i = int64(unzig32(c)), i+1
	} else if r.tsDelta, i, ok = readVarint64Slow(rec, i); !ok {
		return 0, corruptf("record at byte %d: bad timestamp delta", start)
	}
	if i < end && rec[i] < 0x80 {
		r.offDelta, i = unzig32(rec[i]), i+1
	} else if r.offDelta, i, ok = readVarint32Slow(rec, i); !ok {
		return 0, corruptf("record at byte %d: bad offset delta", start)
	}
	if r.key, i, ok = readNullable(rec, i); !ok {
		return 0, corruptf("record at byte %d: bad key", start)
	}
	if r.value, i, ok = readNullable(rec, i); !ok {
		return 0, corruptf("record at byte %d: bad value", start)
	}
	var n int32
	if i < end && rec[i] < 0x80 {
		n, i = unzig32(rec[i]), i+1
	} else if n, i, ok = readVarint32Slow(rec, i); !ok {
		return 0, corruptf("record at byte %d: bad header count", start)
	}
	if n < 0 || int(n) > (end-i)/2 { // a header takes at least 2 bytes
		return 0, corruptf("record at byte %d: bad header count %d", start, n)
	}
	r.nHeaders, r.hdrStart = int(n), i
	for range n {
		kl, j, ok := readVarint32(rec, i)
		if !ok || kl < 0 || int(kl) > end-j {
			return 0, corruptf("record at byte %d: bad header key", start)
		}
		if _, i, ok = readNullable(rec, j+int(kl)); !ok {
			return 0, corruptf("record at byte %d: bad header value", start)
		}
	}
	if i != end {
		return 0, corruptf("record at byte %d: length %d, fields take %d", start, length, i-(end-int(length)))
	}
	return end, nil
}

// readNullable reads a varint length and that many bytes; length -1 is null (nil).
// The returned slice's capacity ends with it, so appending to it cannot overwrite the batch.
func readNullable(b []byte, i int) ([]byte, int, bool) {
	var (
		n  int32
		ok bool
	)
	switch {
	case i < len(b) && b[i] < 0x80:
		n, i = unzig32(b[i]), i+1
	case i >= 0 && i+1 < len(b) && b[i+1] < 0x80: // two bytes: 64 B to 8 KiB
		n, i = unzig2(b[i], b[i+1]), i+2
	default:
		if n, i, ok = readVarint32Slow(b, i); !ok {
			return nil, i, false
		}
	}
	if n < 0 {
		return nil, i, n == -1
	}
	if int(n) > len(b)-i {
		return nil, i, false
	}
	end := i + int(n)
	return b[i:end:end], end, true
}

// scanRecords walks the records of the uncompressed batch b (len(b) == h.Size()) and
// checks them against the header: exactly NumRecords records filling the batch, offset
// deltas strictly increasing within [0, LastOffsetDelta], and for CreateTime batches
// MaxTimestamp equal to the largest record timestamp.
//
// Offset deltas need not be 0, 1, 2...: compaction keeps a batch's base and last offset
// while removing records from it, so gaps are valid.
func scanRecords(b []byte, h *Header) error {
	var r rawRecord
	i, prev, maxTS := HeaderSize, int32(-1), int64(math.MinInt64)
	for n := range h.NumRecords {
		if i == len(b) {
			return corruptf("batch holds %d records, header says %d", n, h.NumRecords)
		}
		var err error
		if i, err = parseRecord(b, i, &r); err != nil {
			return err
		}
		if r.offDelta <= prev || r.offDelta > h.LastOffsetDelta {
			return corruptf("record %d: offset delta %d after %d, last offset delta %d", n, r.offDelta, prev, h.LastOffsetDelta)
		}
		prev = r.offDelta
		maxTS = max(maxTS, h.BaseTimestamp+r.tsDelta)
	}
	if i != len(b) {
		return corruptf("%d bytes after the last of %d records", len(b)-i, h.NumRecords)
	}
	if h.NumRecords > 0 && !h.LogAppendTime() && maxTS != h.MaxTimestamp {
		return corruptf("max timestamp %d, records' maximum is %d", h.MaxTimestamp, maxTS)
	}
	return nil
}

// Validate checks that b starts with one whole, intact batch and returns its header.
// ErrShort: b ends before the batch does. ErrCorrupt: bad magic, CRC, header fields,
// or records that do not match the header (see the package documentation). A
// compressed batch's records are checked the same way, streamed through a pooled
// decoder: a payload that does not decompress, or that holds other records than the
// header says, or anything after them, or inflates past 1 GiB, is ErrCorrupt. Bytes
// after the batch are ignored. Its memory is a window's whatever the records' size;
// its time grows with it (ValidateProducedLimit bounds both).
func Validate(b []byte) (Header, error) {
	return validate(b, maxInflated)
}

func validate(b []byte, limit int) (Header, error) {
	h, err := Check(b)
	if err != nil {
		return h, err
	}
	if h.Compression() != CompressionNone {
		return h, scanCompressed(b[:h.Size()], &h, limit)
	}
	return h, scanRecords(b[:h.Size()], &h)
}

// ValidateProduced is ValidateProducedLimit with limit DefaultMaxDecompressed.
func ValidateProduced(b []byte) (Header, error) {
	return ValidateProducedLimit(b, DefaultMaxDecompressed)
}

// ValidateProducedLimit is Validate for a batch as a producer sends it, with the
// rules a broker adds for those: the records of a compressed batch have offset
// deltas 0, 1, ..., n-1 (Kafka's LogValidator: a batch with gaps can only come from
// compaction, never from a producer), and they decompress to limit bytes at most
// (0 or less: DefaultMaxDecompressed; at most 1 GiB), else ErrTooLarge, as soon as
// they pass it: a decompression bomb costs the broker limit bytes of decoding, not
// what it would inflate to. Validate accepts gaps, so that recovery and readers
// keep compacted batches.
func ValidateProducedLimit(b []byte, limit int) (Header, error) {
	h, err := validate(b, inflateLimit(limit))
	if err != nil {
		return h, err
	}
	if h.Compression() != CompressionNone && h.NumRecords > 0 && int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return h, corruptf("compressed batch of %d records with last offset delta %d: inner offsets must be 0 to %d", h.NumRecords, h.LastOffsetDelta, h.NumRecords-1)
	}
	return h, nil
}

// Check is Validate without the walk over the records: framing, CRC, header
// fields and a known compression codec. A reader of batches that were validated
// when they were written uses it, then decodes with Records (which still refuses a
// malformed record): the CRC shows the bytes are the ones validated.
func Check(b []byte) (Header, error) {
	return check(b, true)
}

// CheckFraming is Check without the CRC, for bytes whose CRC this process
// computed itself and that have not left its memory since (a batch it built
// and still holds): nothing has been stored or sent that the CRC could show
// changed. Bytes read from a file or a connection are checked with Check.
func CheckFraming(b []byte) (Header, error) {
	return check(b, false)
}

func check(b []byte, crc bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	size := h.Size()
	if len(b) < size {
		return h, shortf("%d bytes, the batch needs %d", len(b), size)
	}
	b = b[:size]
	if crc {
		if err := checkCRC(b, &h); err != nil {
			return h, err
		}
	}
	if err := checkHeader(&h); err != nil {
		return h, err
	}
	if c := h.Compression(); !ValidCompression(c) {
		return h, corruptf("unknown compression codec %d", c)
	}
	return h, nil
}

// Decode validates the batch at the start of b (as Validate does) and then calls fn
// for each record in offset order. fn is called only for a batch that validated in
// full. r, its Key, Value and header Values alias b and are valid only during the call;
// the Headers slice is reused between calls (header keys are ordinary strings, safe to
// keep). If fn returns an error Decode stops and returns it unchanged.
//
// Decode allocates nothing per record: only the Record passed to fn and the headers
// slice (grown to the largest header count), once per call, plus a header key string
// when it differs from the key at the same position in the previous record.
func Decode(b []byte, fn func(r *Record) error) (Header, error) {
	h, err := validate(b, DefaultMaxDecompressed) // Records would refuse more
	if err != nil {
		return h, err
	}
	return h, Records(b, h, fn)
}

// Records calls fn for each record of the batch at the start of b, whose header h was
// returned without error by Validate or passed to a Batches callback. It skips the
// checks those made (Decode is Validate then Records), so a reader that walks batches
// with Batches pays for the CRC and the framing checks once. fn, r and the error are as
// for Decode.
//
// For a compressed batch the records are first decompressed, with a pooled decoder,
// into a buffer allocated for the batch, and checked as Validate checks them (a
// corrupt payload yields no records); r's Key, Value and header Values alias that
// buffer, so a caller may keep them as it may keep those of an uncompressed batch.
// Records that decompress past DefaultMaxDecompressed are ErrTooLarge: a reader
// that wants another limit decompresses with DecompressLimit first.
//
// Records on bytes that were not validated is memory-safe but not a validation: it
// never panics and returns ErrCorrupt at the first malformed record, after fn has seen
// the ones before it; it checks neither the CRC nor the header's counts and timestamps.
func Records(b []byte, h Header, fn func(r *Record) error) error {
	if h.Length < minLength {
		return corruptf("batch length %d is less than the minimum %d", h.Length, minLength)
	}
	if h.Size() > len(b) {
		return shortf("%d bytes, the batch needs %d", len(b), h.Size())
	}
	if c := h.Compression(); c != CompressionNone {
		if !ValidCompression(c) {
			return corruptf("unknown compression codec %d", c)
		}
		return compressedRecords(b, h, fn)
	}
	var it Iter
	it.reset(b, h)
	var rec Record
	for {
		ok, err := it.Next(&rec)
		if err != nil || !ok {
			return err
		}
		if err := fn(&rec); err != nil {
			return err
		}
	}
}

// An Iter walks the records of one uncompressed batch, one Next at a time,
// with nothing allocated per record: what a replay loop uses instead of
// Records' callback. One Iter may walk many batches in turn (Reset): it
// keeps its headers slice across them. The zero Iter is at the end of an
// empty batch.
type Iter struct {
	b          []byte
	h          Header
	i          int
	left       int32
	appendTime bool
	raw        rawRecord
	hdrs       []RecordHeader
	spans      []Span // ResetSpans: the records are these, not parsed
}

// Reset starts it on the batch at the start of b, whose header h was
// returned without error by Validate, Check or a Batches callback, or by
// ParseHeader of Decompress's output. A compressed batch is refused
// (ErrCorrupt): Decompress it first, into a buffer of the caller's choice.
func (it *Iter) Reset(b []byte, h Header) error {
	if h.Length < minLength {
		return corruptf("batch length %d is less than the minimum %d", h.Length, minLength)
	}
	if h.Size() > len(b) {
		return shortf("%d bytes, the batch needs %d", len(b), h.Size())
	}
	if c := h.Compression(); c != CompressionNone {
		return corruptf("%s batch given to Iter: decompress it first", codecName(c))
	}
	it.reset(b, h)
	return nil
}

// reset is Reset on arguments known good.
func (it *Iter) reset(b []byte, h Header) {
	it.b, it.h, it.i, it.left = b[:h.Size()], h, HeaderSize, max(h.NumRecords, 0)
	it.appendTime = h.LogAppendTime()
	it.spans = nil
}

// Next decodes the next record into r and reports whether there was one.
// r's Key, Value and header Values alias the batch; r.Headers is the Iter's
// own slice, overwritten by the next call (header keys are ordinary
// strings, safe to keep; one equal to the key at the same position in the
// previous record is that same string, not a new one). A malformed record is
// ErrCorrupt, after the records before it; Next then stays at the end.
func (it *Iter) Next(r *Record) (bool, error) {
	if it.left <= 0 {
		return false, nil
	}
	if it.spans != nil {
		return it.nextSpan(r)
	}
	i, err := parseRecord(it.b, it.i, &it.raw)
	if err != nil {
		it.left = 0
		return false, err
	}
	it.i = i
	it.left--
	raw := &it.raw
	r.Offset = it.h.BaseOffset + int64(raw.offDelta)
	if it.appendTime {
		r.Timestamp = it.h.MaxTimestamp
	} else {
		r.Timestamp = it.h.BaseTimestamp + raw.tsDelta
	}
	r.Key, r.Value, r.Headers = raw.key, raw.value, nil
	if raw.nHeaders > 0 {
		it.hdrs = decodeHeaders(it.b, raw.hdrStart, raw.nHeaders, it.hdrs)
		r.Headers = it.hdrs
	}
	return true, nil
}

// decodeHeaders decodes n headers, already checked by parseRecord, starting at b[i:],
// into hdrs[:0]. A key equal to the one the previous record had at the same position
// reuses that string instead of allocating.
func decodeHeaders(b []byte, i, n int, hdrs []RecordHeader) []RecordHeader {
	if cap(hdrs) < n { // n is bounded by the record's size: parseRecord checked it
		grown := make([]RecordHeader, n)
		copy(grown, hdrs[:cap(hdrs)])
		hdrs = grown
	}
	prev := hdrs[:cap(hdrs)]
	hdrs = hdrs[:0]
	for j := range n {
		kl, k, _ := readVarint32(b, i)
		kb := b[k : k+int(kl)]
		v, next, _ := readNullable(b, k+int(kl))
		i = next
		var key string
		if j < len(prev) && prev[j].Key == string(kb) {
			key = prev[j].Key
		} else {
			key = string(kb)
		}
		hdrs = append(hdrs, RecordHeader{Key: key, Value: v})
	}
	return hdrs
}

// compressedRecords is Records for a compressed batch: decompressed (and
// checked) into a buffer of its own, which the records alias, up to
// DefaultMaxDecompressed bytes (ErrTooLarge past it).
func compressedRecords(b []byte, h Header, fn func(r *Record) error) error {
	out, err := Decompress(nil, b, h)
	if err != nil {
		return err
	}
	h.Attributes &^= attrCompression
	h.Length = int32(len(out) - logOverhead)
	return Records(out, h, fn)
}
