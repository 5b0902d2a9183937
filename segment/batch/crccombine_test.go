package batch

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: the CRC-32C of a concatenation, from its parts' CRCs,
// is the CRC of the whole, for parts of every length up to 3 KiB and of
// 1 MiB, empty ones included.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20+3<<10)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	check := func(a, b []byte) {
		t.Helper()
		want := crc32.Checksum(append(append([]byte(nil), a...), b...), castagnoli)
		got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
		if got != want {
			t.Fatalf("len(A) %d, len(B) %d: combined %#x, whole %#x", len(a), len(b), got, want)
		}
	}
	for n := 0; n <= 3<<10; n++ {
		check(data[:rng.IntN(100)], data[100:100+n])
		check(data[:n], data[n:n+rng.IntN(100)])
	}
	check(data[:HeaderSize-offAttributes], data[100:100+1<<20])
	check(nil, nil)
}

// TestBuilderCRC: a batch's CRC, summed record by record as they are
// appended, is the CRC of its bytes, for every record count and after more
// records are appended to a finished batch.
func TestBuilderCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var bd Builder
	for round := range 50 {
		bd.Reset(int64(round))
		for i := range rng.IntN(40) {
			v := make([]byte, rng.IntN(3000))
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			bd.Append(int64(round+i), []byte("k"), v, []RecordHeader{{Key: "h", Value: v[:min(len(v), 7)]}})
			if i%7 == 0 {
				requireCRC(t, bd.Bytes())
			}
		}
		requireCRC(t, bd.Bytes())
	}
	// Records appended while the Builder compressed are not in the running
	// sum: a batch finished uncompressed after them is summed whole.
	bd.SetCompression(CompressionLz4)
	bd.Reset(1)
	bd.Append(1, nil, []byte("while compressing"), nil)
	bd.SetCompression(CompressionNone)
	bd.Append(2, nil, []byte("after"), nil)
	requireCRC(t, bd.Bytes())
}

func requireCRC(t *testing.T, b []byte) {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := crc32.Checksum(b[offAttributes:], castagnoli); h.CRC != want {
		t.Fatalf("CRC %#x, the bytes sum to %#x", h.CRC, want)
	}
}
