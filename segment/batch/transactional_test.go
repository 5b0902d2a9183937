package batch

import (
	"bytes"
	"testing"
)

// TestBuilderSetTransactional: the bit is in the header, covered by the
// CRC, kept by compression and forgotten by Reset.
func TestBuilderSetTransactional(t *testing.T) {
	for _, codec := range []int{CompressionNone, CompressionSnappy, CompressionZstd} {
		var bd Builder
		bd.SetCompression(codec)
		bd.Reset(100)
		// Enough records to be summed as appended (crcChunk) and some more.
		for i := range 200 {
			bd.Append(100+int64(i), nil, bytes.Repeat([]byte{byte(i)}, 50), nil)
		}
		bd.SetTransactional()
		b := bd.Bytes()
		h, err := Validate(b)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if !h.Transactional() || h.Control() || h.Compression() != codec || h.NumRecords != 200 {
			t.Fatalf("codec %d: header %+v: transactional %v", codec, h, h.Transactional())
		}
		bd.Reset(100)
		bd.Append(100, nil, []byte("x"), nil)
		h, err = Validate(bd.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if h.Transactional() {
			t.Fatalf("codec %d: transactional after Reset", codec)
		}
	}
}

// TestBuilderSetTransactionalEmpty: on a Builder that has not started a
// batch, it starts one, as Bytes does: an empty transactional batch.
func TestBuilderSetTransactionalEmpty(t *testing.T) {
	var bd Builder
	bd.SetTransactional()
	h, err := Validate(bd.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !h.Transactional() || h.NumRecords != 0 {
		t.Fatalf("header %+v", h)
	}
}
