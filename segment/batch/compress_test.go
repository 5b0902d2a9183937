package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
)

var codecs = []int{CompressionGzip, CompressionSnappy, CompressionLz4, CompressionZstd}

// testRecs is a batch's worth of records of every shape: null and empty keys and
// values, headers, timestamps out of order, and values large enough to span
// several lz4 blocks and xerial chunks.
func testRecs(n int) []rec {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	recs := make([]rec, n)
	for i := range recs {
		r := rec{Offset: int64(i), Timestamp: 1_700_000_000_000 + int64(rng.IntN(1000)) - 500}
		switch i % 5 {
		case 0:
			r.Key, r.Value = nil, nil
		case 1:
			r.Key, r.Value = []byte{}, []byte{}
		case 2:
			r.Key = fmt.Appendf(nil, "key-%d", i)
			r.Value = bytes.Repeat(fmt.Appendf(nil, `{"i":%d,"name":"record"},`, i), 1+rng.IntN(60))
			r.Headers = []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "null"}}
		case 3:
			r.Value = make([]byte, 1+rng.IntN(3000))
			for j := range r.Value {
				r.Value[j] = byte(rng.IntN(256))
			}
		case 4:
			r.Key = []byte("k")
			r.Value = bytes.Repeat([]byte{'z'}, 70_000) // more than one 64 KiB block
		}
		recs[i] = r
	}
	return recs
}

// buildWith encodes recs with codec, the first record's timestamp as the base.
func buildWith(codec int, recs []rec) []byte {
	var bd Builder
	bd.SetCompression(codec)
	if len(recs) > 0 {
		bd.Reset(recs[0].Timestamp)
	} else {
		bd.Reset(0)
	}
	for _, r := range recs {
		bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
	}
	return clone(bd.Bytes())
}

// recompress returns the batch b (uncompressed) with its records section
// replaced by payload and its attributes' codec set: any payload, with a right
// CRC, so the tests reach the decompression.
func recompress(b []byte, codec int, payload []byte) []byte {
	out := append(clone(b[:HeaderSize]), payload...)
	be := binary.BigEndian
	be.PutUint32(out[offLength:], uint32(len(out)-logOverhead))
	be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])&^7|uint16(codec))
	fixCRC(out)
	return out
}

