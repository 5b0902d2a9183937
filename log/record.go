package log

import (
	"fmt"
	"time"

	"github.com/strata-log/strata/segment/batch"
)

// Record is one record of a partition.
type Record struct {
	Topic     string
	Partition int
	Offset    int64
	// Timestamp is the record's create time, kept to the millisecond. A zero
	// Timestamp given to Append means "now".
	Timestamp time.Time
	Key       []byte // nil is a null key
	Value     []byte // nil is a null value (a tombstone in a compacted topic)
	Headers   []Header
}

// Header is a record header: a string key and a byte value.
type Header = batch.RecordHeader

// DecodeRecords decodes the record batches in raw, as SendTo writes them (and
// as Kafka's fetch responses carry them). Topic and Partition are left empty:
// the bytes do not say. Key, Value and header values alias raw. A torn or
// corrupt batch is an error (errors.Is ErrCorrupt, or batch.ErrShort for a
// truncated one), never records. Control batches (transaction markers) are
// skipped. Compressed batches (any of Kafka's codecs) are decompressed; their
// records' Key, Value and header values alias a buffer allocated for the batch.
// A batch whose records decompress past batch.DefaultMaxDecompressed (128
// MiB) is an error (batch.ErrTooLarge): decompression stops there.
func DecodeRecords(raw []byte) ([]Record, error) {
	var hdrs []Header
	recs, _, err := decodeFrom(make([]Record, 0, countRecords(raw)), &hdrs, raw, TopicPartition{}, 0)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return recs, nil
}

// timestampMs is the record's timestamp in ms, or now for a zero time.
func timestampMs(t time.Time, now int64) int64 {
	if t.IsZero() {
		return now
	}
	return t.UnixMilli()
}

// minRecordBytes is the size of the smallest record: a length varint and
// six one-byte fields (attributes, timestamp and offset deltas, key and
// value lengths, header count).
const minRecordBytes = 7

// countRecords is the number of records in the whole batches of raw, read
// from their headers: what decodeFrom will return at most.
func countRecords(raw []byte) int {
	n := 0
	for len(raw) >= batch.HeaderSize {
		size, err := batch.PeekSize(raw)
		if err != nil || size > len(raw) {
			break
		}
		h, err := batch.ParseHeader(raw)
		if err != nil {
			break
		}
		// A record takes at least minRecordBytes: a count beyond what the
		// bytes can hold (a corrupt header, refused by the decoding) must
		// not size the slice.
		// A compressed record can take less: the bound is then a guess of
		// 16:1 at most, enough for a size hint.
		most := (size - batch.HeaderSize) / minRecordBytes
		if h.Compression() != batch.CompressionNone {
			most *= 16
		}
		n += min(max(int(h.NumRecords), 0), most)
		raw = raw[size:]
	}
	return n
}

// decodeFrom appends to dst the records of the batches in raw whose offsets
// are at least from, and returns the offset that follows the last batch
// (from if none follows it). It allocates nothing per record: headers go
// to the arena *hdrs, grown by doubling. Control batches (transaction
// markers) are skipped, as Kafka's consumer skips them.
//
// Each batch's CRC is checked, as Kafka's consumer does (check.crcs; a
// Consumer skips it only for the bytes of a partition's tail, see
// decodeBuiltFrom), but its records are parsed once, by a batch.Iter, not
// also by a validation walk (batch.Validate): the broker validated the
// batch in full when it was appended, and the CRC shows these are the same
// bytes. A record the Iter finds malformed all the same is an error, and no
// record of its batch is returned. A compressed batch is decompressed
// (batch.Decompress, which also checks its records) into a buffer of its
// own that its records alias, up to batch.DefaultMaxDecompressed bytes
// (batch.ErrTooLarge past them: a reader of a broker does not know its
// MaxDecompressedBytes; a Partition's reads apply the store's).
func decodeFrom(dst []Record, hdrs *[]Header, raw []byte, tp TopicPartition, from int64) ([]Record, int64, error) {
	return decodeBatches(dst, hdrs, raw, nil, nil, tp, from, batch.DefaultMaxDecompressed)
}

