package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
)

// This file holds an encoder written from the format description, independent of
// Builder, so tests can make any batch, well-formed or not, and helpers that decode a
// batch into owned values for comparison.

var testCRCTable = crc32.MakeTable(crc32.Castagnoli)

// fields are the header fields rawBatch writes; length and CRC are computed.
type fields struct {
	baseOffset    int64
	leaderEpoch   int32
	attrs         int16
	lastDelta     int32
	baseTS, maxTS int64
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	count         int32
}

// rawBatch encodes a header with f in front of the given record bytes and a correct
// batch length and CRC.
func rawBatch(f fields, records ...[]byte) []byte {
	b := make([]byte, 61)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(f.baseOffset))
	be.PutUint32(b[12:], uint32(f.leaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], uint16(f.attrs))
	be.PutUint32(b[23:], uint32(f.lastDelta))
	be.PutUint64(b[27:], uint64(f.baseTS))
	be.PutUint64(b[35:], uint64(f.maxTS))
	be.PutUint64(b[43:], uint64(f.producerID))
	be.PutUint16(b[51:], uint16(f.producerEpoch))
	be.PutUint32(b[53:], uint32(f.baseSequence))
	be.PutUint32(b[57:], uint32(f.count))
	for _, r := range records {
		b = append(b, r...)
	}
	be.PutUint32(b[8:], uint32(len(b)-12))
	fixCRC(b)
	return b
}

// fixCRC recomputes the CRC of the whole batch b after a test edited it.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], testCRCTable))
}

// zz appends v as a zigzag varint.
func zz(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

// nullable appends a length-prefixed byte string, nil as length -1.
func nullable(b, s []byte) []byte {
	if s == nil {
		return zz(b, -1)
	}
	return append(zz(b, int64(len(s))), s...)
}

// encRecord encodes one record with its length prefix.
func encRecord(tsDelta, offDelta int64, key, value []byte, headers ...RecordHeader) []byte {
	body := []byte{0}
	body = zz(body, tsDelta)
	body = zz(body, offDelta)
	body = nullable(body, key)
	body = nullable(body, value)
	body = zz(body, int64(len(headers)))
	for _, h := range headers {
		body = nullable(body, []byte(h.Key))
		body = nullable(body, h.Value)
	}
	return append(zz(nil, int64(len(body))), body...)
}

// rec is a decoded record that owns its bytes.
type rec struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
}

func (r rec) String() string {
	return fmt.Sprintf("{off %d ts %d key %q value %q headers %v}", r.Offset, r.Timestamp, r.Key, r.Value, r.Headers)
}

// clone copies b, keeping nil as nil and empty as empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func own(r *Record) rec {
	out := rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value)}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, RecordHeader{Key: h.Key, Value: clone(h.Value)})
	}
	return out
}

// decodeAll decodes the batch b into owned records.
func decodeAll(b []byte) (Header, []rec, error) {
	var out []rec
	h, err := Decode(b, func(r *Record) error {
		out = append(out, own(r))
		return nil
	})
	return h, out, err
}

func mustDecode(t testing.TB, b []byte) (Header, []rec) {
	t.Helper()
	h, recs, err := decodeAll(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return h, recs
}

// equalRecs compares records, telling nil from empty for keys, values and header values.
func equalRecs(a, b []rec) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d records, want %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Offset != y.Offset || x.Timestamp != y.Timestamp || !sameBytes(x.Key, y.Key) ||
			!sameBytes(x.Value, y.Value) || len(x.Headers) != len(y.Headers) {
			return fmt.Errorf("record %d: got %v, want %v", i, x, y)
		}
		for j := range x.Headers {
			if x.Headers[j].Key != y.Headers[j].Key || !sameBytes(x.Headers[j].Value, y.Headers[j].Value) {
				return fmt.Errorf("record %d header %d: got %v, want %v", i, j, x, y)
			}
		}
	}
	return nil
}

func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// build encodes recs with a Builder whose base timestamp is the first record's, as
// Kafka does, and returns a copy of the batch.
func build(recs []rec) []byte {
	var bd Builder
	if len(recs) > 0 {
		bd.Reset(recs[0].Timestamp)
	} else {
		bd.Reset(0)
	}
	for _, r := range recs {
		bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
	}
	return clone(bd.Bytes())
}
