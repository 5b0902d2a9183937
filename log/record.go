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
// truncated one), never records.
func DecodeRecords(raw []byte) ([]Record, error) {
	return appendDecoded(nil, raw, "", 0, 0, -1)
}

// appendDecoded appends the records of the batches in raw whose offsets are
// in [from, to) (to < 0: no bound) to dst.
func appendDecoded(dst []Record, raw []byte, topic string, partition int, from, to int64) ([]Record, error) {
	next := int64(-1)
	err := batch.Batches(raw, func(b []byte, h batch.Header) error {
		// The base offset is outside the CRC: check that batches follow
		// one another.
		if h.BaseOffset < next {
			return fmt.Errorf("%w: batch at offset %d follows one that ends at %d", ErrCorrupt, h.BaseOffset, next)
		}
		next = h.NextOffset()
		if to >= 0 && h.BaseOffset >= to {
			return nil
		}
		// Batches validated b already.
		return batch.Records(b, h, func(r *batch.Record) error {
			if r.Offset < from || (to >= 0 && r.Offset >= to) {
				return nil
			}
			rec := Record{
				Topic:     topic,
				Partition: partition,
				Offset:    r.Offset,
				Timestamp: time.UnixMilli(r.Timestamp),
				Key:       r.Key,
				Value:     r.Value,
			}
			if len(r.Headers) > 0 {
				rec.Headers = append([]Header(nil), r.Headers...)
			}
			dst = append(dst, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("log: decode records: %w", err)
	}
	return dst, nil
}

// timestampMs is the record's timestamp in ms, or now for a zero time.
func timestampMs(t time.Time, now int64) int64 {
	if t.IsZero() {
		return now
	}
	return t.UnixMilli()
}