func mustCompress(t testing.TB, codec int, src []byte) []byte {
	t.Helper()
	z, err := compress(nil, codec, src)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func TestCompressedRoundTrip(t *testing.T) {
	for _, codec := range codecs {
		for _, n := range []int{0, 1, 2, 5, 23} {
			t.Run(fmt.Sprintf("%s/%d", codecName(codec), n), func(t *testing.T) {
				want := testRecs(n)
				plain := build(want)
				b := buildWith(codec, want)
				h, err := ValidateProduced(b)
				if err != nil {
					t.Fatalf("ValidateProduced: %v", err)
				}
				if h.Compression() != codec || h.NumRecords != int32(n) {
					t.Fatalf("header: codec %d count %d, want %d %d", h.Compression(), h.NumRecords, codec, n)
				}
				if n > 2 && len(b) >= len(plain) {
					t.Errorf("compressed batch of %d bytes, uncompressed %d", len(b), len(plain))
				}
				_, got := mustDecode(t, b)
				if err := equalRecs(got, want); err != nil {
					t.Fatal(err)
				}
				if err := scanTiny(b, h); err != nil {
					t.Fatalf("through a 16-byte window: %v", err)
				}
				// Decompress gives back the uncompressed batch byte for byte.
				d, err := Decompress([]byte("prefix"), b, h)
				if err != nil {
					t.Fatalf("Decompress: %v", err)
				}
				if string(d[:6]) != "prefix" || !bytes.Equal(d[6:], plain) {
					t.Fatalf("Decompress differs from the uncompressed batch")
				}
				// Records on a header from Check streams through the pool too.
				var viaRecords []rec
				ch, err := Check(b)
				if err != nil {
					t.Fatal(err)
				}
				if err := Records(b, ch, func(r *Record) error { viaRecords = append(viaRecords, own(r)); return nil }); err != nil {
					t.Fatal(err)
				}
				if err := equalRecs(viaRecords, want); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestBuilderCompressionReuse: a Builder keeps its codec across Reset, and a
// compressed Bytes leaves the records in place so more can be appended.
func TestBuilderCompressionReuse(t *testing.T) {
	var bd Builder
	bd.SetCompression(CompressionZstd)
	for round := range 3 {
		bd.ResetAt(100, int64(round*13))
		bd.Append(100, []byte("a"), []byte("1"), nil)
		first := clone(bd.Bytes())
		bd.Append(101, []byte("b"), []byte("2"), nil)
		second := bd.Bytes()
		for _, c := range []struct {
			b []byte
			n int
		}{{first, 1}, {second, 2}} {
			h, recs, err := decodeAll(c.b)
			if err != nil || len(recs) != c.n || h.Compression() != CompressionZstd {
				t.Fatalf("round %d: %d records, codec %d, err %v", round, len(recs), h.Compression(), err)
			}
		}
	}
	if bd.Compression() != CompressionZstd {
		t.Fatal("codec lost")
	}
}

// TestCompressedCorrupt: payloads that do not decompress, or that hold other records
// than the header says, are ErrCorrupt from every entry point, and yield no record.
func TestCompressedCorrupt(t *testing.T) {
	recs := testRecs(4)
	plain := build(recs)
	section := plain[HeaderSize:]
	for _, codec := range codecs {
		good := buildWith(codec, recs)
		z := good[HeaderSize:]
		extra := encRecord(0, 4, nil, []byte("extra"))
		cases := []struct {
			name string
			b    []byte
		}{
			{"not compressed", recompress(plain, codec, section)},
			{"empty payload", recompress(plain, codec, nil)},
			{"cut payload", recompress(plain, codec, z[:len(z)/2])},
			{"payload without its last byte", recompress(plain, codec, z[:len(z)-1])},
			{"flipped byte", recompress(plain, codec, flip(z, len(z)/2))},
			{"garbage after the stream", recompress(plain, codec, append(clone(z), 1, 2, 3, 4, 5, 6, 7, 8))},
			{"one record more", recompress(plain, codec, mustCompress(t, codec, append(clone(section), extra...)))},
			{"one record fewer", recompress(plain, codec, mustCompress(t, codec, section[:len(section)-len(encRecord(0, 3, recs[3].Key, recs[3].Value))]))},
			{"trailing bytes", recompress(plain, codec, mustCompress(t, codec, append(clone(section), 0)))},
			{"cut record", recompress(plain, codec, mustCompress(t, codec, section[:len(section)-3]))},
		}
		for _, tc := range cases {
			t.Run(codecName(codec)+"/"+tc.name, func(t *testing.T) {
				if tc.name == "flipped byte" && codec == CompressionSnappy {
					// A raw snappy block has no checksum: a flipped literal
					// decodes to other bytes of the same records, which may
					// still parse. It must not panic; it is not required to fail.
					_, _, _ = decodeAll(tc.b)
					return
				}
				if _, err := Validate(tc.b); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Validate: %v, want ErrCorrupt", err)
				}
				if h, err := Check(tc.b); err == nil {
					if err := scanTiny(tc.b, h); !errors.Is(err, ErrCorrupt) {
						t.Fatalf("through a 16-byte window: %v, want ErrCorrupt", err)
					}
				}
				n := 0
				if _, err := Decode(tc.b, func(*Record) error { n++; return nil }); !errors.Is(err, ErrCorrupt) || n != 0 {
					t.Fatalf("Decode: %d records, %v", n, err)
				}
				h, err := Check(tc.b)
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if err := Records(tc.b, h, func(*Record) error { n++; return nil }); !errors.Is(err, ErrCorrupt) || n != 0 {
					t.Fatalf("Records: %d records, %v", n, err)
				}
				if _, err := Decompress(nil, tc.b, h); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decompress: %v", err)
				}
			})
		}
	}
}

func flip(b []byte, i int) []byte {
	c := clone(b)
	c[i] ^= 0x55
	return c
}

// TestValidateProducedOffsets: a producer's compressed batch must number its
// records 0..n-1 (Kafka's LogValidator); Validate, which recovery and readers
// use, accepts the gaps compaction leaves.
func TestValidateProducedOffsets(t *testing.T) {
	records := append(encRecord(0, 0, nil, []byte("a")), encRecord(0, 2, nil, []byte("b"))...)
	for _, codec := range codecs {
		b := rawBatch(fields{attrs: int16(codec), lastDelta: 2, baseTS: 5, maxTS: 5, count: 2, producerID: -1, producerEpoch: -1, baseSequence: -1}, mustCompress(t, codec, records))
		if _, err := Validate(b); err != nil {
			t.Fatalf("%s: Validate of a compacted batch: %v", codecName(codec), err)
		}
		if _, err := ValidateProduced(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: ValidateProduced of a batch with a gap: %v", codecName(codec), err)
		}
		dup := append(encRecord(0, 0, nil, []byte("a")), encRecord(0, 0, nil, []byte("b"))...)
		b = rawBatch(fields{attrs: int16(codec), lastDelta: 1, baseTS: 5, maxTS: 5, count: 2}, mustCompress(t, codec, dup))
		if _, err := Validate(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Validate of repeated offset deltas: %v", codecName(codec), err)
		}
		wrongMax := rawBatch(fields{attrs: int16(codec), lastDelta: 1, baseTS: 5, maxTS: 6, count: 2}, mustCompress(t, codec, append(encRecord(0, 0, nil, nil), encRecord(0, 1, nil, nil)...)))
		if _, err := Validate(wrongMax); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Validate of a wrong max timestamp: %v", codecName(codec), err)
		}
	}
}

// xerialFrame frames src as snappy-java's SnappyOutputStream does (Kafka's Java
// producer): the header, then chunks of at most chunk bytes, each a length and
// a raw snappy block.
func xerialFrame(src []byte, chunk int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(src) > 0 {
		n := min(chunk, len(src))
		blk := s2.EncodeSnappy(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
		out = append(out, blk...)
		src = src[n:]
	}
	return out
}

func TestSnappyXerialFraming(t *testing.T) {
	recs := testRecs(12)
	plain := build(recs)
	b := recompress(plain, CompressionSnappy, xerialFrame(plain[HeaderSize:], 32<<10))
	_, got := mustDecode(t, b)
	if err := equalRecs(got, recs); err != nil {
		t.Fatal(err)
	}
	bad := recompress(plain, CompressionSnappy, xerialFrame(plain[HeaderSize:], 32<<10)[:200])
	if _, err := Validate(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("cut xerial stream: %v", err)
	}
}

// TestLz4KafkaHeaderChecksum: a frame whose header checksum covers the frame magic
// too (Kafka before 0.10) is read; one whose checksum is just wrong is not.
func TestLz4KafkaHeaderChecksum(t *testing.T) {
	recs := testRecs(3)
	plain := build(recs)
	z := mustCompress(t, CompressionLz4, plain[HeaderSize:])
	hc := 6 // magic, FLG, BD: no content size, no dictionary
	if z[4]&0x09 != 0 {
		t.Fatalf("unexpected frame flags %#x", z[4])
	}
	if byte(xxh32(z[4:hc])>>8) != z[hc] {
		t.Fatal("xxh32 disagrees with pierrec/lz4's header checksum")
	}
	old := clone(z)
	old[hc] = byte(xxh32(z[:hc]) >> 8)
	_, got := mustDecode(t, recompress(plain, CompressionLz4, old))
	if err := equalRecs(got, recs); err != nil {
		t.Fatal(err)
	}
	wrong := clone(z)
	wrong[hc] ^= 0xff
	if wrong[hc] == old[hc] {
		wrong[hc] ^= 1
	}
	if _, err := Validate(recompress(plain, CompressionLz4, wrong)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong header checksum: %v", err)
	}
}

// TestXXH32 checks the hash against published values of XXH32 with seed 0.
func TestXXH32(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"a", 0x550d7456},
		{"abc", 0x32d153ff},
		{"Nobody inspects the spammish repetition", 0xe2293b2f},
	} {
		if got := xxh32([]byte(c.in)); got != c.want {
			t.Errorf("xxh32(%q) = %#08x, want %#08x", c.in, got, c.want)
		}
	}
}

// TestCompressedAllocs: validating a compressed batch allocates nothing per record
// in steady state (pooled decoders and windows).
func TestCompressedAllocs(t *testing.T) {
	recs := make([]rec, 200)
	for i := range recs {
		recs[i] = rec{Timestamp: 1, Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte("value "), 150)}
	}
	for _, codec := range codecs {
		b := buildWith(codec, recs)
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := Validate(b); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 8 && !raceEnabled {
			t.Errorf("%s: Validate of 200 records: %.0f allocations", codecName(codec), allocs)
		}
	}
}

func TestRecompress(t *testing.T) {
	recs := testRecs(7)
	for _, from := range append([]int{CompressionNone}, codecs...) {
		b := buildWith(from, recs)
		h, err := Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range append([]int{CompressionNone}, codecs...) {
			out, err := Recompress([]byte("x"), b, h, to)
			if err != nil {
				t.Fatalf("%s → %s: %v", codecName(from), codecName(to), err)
			}
			oh, got := mustDecode(t, out[1:])
			if oh.Compression() != to {
				t.Fatalf("%s → %s: codec %d", codecName(from), codecName(to), oh.Compression())
			}
			if err := equalRecs(got, recs); err != nil {
				t.Fatalf("%s → %s: %v", codecName(from), codecName(to), err)
			}
		}
	}
}

// TestValidateMemoryBounded: validating a compressed batch holds a window, not
// the records: a 16 MiB value inflated from a small payload costs Validate
// well under 1 MiB, while Decompress (which must hold it) takes it all.
func TestValidateMemoryBounded(t *testing.T) {
	value := make([]byte, 16<<20)
	for _, codec := range codecs {
		b := buildWith(codec, []rec{{Timestamp: 1, Key: []byte("k"), Value: value, Headers: []RecordHeader{{Key: "h", Value: value[:1<<20]}}}, {Timestamp: 2, Value: []byte("v")}})
		if len(b) > 4<<20 {
			t.Fatalf("%s: %d bytes compressed", codecName(codec), len(b))
		}
		// The least of a few runs: a run on another P than the warm-up's
		// may find the pool empty there and make a zstd decoder, which
		// allocates its history window (the frame's, 8 MiB here): the
		// codec's memory, not the validation's.
		least := uint64(math.MaxUint64)
		var h Header
		for range 4 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var err error
			h, err = Validate(b)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		if codec == CompressionSnappy {
			continue // a raw snappy block is decoded whole: not streamable
		}
		if least > 1<<20 {
			t.Errorf("%s: Validate allocated %d bytes", codecName(codec), least)
		}
		plain, err := Decompress(nil, b, h)
		if err != nil || len(plain) < 17<<20 {
			t.Fatalf("%s: Decompress: %d bytes, %v", codecName(codec), len(plain), err)
		}
	}
}

// TestSnappyClaimedLength: a snappy block (or xerial chunk) whose header claims
// more than its bytes can decode to is refused before anything is allocated
// for it; the bound holds for the most compressible input.
func TestSnappyClaimedLength(t *testing.T) {
	zeros := make([]byte, 4<<20)
	if enc := s2.EncodeSnappy(nil, zeros); len(zeros) > snappyMaxDecoded(len(enc)) {
		t.Fatalf("%d zeros encode to %d bytes: the bound %d is too tight", len(zeros), len(enc), snappyMaxDecoded(len(enc)))
	}
	plain := build(testRecs(2))
	claim := binary.AppendUvarint(nil, 1<<29) // 512 MiB, then nothing
	for name, payload := range map[string][]byte{
		"raw":    claim,
		"xerial": append(append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, byte(len(claim))), claim...),
	} {
		b := recompress(plain, CompressionSnappy, payload)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Validate(b)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Fatalf("%s: %d bytes allocated for a claim", name, n)
		}
	}
}

// TestLz4JavaFrame: Kafka's Java client (KafkaLZ4BlockOutputStream) writes
// independent 64 KiB blocks without a content checksum; such frames are read.
func TestLz4JavaFrame(t *testing.T) {
	recs := testRecs(6)
	plain := build(recs)
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.BlockChecksumOption(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain[HeaderSize:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if flg := buf.Bytes()[4]; flg&0x04 != 0 || flg&0x20 == 0 {
		t.Fatalf("frame flags %#x: want independent blocks, no content checksum", flg)
	}
	_, got := mustDecode(t, recompress(plain, CompressionLz4, buf.Bytes()))
	if err := equalRecs(got, recs); err != nil {
		t.Fatal(err)
	}
}
