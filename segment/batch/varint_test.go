package batch

import (
	"encoding/binary"
	"math"
	"testing"
)

func varintValues() []int64 {
	vs := []int64{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, math.MaxInt32, math.MinInt32,
		math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}
	for s := range 63 {
		vs = append(vs, 1<<s, -(1 << s), 1<<s-1, -(1<<s - 1))
	}
	return vs
}

func TestVarintRoundTrip(t *testing.T) {
	for _, v := range varintValues() {
		enc := binary.AppendVarint(nil, v)
		if varintLen(v) != len(enc) {
			t.Errorf("varintLen(%d) = %d, encoding is %d bytes", v, varintLen(v), len(enc))
		}
		got, n, ok := readVarint64(enc, 0)
		if !ok || got != v || n != len(enc) {
			t.Errorf("readVarint64(%x) = %d, %d, %v; want %d", enc, got, n, ok, v)
		}
		got32, n, ok := readVarint32(enc, 0)
		fits := v >= math.MinInt32 && v <= math.MaxInt32
		if ok != fits || (fits && (int64(got32) != v || n != len(enc))) {
			t.Errorf("readVarint32(%x) = %d, %d, %v; fits in int32: %v", enc, got32, n, ok, fits)
		}
	}
}

func TestVarintMalformed(t *testing.T) {
	tests := []struct {
		name   string
		b      []byte
		ok32   bool
		ok64   bool
		value  int64
		length int
	}{
		{"empty", nil, false, false, 0, 0},
		{"unterminated", []byte{0x80}, false, false, 0, 0},
		{"unterminated 4", []byte{0xff, 0xff, 0xff, 0xff}, false, false, 0, 0},
		{"max int32, 5 bytes", []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, true, true, math.MaxInt32, 5},
		{"5th byte past 32 bits", []byte{0xfe, 0xff, 0xff, 0xff, 0x1f}, false, true, math.MaxUint32, 5},
		{"6 bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, false, true, 0, 6},
		{"non-minimal zero", []byte{0x80, 0x00}, true, true, 0, 2},
		{"min int64, 10 bytes", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, false, true, math.MinInt64, 10},
		{"10th byte past 64 bits", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, false, false, 0, 0},
		{"11 bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, false, false, 0, 0},
	}
	for _, tc := range tests {
		v32, n32, ok32 := readVarint32(tc.b, 0)
		if ok32 != tc.ok32 || (ok32 && (int64(v32) != tc.value || n32 != tc.length)) {
			t.Errorf("%s: readVarint32 = %d, %d, %v", tc.name, v32, n32, ok32)
		}
		v64, n64, ok64 := readVarint64(tc.b, 0)
		if ok64 != tc.ok64 || (ok64 && (v64 != tc.value || n64 != tc.length)) {
			t.Errorf("%s: readVarint64 = %d, %d, %v", tc.name, v64, n64, ok64)
		}
	}
}

// TestVarintTwoBytesExhaustive checks the two-byte fast path against the
// standard library's decoder for every pair of bytes, at the end of a slice
// and followed by more bytes.
func TestVarintTwoBytesExhaustive(t *testing.T) {
	for x := range 1 << 16 {
		b := []byte{byte(x), byte(x >> 8), 0x80}
		for _, in := range [][]byte{b[:2], b} {
			want, wn := binary.Varint(in)
			v64, n64, ok64 := readVarint64(in, 0)
			v32, n32, ok32 := readVarint32(in, 0)
			if wn <= 0 {
				if ok64 || ok32 {
					t.Fatalf("% x: decoded (%d, %d) where the standard decoder fails", in, v64, v32)
				}
				continue
			}
			if !ok64 || v64 != want || n64 != wn || !ok32 || int64(v32) != want || n32 != wn {
				t.Fatalf("% x: got (%d, %d, %v) (%d, %d, %v), want %d in %d bytes", in, v64, n64, ok64, v32, n32, ok32, want, wn)
			}
		}
	}
}
