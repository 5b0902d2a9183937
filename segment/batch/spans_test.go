package batch

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// iterRecs reads the batch b with an Iter, through its spans if spans is
// not nil, into owned records.
func iterRecs(t *testing.T, b []byte, spans []Span) ([]rec, error) {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	var it Iter
	if spans != nil {
		err = it.ResetSpans(b, h, spans)
	} else {
		err = it.Reset(b, h)
	}
	if err != nil {
		return nil, err
	}
	var out []rec
	var r Record
	for {
		ok, err := it.Next(&r)
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, own(&r))
	}
}

// TestBuilderSpans: the spans a Builder records give an Iter the same
// records as parsing the batch: null and empty keys and values, negative
// and multi-byte timestamp deltas, a base offset set after building.
func TestBuilderSpans(t *testing.T) {
	var bd Builder
	bd.SetSpans(true)
	bd.Reset(1000)
	for i := range 300 {
		var key, value []byte
		switch i % 4 {
		case 0: // both null
		case 1:
			key, value = []byte{}, []byte{}
		case 2:
			value = bytes.Repeat([]byte{byte(i)}, i*7) // lengths with 1- and 2-byte varints
		case 3:
			key, value = bytes.Repeat([]byte("k"), i), []byte("v")
		}
		bd.Append(int64(1000+i*i-50*i), key, value, nil)
	}
	b := bd.Bytes()
	SetBaseOffset(b, 5000)
	spans := bd.Spans()
	if len(spans) != 300 {
		t.Fatalf("%d spans for 300 records", len(spans))
	}
	_, want := mustDecode(t, b)
	got, err := iterRecs(t, b, spans)
	if err != nil {
		t.Fatal(err)
	}
	if err := equalRecs(got, want); err != nil {
		t.Fatal(err)
	}
	if got[0].Offset != 5000 || got[299].Offset != 5299 {
		t.Fatalf("offsets %d..%d, want 5000..5299", got[0].Offset, got[299].Offset)
	}
}

// TestBuilderSpansNone: a batch has no spans unless they are asked for,
// nor one with a record with headers, a timestamp delta beyond 32 bits or
// compression; asking again in the next batch gets them again.
func TestBuilderSpansNone(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(bd *Builder)
	}{
		{"not asked", func(bd *Builder) { bd.SetSpans(false); bd.Append(1, nil, []byte("v"), nil) }},
		{"headers", func(bd *Builder) {
			bd.Append(1, nil, []byte("v"), nil)
			bd.Append(1, nil, []byte("v"), []RecordHeader{{Key: "h"}})
		}},
		{"late timestamp", func(bd *Builder) {
			bd.Append(1, nil, []byte("v"), nil)
			bd.Append(1+math.MaxInt32+1, nil, []byte("v"), nil)
		}},
		{"early timestamp", func(bd *Builder) { bd.Append(1+math.MinInt32-1, nil, []byte("v"), nil) }},
		{"compressed", func(bd *Builder) { bd.SetCompression(CompressionLz4); bd.Append(1, nil, []byte("v"), nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bd Builder
			bd.SetSpans(true)
			bd.Reset(1)
			tc.make(&bd)
			b := bd.Bytes()
			if s := bd.Spans(); s != nil {
				t.Fatalf("%d spans, want none", len(s))
			}
			mustDecode(t, b)

			bd.SetSpans(true)
			bd.SetCompression(CompressionNone)
			bd.Reset(1)
			bd.Append(1, []byte("k"), []byte("v"), nil)
			bd.Bytes()
			if len(bd.Spans()) != 1 {
				t.Fatalf("next batch: %d spans, want 1", len(bd.Spans()))
			}
		})
	}
}

// TestBuilderSpansDetach: Detach hands the spans over with the bytes: the
// next batch records its spans elsewhere, and the first batch's still
// read it.
func TestBuilderSpansDetach(t *testing.T) {
	var bd Builder
	bd.SetSpans(true)
	bd.Reset(1)
	for i := range 10 {
		bd.Append(1, nil, []byte{byte(i)}, nil)
	}
	first, spans := bd.Bytes(), bd.Spans()
	_, want := mustDecode(t, first)
	bd.Detach()
	bd.Reset(2)
	for i := range 20 {
		bd.Append(2, []byte("other"), bytes.Repeat([]byte{0xee}, i), nil)
	}
	bd.Bytes()
	if &bd.Spans()[0] == &spans[0] {
		t.Fatal("the next batch's spans are in the detached batch's slice")
	}
	got, err := iterRecs(t, first, spans)
	if err != nil {
		t.Fatal(err)
	}
	if err := equalRecs(got, want); err != nil {
		t.Fatal(err)
	}
}

// TestIterSpansCorrupt: spans that do not fit their batch are ErrCorrupt,
// never a panic or a record out of the batch.
func TestIterSpansCorrupt(t *testing.T) {
	var bd Builder
	bd.SetSpans(true)
	bd.Reset(1)
	bd.Append(1, []byte("key"), []byte("value"), nil)
	bd.Append(1, nil, []byte("v2"), nil)
	b := bd.Bytes()
	good := bd.Spans()
	for _, tc := range []struct {
		name  string
		spans []Span
	}{
		{"too few", good[:1]},
		{"too many", append(append([]Span{}, good...), good[0])},
		{"value past the end", []Span{good[0], {Value: uint32(len(b)), ValueLen: 3}}},
		{"value too long", []Span{good[0], {Value: good[1].Value, ValueLen: 1 << 20}}},
		{"key before the records", []Span{{Value: good[0].Value, ValueLen: 5, KeyLen: 1 << 20}, good[1]}},
		{"value in the header", []Span{{Value: 2, ValueLen: 1}, good[1]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := iterRecs(t, b, tc.spans)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
			for _, r := range recs {
				if !bytes.Contains(b, r.Value) {
					t.Fatalf("record %v is not the batch's", r)
				}
			}
		})
	}
}
