package batch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/golden holds record batches written by real Kafka clients, captured
// from their produce requests by interop's TestGenerateGolden (kgo and sarama,
// each codec; regenerate with `cd interop && STRATA_GOLDEN=1 go test -run
// TestGenerateGolden .`). They differ in framing: kgo writes snappy as one raw
// block and lz4 frames of 4 MiB blocks, sarama snappy in xerial chunks (as
// Kafka's Java producer) and lz4 frames of 64 KiB blocks; kgo's batches carry a
// producer id (it is idempotent by default), sarama's none.

const goldenBase = 1_764_000_000_000

// goldenWant are the records every golden batch holds: interop's
// goldenRecords, written out again (change both together).
func goldenWant() []rec {
	return []rec{
		{Offset: 0, Timestamp: goldenBase, Key: []byte("key-0"), Value: bytes.Repeat([]byte(`{"id":0,"name":"golden","tags":["a","b"]},`), 24),
			Headers: []RecordHeader{{Key: "trace", Value: []byte("t-0")}, {Key: "content-type", Value: []byte("json")}}},
		{Offset: 1, Timestamp: goldenBase + 1000, Key: nil, Value: []byte("v1")},
		{Offset: 2, Timestamp: goldenBase + 2000, Key: []byte("key-2"), Value: nil, Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Offset: 3, Timestamp: goldenBase + 3000, Key: []byte("key-3"), Value: []byte("three")},
		{Offset: 4, Timestamp: goldenBase + 1500, Key: []byte("key-4"), Value: bytes.Repeat([]byte(`{"n":4,"payload":"0123456789abcdef"},`), 80)},
	}
}

func TestGoldenBatches(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.batch")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, client := range []string{"kgo", "sarama"} {
		for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
			want[client+"-"+codec+".batch"] = true
		}
	}
	for _, f := range files {
		delete(want, filepath.Base(f))
	}
	if len(want) > 0 {
		t.Fatalf("golden batches missing: %v", want)
	}
	codecOf := map[string]int{"gzip": CompressionGzip, "snappy": CompressionSnappy, "lz4": CompressionLz4, "zstd": CompressionZstd}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".batch")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			codec := codecOf[name[strings.IndexByte(name, '-')+1:]]
			var got []rec
			n := 0
			if err := Batches(raw, func(b []byte, h Header) error {
				n++
				if h.Compression() != codec {
					t.Fatalf("codec %d, want %d", h.Compression(), codec)
				}
				if _, err := ValidateProduced(b); err != nil {
					t.Fatalf("ValidateProduced: %v", err)
				}
				if h.MaxTimestamp != goldenBase+3000 {
					t.Errorf("max timestamp %d", h.MaxTimestamp)
				}
				_, recs := mustDecode(t, b)
				got = append(got, recs...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("%d batches, want the client's one", n)
			}
			if err := equalRecs(got, goldenWant()); err != nil {
				t.Fatal(err)
			}
			// Recompressing to every codec and back keeps the records.
			h, _ := Validate(raw)
			for _, to := range append([]int{CompressionNone}, codecs...) {
				out, err := Recompress(nil, raw, h, to)
				if err != nil {
					t.Fatal(err)
				}
				_, again := mustDecode(t, out)
				if err := equalRecs(again, goldenWant()); err != nil {
					t.Fatalf("recompressed to %s: %v", codecName(to), err)
				}
			}
		})
	}
}
