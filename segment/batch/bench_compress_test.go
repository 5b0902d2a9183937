package batch

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Broker-side validation of compressed batches against the codec's own decode
// of the same payload: the target is Validate ≤ 1.25 × CodecDecode per
// codec. Batches hold 1 KiB JSON-like records; 16 records is the producer's
// default batch (16 KiB), 256 a large one (256 KiB). MB/s counts the
// uncompressed records section, so the two benchmarks of a codec compare
// directly.
//
//	go test -run '^$' -bench 'ValidateOverhead' -benchtime 3000x ./segment/batch
//	go test -run '^$' -bench 'CompressedValidate|CodecDecode' -benchtime 2000x ./segment/batch

var compressedCounts = []int{16, 256}

// jsonRecord is a JSON-like value of about 1 KiB: field names that repeat,
// values that vary.
func jsonRecord(rng *rand.Rand, i int) []byte {
	v := fmt.Appendf(nil, `{"id":%d,"user":"user-%d","email":"user%d@example.com","created":"2026-12-01T09:%02d:%02d.%03dZ","active":%t,"score":%d.%02d,"tags":["alpha","beta","gamma"],"address":{"street":"%d Main Street","city":"Springfield","zip":"%05d"},"events":[`,
		i, rng.IntN(10000), rng.IntN(10000), rng.IntN(60), rng.IntN(60), rng.IntN(1000), rng.IntN(2) == 0, rng.IntN(100), rng.IntN(100), rng.IntN(999), rng.IntN(99999))
	for len(v) < 1000 {
		v = fmt.Appendf(v, `{"type":"click","page":"/products/%d","ms":%d},`, rng.IntN(5000), rng.IntN(100000))
	}
	v = append(v[:len(v)-1], "]}"...)
	return v
}

func compressedBench(codec, n int) []byte {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	var bd Builder
	bd.SetCompression(codec)
	bd.Reset(1_700_000_000_000)
	for i := range n {
		bd.Append(1_700_000_000_000+int64(i), fmt.Appendf(nil, "key-%06d", i), jsonRecord(rng, i), nil)
	}
	return clone(bd.Bytes())
}

func BenchmarkCompressedValidate(b *testing.B) {
	for _, codec := range codecs {
		for _, n := range compressedCounts {
			b.Run(fmt.Sprintf("%s/%d", codecName(codec), n), func(b *testing.B) {
				bt := compressedBench(codec, n)
				h, err := Validate(bt)
				if err != nil {
					b.Fatal(err)
				}
				plain, _ := Decompress(nil, bt, h)
				b.SetBytes(int64(len(plain) - HeaderSize))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Validate(bt); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkCodecDecode is the floor: each codec's own decoder over the same
// payload into a reused buffer, with a reused decoder, reading to the end of
// the stream (so that its checksums are checked too), doing nothing with the
// bytes. For zstd both the streaming reader (what Validate uses, to hold one
// record at a time) and DecodeAll (the whole payload at once) are measured.
func BenchmarkCodecDecode(b *testing.B) {
	for _, codec := range codecs {
		for _, n := range compressedCounts {
			bt := compressedBench(codec, n)
			h, _ := Validate(bt)
			plain, _ := Decompress(nil, bt, h)
			for _, d := range codecDecoders(b, codec, bt[HeaderSize:], len(plain)) {
				b.Run(fmt.Sprintf("%s/%d", d.name, n), func(b *testing.B) {
					b.SetBytes(int64(len(plain) - HeaderSize))
					b.ReportAllocs()
					for b.Loop() {
						if err := d.decode(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkValidateOverhead times Validate and the codec's own streaming
// decode alternately in one loop, so that the load of a shared machine falls
// on both alike, and reports validate/decode: the target is ≤ 1.25.
func BenchmarkValidateOverhead(b *testing.B) {
	for _, codec := range codecs {
		for _, n := range compressedCounts {
			bt := compressedBench(codec, n)
			h, _ := Validate(bt)
			plain, _ := Decompress(nil, bt, h)
			d := codecDecoders(b, codec, bt[HeaderSize:], len(plain))[0]
			b.Run(fmt.Sprintf("%s/%d", codecName(codec), n), func(b *testing.B) {
				b.SetBytes(int64(len(plain) - HeaderSize))
				var tv, td time.Duration
				for b.Loop() {
					t0 := time.Now()
					if err := d.decode(); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, err := Validate(bt); err != nil {
						b.Fatal(err)
					}
					tv += time.Since(t1)
					td += t1.Sub(t0)
				}
				b.ReportMetric(float64(tv)/float64(td), "validate/decode")
				b.ReportMetric(float64(td.Nanoseconds())/float64(b.N), "decode-ns/op")
				b.ReportMetric(float64(tv.Nanoseconds())/float64(b.N), "validate-ns/op")
			})
		}
	}
}

type codecDecoder struct {
	name   string
	decode func() error
}

// codecDecoders returns the codec's own ways to decode payload (size bytes
// decompressed), the streaming one first.
func codecDecoders(b *testing.B, codec int, payload []byte, size int) []codecDecoder {
	out := make([]byte, size)
	src := new(sliceReader)
	readAll := func(r io.Reader) error {
		for {
			if _, err := io.ReadFull(r, out); err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	switch codec {
	case CompressionGzip:
		src.b = payload
		zr, err := gzip.NewReader(src)
		if err != nil {
			b.Fatal(err)
		}
		return []codecDecoder{{"gzip", func() error {
			src.b = payload
			if err := zr.Reset(src); err != nil {
				return err
			}
			return readAll(zr)
		}}}
	case CompressionSnappy:
		return []codecDecoder{{"snappy", func() error {
			_, err := s2.Decode(out, payload)
			return err
		}}}
	case CompressionLz4:
		lr := lz4.NewReader(nil)
		return []codecDecoder{{"lz4", func() error {
			src.b = payload
			lr.Reset(src)
			return readAll(lr)
		}}}
	case CompressionZstd:
		zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			b.Fatal(err)
		}
		return []codecDecoder{{"zstd-stream", func() error {
			src.b = payload
			if err := zd.Reset(src); err != nil {
				return err
			}
			return readAll(zd)
		}}, {"zstd-all", func() error {
			_, err := zd.DecodeAll(payload, out[:0])
			return err
		}}}
	}
	b.Fatalf("codec %d", codec)
	return nil
}
