package batch

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedBatches are the seed corpus of both fuzz targets: valid batches of several shapes,
// Kafka's own, and damaged ones.
func seedBatches(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, kb := range kafkaBatches {
		seeds = append(seeds, unhex(tb, kb.hex))
	}
	g := good()
	seeds = append(seeds, g, g[:len(g)-1], g[:HeaderSize], g[:12], nil, make([]byte, 64))
	flipped := clone(g)
	flipped[HeaderSize+2] ^= 0x80
	seeds = append(seeds, flipped)
	seeds = append(seeds,
		build([]rec{{Timestamp: 1}}),
		build([]rec{{Timestamp: 5, Key: []byte{}, Value: []byte("v"), Headers: []RecordHeader{{Key: "a"}, {Key: "b", Value: []byte{}}}}}),
		build([]rec{{Timestamp: -3}, {Timestamp: 1 << 40, Key: bytes.Repeat([]byte("k"), 300)}}),
		build(nil),
		rawBatch(fields{attrs: 0x08, lastDelta: 5, baseTS: 10, maxTS: 99, count: 2},
			encRecord(0, 1, nil, nil), encRecord(3, 5, []byte("x"), nil)),
		rawBatch(fields{attrs: 2, count: 1}, []byte("compressed bytes")),
	)
	for _, codec := range codecs {
		seeds = append(seeds,
			buildWith(codec, []rec{{Timestamp: 1, Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{{Key: "h"}}}}),
			buildWith(codec, []rec{{Timestamp: 5}, {Timestamp: 3, Value: bytes.Repeat([]byte("ab"), 200)}}))
	}
	golden, _ := filepath.Glob("testdata/golden/*.batch")
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	log, _ := logOf(3)
	seeds = append(seeds, log, log[:len(log)-7])
	return seeds
}

func isKnown(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrShort) || errors.Is(err, ErrCompressed)
}

// FuzzDecode: arbitrary bytes never panic and fail only with the package's errors; when
// Decode succeeds, the records re-encoded by a Builder decode to the same records, and
// encoding is a fixed point from then on. Each input is also tried with its CRC
// corrected, so the fuzzer reaches the record parser rather than stopping at the CRC.
func FuzzDecode(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		if size, err := PeekSize(data); err == nil && size <= len(data) && size >= HeaderSize {
			fixed := clone(data)
			fixCRC(fixed[:size])
			checkDecode(t, fixed)
		}
	})
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	h, recs, err := decodeAll(data)
	vh, verr := Validate(data)
	if (err == nil) != (verr == nil) || (err == nil && vh != h) {
		t.Fatalf("Decode and Validate disagree: %v / %v", err, verr)
	}
	if ph, perr := ParseHeader(data); perr == nil {
		// Records on unvalidated bytes must be safe, and on valid ones agree with Decode.
		var got []rec
		rerr := Records(data, ph, func(r *Record) error { got = append(got, own(r)); return nil })
		if rerr != nil && !isKnown(rerr) {
			t.Fatalf("Records: unexpected error kind: %v", rerr)
		}
		if err == nil {
			if rerr != nil {
				t.Fatalf("Records failed on a valid batch: %v", rerr)
			}
			if e := equalRecs(got, recs); e != nil {
				t.Fatalf("Records and Decode disagree: %v", e)
			}
		}
	}
	if err != nil {
		if !isKnown(err) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if recs != nil {
			t.Fatalf("fn saw %d records of a batch that failed: %v", len(recs), err)
		}
		return
	}
	if h.Size() > len(data) || int(h.NumRecords) != len(recs) {
		t.Fatalf("header %+v for %d bytes, %d records", h, len(data), len(recs))
	}
	prev := h.BaseOffset - 1
	for _, r := range recs {
		if r.Offset <= prev || r.Offset > h.LastOffset() {
			t.Fatalf("offset %d after %d, last offset %d", r.Offset, prev, h.LastOffset())
		}
		prev = r.Offset
	}

	var bd Builder
	bd.Reset(h.BaseTimestamp)
	for _, r := range recs {
		bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
	}
	b := clone(bd.Bytes())
	SetBaseOffset(b, h.BaseOffset)
	_, again := mustDecode(t, b)
	for i := range again {
		if again[i].Offset != h.BaseOffset+int64(i) {
			t.Fatalf("re-encoded record %d has offset %d", i, again[i].Offset)
		}
		again[i].Offset = recs[i].Offset // the Builder numbers records without gaps
	}
	if err := equalRecs(again, recs); err != nil {
		t.Fatalf("re-encoded records differ: %v", err)
	}

	bd.Reset(h.BaseTimestamp)
	_, err = Decode(b, func(r *Record) error {
		bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b2 := bd.Bytes()
	SetBaseOffset(b2, h.BaseOffset)
	if !bytes.Equal(b2, b) {
		t.Fatalf("encode(decode(b)) != b\n got %x\nwant %x", b2, b)
	}
}

// FuzzBatches: arbitrary bytes never panic; Batches hands fn consecutive, valid, whole
// batches and, when it stops early, stops at a batch that Validate also rejects. Each
// input is also tried with every batch's CRC corrected.
func FuzzBatches(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkBatches(t, data)
		fixed := clone(data)
		for pos := 0; ; {
			size, err := PeekSize(fixed[pos:])
			if err != nil || size > len(fixed)-pos || size < HeaderSize {
				break
			}
			fixCRC(fixed[pos : pos+size])
			pos += size
		}
		checkBatches(t, fixed)
	})
}

func checkBatches(t *testing.T, data []byte) {
	t.Helper()
	pos := 0
	err := Batches(data, func(b []byte, h Header) error {
		if len(b) != h.Size() || !bytes.Equal(b, data[pos:pos+len(b)]) {
			t.Fatalf("batch at %d: %d bytes, header size %d", pos, len(b), h.Size())
		}
		if _, err := Validate(b); err != nil {
			t.Fatalf("Batches passed a batch Validate rejects: %v", err)
		}
		pos += len(b)
		return nil
	})
	if err == nil {
		if pos != len(data) {
			t.Fatalf("Batches stopped at %d of %d bytes without an error", pos, len(data))
		}
		return
	}
	if !isKnown(err) {
		t.Fatalf("unexpected error kind: %v", err)
	}
	if _, verr := Validate(data[pos:]); verr == nil {
		t.Fatalf("Batches stopped at %d with %v, but the batch there is valid", pos, err)
	}
}
