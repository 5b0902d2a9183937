package batch

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"
)

// good is a valid batch of three records made by the test encoder: the base for the
// corruption cases.
func good() []byte {
	return rawBatch(goodFields(), goodRecords()...)
}

func goodFields() fields {
	return fields{baseOffset: 10, leaderEpoch: 3, lastDelta: 2, baseTS: 1000, maxTS: 1020,
		producerID: -1, producerEpoch: -1, baseSequence: -1, count: 3}
}

func goodRecords() [][]byte {
	return [][]byte{
		encRecord(0, 0, []byte("k0"), []byte("v0")),
		encRecord(20, 1, nil, []byte("v1"), RecordHeader{Key: "h", Value: []byte("x")}),
		encRecord(-5, 2, []byte("k2"), nil),
	}
}

func TestGoodBaseline(t *testing.T) {
	if _, err := Validate(good()); err != nil {
		t.Fatal(err)
	}
}

// TestCorruption edits a valid batch in every way the package documents as damage and
// checks the error each time, for Validate, Decode (which must not call fn) and Batches.
func TestCorruption(t *testing.T) {
	be := binary.BigEndian
	withFields := func(edit func(f *fields)) []byte {
		f := goodFields()
		edit(&f)
		return rawBatch(f, goodRecords()...)
	}
	withRecords := func(count, lastDelta int32, maxTS int64, recs ...[]byte) []byte {
		f := goodFields()
		f.count, f.lastDelta, f.maxTS = count, lastDelta, maxTS
		return rawBatch(f, recs...)
	}
	// recBody is a record with the given body bytes after its length prefix.
	recBody := func(body ...byte) []byte { return append(zz(nil, int64(len(body))), body...) }

	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty input", nil, ErrShort},
		{"11 bytes", good()[:11], ErrShort},
		{"header only half there", good()[:40], ErrShort},
		{"header without records", good()[:HeaderSize], ErrShort},
		{"last byte missing", func() []byte { b := good(); return b[:len(b)-1] }(), ErrShort},
		{"length beyond the bytes", func() []byte { b := good(); be.PutUint32(b[8:], uint32(len(b))); return b }(), ErrShort},
		{"magic 1", func() []byte { b := good(); b[16] = 1; return b }(), ErrCorrupt},
		{"magic 3", func() []byte { b := good(); b[16] = 3; return b }(), ErrCorrupt},
		{"length 48", func() []byte { b := good(); be.PutUint32(b[8:], 48); return b }(), ErrCorrupt},
		{"length 0 (zeroed tail)", make([]byte, 200), ErrCorrupt},
		{"negative length", func() []byte { b := good(); be.PutUint32(b[8:], 0x80000000); return b }(), ErrCorrupt},
		{"crc field flipped", func() []byte { b := good(); b[20] ^= 1; return b }(), ErrCorrupt},
		{"value byte flipped", func() []byte { b := good(); b[len(b)-3] ^= 0x40; return b }(), ErrCorrupt},
		{"attributes flipped", func() []byte { b := good(); b[22] ^= 0x10; return b }(), ErrCorrupt},
		{"gzip codec on plain records", withFields(func(f *fields) { f.attrs = 1 }), ErrCorrupt},
		{"snappy codec on plain records", withFields(func(f *fields) { f.attrs = 2 }), ErrCorrupt},
		{"lz4 codec on plain records", withFields(func(f *fields) { f.attrs = 3 }), ErrCorrupt},
		{"zstd codec on plain records", withFields(func(f *fields) { f.attrs = 4 | 0x10 }), ErrCorrupt},
		{"unknown codec 5", withFields(func(f *fields) { f.attrs = 5 }), ErrCorrupt},
		{"unknown codec 7", withFields(func(f *fields) { f.attrs = 7 }), ErrCorrupt},
		{"negative base offset", withFields(func(f *fields) { f.baseOffset = -1 }), ErrCorrupt},
		{"last offset overflows", withFields(func(f *fields) { f.baseOffset = math.MaxInt64 - 2 }), ErrCorrupt},
		{"negative last offset delta", withFields(func(f *fields) { f.lastDelta = -1 }), ErrCorrupt},
		{"offset delta past the last offset delta", withRecords(2, 1, 1000,
			encRecord(0, 0, nil, nil), encRecord(0, 2, nil, nil)), ErrCorrupt},
		{"more records than offsets", withFields(func(f *fields) { f.lastDelta = 1 }), ErrCorrupt},
		{"count one too many", withFields(func(f *fields) { f.count = 4; f.lastDelta = 5 }), ErrCorrupt},
		{"count one too few", withFields(func(f *fields) { f.count = 2 }), ErrCorrupt},
		{"count zero with records", withFields(func(f *fields) { f.count = 0 }), ErrCorrupt},
		{"negative count", withFields(func(f *fields) { f.count = -1 }), ErrCorrupt},
		{"max timestamp too small", withFields(func(f *fields) { f.maxTS = 1019 }), ErrCorrupt},
		{"max timestamp too large", withFields(func(f *fields) { f.maxTS = 1021 }), ErrCorrupt},
		{"bytes after the last record", func() []byte {
			return rawBatch(goodFields(), append(goodRecords(), []byte{0})...)
		}(), ErrCorrupt},
		{"duplicate offset delta", withRecords(2, 2, 1000,
			encRecord(0, 1, nil, nil), encRecord(0, 1, nil, nil)), ErrCorrupt},
		{"decreasing offset delta", withRecords(2, 2, 1000,
			encRecord(0, 2, nil, nil), encRecord(0, 1, nil, nil)), ErrCorrupt},
		{"negative offset delta", withRecords(1, 2, 1000, encRecord(0, -1, nil, nil)), ErrCorrupt},
		{"record length too long", withRecords(1, 0, 1000, append(zz(nil, 40), encRecord(0, 0, nil, nil)[1:]...)), ErrCorrupt},
		{"record length too short", withRecords(1, 0, 1000, append(zz(nil, 5), encRecord(0, 0, nil, []byte("abc"))[1:]...)), ErrCorrupt},
		{"record length shorter than its fields", withRecords(1, 0, 1000,
			append(zz(nil, 6), 0, 0, 0, 1, 6, 'a', 'b', 'c', 0)), ErrCorrupt},
		{"record length negative", withRecords(1, 0, 1000, append(zz(nil, -7), encRecord(0, 0, nil, nil)[1:]...)), ErrCorrupt},
		{"record length varint never ends", withRecords(1, 0, 1000, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), ErrCorrupt},
		{"record length 5-byte varint past 32 bits", withRecords(1, 0, 1000, []byte{0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 1, 1, 0}), ErrCorrupt},
		{"timestamp delta varint too long", withRecords(1, 0, 1000,
			recBody(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 1, 1, 0)), ErrCorrupt},
		{"timestamp delta runs off the record", withRecords(1, 0, 1000, recBody(0, 0xff, 0xff, 0xff, 0xff, 0xff)), ErrCorrupt},
		{"offset delta varint 6 bytes", withRecords(1, 0, 1000,
			recBody(0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 1, 0)), ErrCorrupt},
		{"key length -2", withRecords(1, 0, 1000, recBody(0, 0, 0, 3, 1, 0)), ErrCorrupt},
		{"key longer than the record", withRecords(1, 0, 1000, recBody(0, 0, 0, 20, 'a', 1, 0)), ErrCorrupt},
		{"value length -3", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 5, 0)), ErrCorrupt},
		{"value longer than the record", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 8, 'a', 0)), ErrCorrupt},
		{"negative header count", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 1)), ErrCorrupt},
		{"header count beyond the record", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 100, 0, 0)), ErrCorrupt},
		{"null header key", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 2, 1, 0)), ErrCorrupt},
		{"header key past the record", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 2, 10, 'a', 0)), ErrCorrupt},
		{"header value length -2", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 2, 2, 'a', 3)), ErrCorrupt},
		{"header value past the record", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 2, 2, 'a', 10, 'b')), ErrCorrupt},
		{"fewer headers than counted", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 4, 2, 'a', 0)), ErrCorrupt},
		{"record with bytes after its headers", withRecords(1, 0, 1000, recBody(0, 0, 0, 1, 1, 0, 0)), ErrCorrupt},
		{"records end before the count", withRecords(2, 1, 1000, encRecord(0, 0, nil, nil)), ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.b)
			checkErr(t, "Validate", err, tc.want)

			called := false
			_, err = Decode(tc.b, func(*Record) error { called = true; return nil })
			checkErr(t, "Decode", err, tc.want)
			if called {
				t.Error("Decode called fn for a bad batch")
			}

			if len(tc.b) > 0 {
				err = Batches(tc.b, func([]byte, Header) error {
					t.Error("Batches called fn for a bad batch")
					return nil
				})
				checkErr(t, "Batches", err, tc.want)
			}
		})
	}
}

