package batch

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// Benchmarks run over batches of 1000 records of 100 B and 1 KiB values (10-byte keys).
// Each op is one batch; MB/s counts whole batch bytes and records/s is reported too.
// CRC32C is the floor for Validate and Decode: the raw checksum of the same bytes.

var benchSizes = []int{100, 1024}

const benchRecords = 1000

func benchBatch(size int) []byte {
	var bd Builder
	bd.Reset(1_700_000_000_000)
	key, value := []byte("key-000000"), make([]byte, size)
	for i := range benchRecords {
		bd.Append(1_700_000_000_000+int64(i), key, value, nil)
	}
	return clone(bd.Bytes())
}

func reportRecords(b *testing.B) {
	b.ReportMetric(float64(b.N)*benchRecords/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkBuilder(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			key, value := []byte("key-000000"), make([]byte, size)
			var bd Builder
			b.SetBytes(int64(len(benchBatch(size))))
			b.ReportAllocs()
			for b.Loop() {
				bd.Reset(1_700_000_000_000)
				for i := range benchRecords {
					bd.Append(1_700_000_000_000+int64(i), key, value, nil)
				}
				_ = bd.Bytes()
			}
			reportRecords(b)
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			data := benchBatch(size)
			var n int
			fn := func(r *Record) error { n += len(r.Value); return nil }
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(data, fn); err != nil {
					b.Fatal(err)
				}
			}
			reportRecords(b)
		})
	}
}

// BenchmarkRecords decodes an already validated batch: the second half of Decode, and
// what a reader walking batches with Batches pays per batch.
func BenchmarkRecords(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			data := benchBatch(size)
			h, err := Validate(data)
			if err != nil {
				b.Fatal(err)
			}
			var n int
			fn := func(r *Record) error { n += len(r.Value); return nil }
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Records(data, h, fn); err != nil {
					b.Fatal(err)
				}
			}
			reportRecords(b)
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			data := benchBatch(size)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(data); err != nil {
					b.Fatal(err)
				}
			}
			reportRecords(b)
		})
	}
}

// BenchmarkBatches walks 32 concatenated batches, as recovery scans a segment.
func BenchmarkBatches(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			one := benchBatch(size)
			var log []byte
			for range 32 {
				log = append(log, one...)
			}
			fn := func([]byte, Header) error { return nil }
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Batches(log, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCRC32C is the floor: the checksum alone over the same batch bytes.
func BenchmarkCRC32C(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			data := benchBatch(size)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_ = crc32.Checksum(data[offAttributes:], castagnoli)
			}
		})
	}
}
