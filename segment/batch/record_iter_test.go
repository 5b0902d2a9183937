package batch

import (
	"errors"
	"testing"
)

// TestIter: Iter yields what Records does, batch after batch with one Iter,
// and refuses a compressed batch.
func TestIter(t *testing.T) {
	var bd Builder
	var it Iter
	for n := range 4 {
		bd.Reset(100)
		for i := range n * 3 {
			bd.Append(100+int64(i), []byte{byte(i)}, []byte{byte(n)}, []RecordHeader{{Key: "k", Value: []byte{byte(i)}}})
		}
		b := bd.Bytes()
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		var want []Record
		if err := Records(b, h, func(r *Record) error {
			c := *r
			c.Headers = append([]RecordHeader(nil), r.Headers...)
			want = append(want, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := it.Reset(b, h); err != nil {
			t.Fatal(err)
		}
		var r Record
		for i := 0; ; i++ {
			ok, err := it.Next(&r)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if i != len(want) {
					t.Fatalf("batch %d: %d records, want %d", n, i, len(want))
				}
				break
			}
			w := want[i]
			if r.Offset != w.Offset || r.Timestamp != w.Timestamp || string(r.Key) != string(w.Key) ||
				string(r.Value) != string(w.Value) || len(r.Headers) != 1 || string(r.Headers[0].Value) != string(w.Headers[0].Value) {
				t.Fatalf("batch %d record %d: %+v, want %+v", n, i, r, w)
			}
		}
	}
	bd.SetCompression(CompressionLz4)
	bd.Reset(1)
	bd.Append(1, nil, []byte("x"), nil)
	b := bd.Bytes()
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := it.Reset(b, h); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Reset of a compressed batch: %v", err)
	}
	if err := it.Reset(b[:HeaderSize], Header{Length: minLength + 10}); !errors.Is(err, ErrShort) {
		t.Fatalf("Reset of a short batch: %v", err)
	}
}
