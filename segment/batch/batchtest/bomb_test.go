package batchtest_test

import (
	"testing"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/segment/batch/batchtest"
)

// TestBombIsValid: a small bomb is a batch every check accepts, whose one
// record holds the zeros; a large one stays small.
func TestBombIsValid(t *testing.T) {
	codecs := []int{batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLz4, batch.CompressionZstd}
	for _, codec := range codecs {
		b, err := batchtest.Bomb(codec, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		h, err := batch.ValidateProduced(b)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if h.Compression() != codec || h.NumRecords != 1 || h.Size() != len(b) {
			t.Fatalf("codec %d: header %+v for %d bytes", codec, h, len(b))
		}
		n := 0
		if err := batch.Records(b, h, func(r *batch.Record) error {
			n++
			if r.Key != nil || len(r.Value) != 1<<20 || r.Timestamp != batchtest.Timestamp {
				t.Fatalf("codec %d: record key %v, %d-byte value, timestamp %d", codec, r.Key, len(r.Value), r.Timestamp)
			}
			return nil
		}); err != nil || n != 1 {
			t.Fatalf("codec %d: %d records, %v", codec, n, err)
		}
	}
	if testing.Short() {
		return
	}
	b, err := batchtest.Bomb(batch.CompressionZstd, 1000<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 64<<10 {
		t.Fatalf("a zstd bomb of 1000 MiB takes %d bytes", len(b))
	}
}
