package batch

// CRC-32C of a concatenation from the CRCs of its parts. A Builder sums its
// records a few KiB at a time as they are appended, while they are still in
// the cache (crcChunk), and adds the header's sum when the batch is
// finished, rather than reading the whole batch again then, by when most of
// it has left the cache.
//
// In the reflected representation hash/crc32 uses, a CRC is a polynomial
// over GF(2) with x^0 in the top bit. For CRCs with the usual pre- and
// post-conditioning, crc(A‖B) = crc(A)·x^(8·len(B)) mod P  ⊕  crc(B).

// castagnoliPoly is CRC-32C's polynomial, reflected.
const castagnoliPoly = 0x82f63b78

// mulModP returns a·b modulo the polynomial.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b·x
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow2n[k] is x^(2^k) modulo the polynomial.
var xPow2n = func() (t [32]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = mulModP(t[k-1], t[k-1])
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial.
func xPow8n(n int) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(xPow2n[k%32], p)
		}
	}
	return p
}

// crcCombine returns the CRC-32C of A‖B from crcA, crcB and len(B).
func crcCombine(crcA, crcB uint32, lenB int) uint32 {
	return mulModP(xPow8n(lenB), crcA) ^ crcB
}