func checkErr(t *testing.T, op string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", op, err, want)
	}
	for _, other := range []error{ErrShort, ErrCorrupt, ErrCompressed} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("%s: error %v is also %v", op, err, other)
		}
	}
	if want == ErrShort && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%s: %v is not io.ErrUnexpectedEOF", op, err)
	}
}

// TestEveryBitFlipIsCaught flips each bit the CRC covers, and each bit of the CRC, and
// expects ErrCorrupt every time.
func TestEveryBitFlipIsCaught(t *testing.T) {
	b := good()
	for i := offCRC; i < len(b); i++ {
		for bit := range 8 {
			b[i] ^= 1 << bit
			if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped: %v", i, bit, err)
			}
			b[i] ^= 1 << bit
		}
	}
	if _, err := Validate(b); err != nil {
		t.Fatal(err)
	}
}

// TestEveryTruncationIsShort cuts a valid batch at every length and expects ErrShort.
func TestEveryTruncationIsShort(t *testing.T) {
	b := good()
	for n := range len(b) {
		_, err := Validate(b[:n])
		checkErr(t, "Validate", err, ErrShort)
	}
}

func TestAcceptedShapes(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want []rec
	}{
		{"compacted: gaps in offset deltas, last delta past the last record",
			rawBatch(fields{baseOffset: 100, lastDelta: 9, baseTS: 50, maxTS: 70, count: 2},
				encRecord(0, 3, nil, []byte("a")), encRecord(20, 7, nil, []byte("b"))),
			[]rec{{Offset: 103, Timestamp: 50, Value: []byte("a")}, {Offset: 107, Timestamp: 70, Value: []byte("b")}}},
		{"empty batch kept by compaction",
			rawBatch(fields{baseOffset: 5, lastDelta: 4, baseTS: -1, maxTS: 12345, count: 0}), nil},
		{"LogAppendTime: records take the max timestamp",
			rawBatch(fields{attrs: 0x08, lastDelta: 1, baseTS: 10, maxTS: 999, count: 2},
				encRecord(0, 0, nil, nil), encRecord(5, 1, nil, nil)),
			[]rec{{Offset: 0, Timestamp: 999}, {Offset: 1, Timestamp: 999}}},
		{"transactional and control bits",
			rawBatch(fields{attrs: 0x30, lastDelta: 0, baseTS: 1, maxTS: 1, count: 1},
				encRecord(0, 0, []byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0})),
			[]rec{{Offset: 0, Timestamp: 1, Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}},
		{"non-minimal varints within their width",
			rawBatch(fields{lastDelta: 0, baseTS: 1, maxTS: 1, count: 1},
				[]byte{0x8e, 0x00, 0, 0x80, 0x00, 0, 1, 1, 0}),
			[]rec{{Offset: 0, Timestamp: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, got, err := decodeAll(tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if err := equalRecs(got, tc.want); err != nil {
				t.Fatal(err)
			}
			if h.Transactional() != (h.Attributes&0x10 != 0) || h.Control() != (h.Attributes&0x20 != 0) {
				t.Fatalf("attribute methods disagree with %#x", h.Attributes)
			}
		})
	}
}

func TestPeekSize(t *testing.T) {
	b := good()
	if n, err := PeekSize(b[:12]); err != nil || n != len(b) {
		t.Fatalf("PeekSize = %d, %v; want %d", n, err, len(b))
	}
	_, err := PeekSize(b[:11])
	checkErr(t, "PeekSize", err, ErrShort)
	binary.BigEndian.PutUint32(b[8:], 48)
	_, err = PeekSize(b)
	checkErr(t, "PeekSize", err, ErrCorrupt)
	binary.BigEndian.PutUint32(b[8:], math.MaxUint32)
	_, err = PeekSize(b)
	checkErr(t, "PeekSize", err, ErrCorrupt)
	binary.BigEndian.PutUint32(b[8:], 49)
	if n, err := PeekSize(b); err != nil || n != HeaderSize {
		t.Fatalf("PeekSize of an empty batch = %d, %v", n, err)
	}
}

func TestParseHeaderIgnoresCRCAndTail(t *testing.T) {
	b := good()
	b[30] ^= 0xff // inside the CRC's coverage
	h, err := ParseHeader(b[:HeaderSize])
	if err != nil || h.BaseOffset != 10 || h.PartitionLeaderEpoch != 3 || h.NumRecords != 3 {
		t.Fatalf("ParseHeader = %+v, %v", h, err)
	}
	_, err = ParseHeader(b[:HeaderSize-1])
	checkErr(t, "ParseHeader", err, ErrShort)
}

func TestDecodeStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	var seen int
	_, err := Decode(good(), func(r *Record) error {
		seen++
		if r.Offset == 11 {
			return stop
		}
		return nil
	})
	if err != stop || seen != 2 {
		t.Fatalf("Decode returned %v after %d records; want the callback's error after 2", err, seen)
	}
}