// decodeBuiltFrom is decodeFrom; tail, if not nil, are the batches of a
// partition's tail that raw is, in order: batches this process built and
// still holds, whose CRCs it does not check again (batch.CheckFraming): the
// Producer computed them from these very bytes, which were never stored or
// sent since, and which nothing writes to (tail.go). A check of them cost
// as much as the Producer's own checksum (1 KiB records: 0.12 µs of the
// 1.1 µs of CPU a record costs to produce and consume). Nor are the records
// of a tail batch with spans parsed: they are its spans (batch.Span). With
// ab set (a READ_COMMITTED read), the batches of aborted transactions are
// skipped too (abortFilter).
func decodeBuiltFrom(dst []Record, hdrs *[]Header, raw []byte, tail []tailBatch, ab *abortFilter, tp TopicPartition, from int64) ([]Record, int64, error) {
	return decodeBatches(dst, hdrs, raw, tail, ab, tp, from, batch.DefaultMaxDecompressed)
}

// decodeBatches is decodeBuiltFrom decompressing a compressed batch's
// records up to limit bytes (batch.DecompressLimit).
func decodeBatches(dst []Record, hdrs *[]Header, raw []byte, tail []tailBatch, ab *abortFilter, tp TopicPartition, from int64, limit int) ([]Record, int64, error) {
	built := tail != nil
	next, prevEnd := from, int64(-1)
	var (
		it batch.Iter
		r  batch.Record
	)
	for pos, k := 0, 0; pos < len(raw); k++ {
		h, b, err := nextBatchOf(raw[pos:], built)
		if err != nil {
			return dst, from, fmt.Errorf("decode records: batch at byte %d: %w", pos, err)
		}
		pos += len(b)
		if h.BaseOffset < prevEnd { // the base offset is outside the CRC
			return dst, from, fmt.Errorf("decode records: %w: batch at offset %d follows one that ends at %d", ErrCorrupt, h.BaseOffset, prevEnd)
		}
		prevEnd = h.NextOffset()
		if prevEnd <= from {
			continue
		}
		next = max(next, prevEnd)
		if ab != nil && ab.skip(h, b) || h.Control() {
			continue
		}
		var spans []batch.Span // the records' spans, if a Producer recorded them (never for a compressed batch)
		if k < len(tail) && len(tail[k].b) == len(b) {
			spans = tail[k].spans
		}
		if h.Compression() != batch.CompressionNone {
			// Decompressed into a buffer of the batch's own, which the
			// records alias; checked in full, so a payload that does not
			// decompress or disagrees with its header yields no record.
			if b, err = batch.DecompressLimit(nil, b, h, limit); err == nil {
				h, err = batch.ParseHeader(b)
			}
			if err != nil {
				return dst, from, fmt.Errorf("decode records: batch at offset %d: %w", h.BaseOffset, err)
			}
		}
		if spans != nil {
			err = it.ResetSpans(b, h, spans)
		} else {
			err = it.Reset(b, h)
		}
		if err != nil {
			return dst, from, fmt.Errorf("decode records: batch at offset %d: %w", h.BaseOffset, err)
		}
		n := len(dst)
		for {
			ok, err := it.Next(&r)
			if err != nil {
				clear(dst[n:])
				return dst[:n], from, fmt.Errorf("decode records: batch at offset %d: %w", h.BaseOffset, err)
			}
			if !ok {
				break
			}
			if r.Offset < from {
				continue
			}
			// Every field is written: a reused slice (ReadAppend) holds old
			// records past its length.
			var hs []Header
			if k := len(r.Headers); k > 0 {
				a := *hdrs
				if cap(a)-len(a) < k {
					a = make([]Header, 0, max(2*cap(a), k, consumerHeaderArenaMinCap))
				}
				a = append(a, r.Headers...)
				hs = a[len(a)-k : len(a) : len(a)]
				*hdrs = a
			}
			dst = append(dst, Record{
				Topic: tp.Topic, Partition: tp.Partition, Offset: r.Offset,
				Timestamp: time.UnixMilli(r.Timestamp),
				Key:       r.Key, Value: r.Value, Headers: hs,
			})
		}
	}
	return dst, next, nil
}

// nextBatch returns the header and the bytes of the batch that starts raw,
// after checking its framing, CRC and header (batch.Check).
func nextBatch(raw []byte) (batch.Header, []byte, error) {
	return nextBatchOf(raw, false)
}

// nextBatchOf is nextBatch, without the CRC for bytes the process built
// (built: see batch.CheckFraming).
func nextBatchOf(raw []byte, built bool) (batch.Header, []byte, error) {
	check := batch.Check
	if built {
		check = batch.CheckFraming
	}
	h, err := check(raw)
	if err != nil {
		return h, nil, err
	}
	size := h.Size()
	return h, raw[:size:size], nil
}
