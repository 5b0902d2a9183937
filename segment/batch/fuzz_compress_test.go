package batch

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The decompressing decoder, fuzzed for each codec: the input is the payload of
// a batch (its records section as the codec wrote it) and the header's record
// count, timestamp type and max timestamp; the batch around it gets a right CRC,
// so every input reaches the decompression. Seeded with the payloads of valid
// batches. Whatever the bytes: no panic; Validate, Decode, Records and Decompress
// agree; a batch that fails yields no record; one that passes yields exactly
// the header's count of records, the same through every entry point, and
// Decompress gives an uncompressed batch that Validate accepts with the same
// records.

func FuzzGzip(f *testing.F)   { fuzzCodec(f, CompressionGzip) }
func FuzzSnappy(f *testing.F) { fuzzCodec(f, CompressionSnappy) }
func FuzzLz4(f *testing.F)    { fuzzCodec(f, CompressionLz4) }
func FuzzZstd(f *testing.F)   { fuzzCodec(f, CompressionZstd) }

func fuzzCodec(f *testing.F, codec int) {
	sets := [][]rec{
		nil,
		{{Timestamp: 7, Key: []byte("k"), Value: []byte("v")}},
		{{Timestamp: 7}, {Timestamp: 9, Key: []byte{}, Value: bytes.Repeat([]byte("xy"), 300), Headers: []RecordHeader{{Key: "a", Value: []byte("b")}, {Key: "n"}}}},
		{{Timestamp: 1_700_000_000_000, Key: []byte("key"), Value: bytes.Repeat([]byte(`{"a":1},`), 500)}, {Timestamp: 1_699_999_999_000, Value: []byte{}}, {Timestamp: 1_700_000_000_500}},
	}
	for _, recs := range sets {
		b := buildWith(codec, recs)
		h, err := Validate(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[HeaderSize:], uint8(h.NumRecords), false, h.BaseTimestamp, h.MaxTimestamp)
		f.Add(b[HeaderSize:], uint8(h.NumRecords), true, h.BaseTimestamp, int64(0))
	}
	golden, _ := filepath.Glob("testdata/golden/*-" + codecName(codec) + ".batch")
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		h, err := Validate(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[HeaderSize:h.Size()], uint8(h.NumRecords), false, h.BaseTimestamp, h.MaxTimestamp)
	}
	if codec == CompressionSnappy {
		plain := build(testRecs(3))
		f.Add(xerialFrame(plain[HeaderSize:], 100), uint8(3), true, int64(0), int64(0))
	}
	f.Fuzz(func(t *testing.T, payload []byte, count uint8, appendTime bool, baseTS, maxTS int64) {
		fl := fields{count: int32(count), baseTS: baseTS, maxTS: maxTS, attrs: int16(codec)}
		if count > 0 {
			fl.lastDelta = int32(count) - 1
		}
		if appendTime {
			fl.attrs |= attrLogAppendTime
		}
		checkCompressed(t, rawBatch(fl, payload))
	})
}

func checkCompressed(t *testing.T, b []byte) {
	t.Helper()
	h, verr := Validate(b)
	var viaDecode []rec
	_, derr := Decode(b, func(r *Record) error { viaDecode = append(viaDecode, own(r)); return nil })
	var viaRecords []rec
	rerr := Records(b, h, func(r *Record) error { viaRecords = append(viaRecords, own(r)); return nil })
	plain, perr := Decompress(nil, b, h)
	for _, err := range []error{verr, derr, rerr, perr} {
		if err != nil && !isKnown(err) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	}
	if _, cerr := Check(b); cerr == nil {
		if terr := scanTiny(b, h); (terr == nil) != (verr == nil) || (terr != nil && !isKnown(terr)) {
			t.Fatalf("a 16-byte window says %v, the full window %v", terr, verr)
		}
	}
	if (verr == nil) != (derr == nil) || (verr == nil) != (rerr == nil) || (verr == nil) != (perr == nil) {
		t.Fatalf("entry points disagree: Validate %v, Decode %v, Records %v, Decompress %v", verr, derr, rerr, perr)
	}
	if verr != nil {
		if viaDecode != nil || viaRecords != nil {
			t.Fatalf("a failing batch yielded %d/%d records: %v", len(viaDecode), len(viaRecords), verr)
		}
		return
	}
	if len(viaDecode) != int(h.NumRecords) {
		t.Fatalf("%d records, header says %d", len(viaDecode), h.NumRecords)
	}
	if err := equalRecs(viaRecords, viaDecode); err != nil {
		t.Fatalf("Records and Decode disagree: %v", err)
	}
	ph, err := Validate(plain)
	if err != nil || ph.Compression() != CompressionNone || ph.NumRecords != h.NumRecords {
		t.Fatalf("Decompress gave a batch that does not validate: %+v %v", ph, err)
	}
	_, again := mustDecode(t, plain)
	if err := equalRecs(again, viaDecode); err != nil {
		t.Fatalf("the decompressed batch has other records: %v", err)
	}
}

// scanTiny is Validate's walk over the records of the checked batch b through
// a 16-byte window, so that every record straddles refills and goes the
// field-by-field way.
func scanTiny(b []byte, h Header) error {
	f := getInflater()
	defer f.release()
	r, whole, err := f.open(h.Compression(), b[HeaderSize:h.Size()], maxInflated)
	if err != nil {
		return err
	}
	if whole != nil {
		return scanRecordsIn(whole, &h)
	}
	return scanStream(r, h.Compression(), &h, make([]byte, 0, 16), maxInflated)
}