func TestDecodedSlicesCannotOverwriteTheBatch(t *testing.T) {
	b := good()
	orig := clone(b)
	_, err := Decode(b, func(r *Record) error {
		if r.Key != nil {
			_ = append(r.Key, "xxxxxxxx"...)
		}
		if r.Value != nil {
			_ = append(r.Value, "xxxxxxxx"...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(orig) {
		t.Fatal("appending to a decoded key or value changed the batch")
	}
}

// TestCheckFraming: CheckFraming is Check but for the CRC: a batch whose
// CRC is wrong passes it (and fails Check), one with broken framing or
// header fields fails both the same way.
func TestCheckFraming(t *testing.T) {
	b := good()
	want, err := Check(b)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := CheckFraming(b); err != nil || h != want {
		t.Fatalf("CheckFraming of a good batch: %+v, %v; want %+v", h, err, want)
	}
	badCRC := clone(b)
	badCRC[len(badCRC)-1] ^= 1
	if _, err := Check(badCRC); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check with a wrong CRC: %v, want ErrCorrupt", err)
	}
	if _, err := CheckFraming(badCRC); err != nil {
		t.Fatalf("CheckFraming with a wrong CRC: %v, want nil", err)
	}
	codec := clone(b)
	codec[22] = codec[22]&^7 | 6 // no codec 6
	fixCRC(codec)
	magic := clone(b)
	magic[16] = 1 // outside the CRC
	count := goodFields()
	count.count = -1
	for name, bad := range map[string][]byte{
		"short":          b[:40],
		"unknown codec":  codec,
		"magic 1":        magic,
		"negative count": rawBatch(count, goodRecords()...),
	} {
		_, cerr := Check(bad)
		_, ferr := CheckFraming(bad)
		if cerr == nil || ferr == nil || cerr.Error() != ferr.Error() {
			t.Errorf("%s: Check %v, CheckFraming %v: both must fail alike", name, cerr, ferr)
		}
	}
}
