package batch

import "math/bits"

// Kafka's varint (int32) and varlong (int64) are zigzag-encoded base-128 integers, the
// same encoding as protobuf's sint32/sint64 and Go's binary.AppendVarint. A varint takes
// at most 5 bytes and a varlong at most 10; longer encodings, and final bytes that carry
// bits beyond the type's width, are corrupt.

// readVarint32 decodes a Kafka varint at b[i:]. It returns the value and the index
// after it; ok is false when the bytes end or the encoding is malformed.
func readVarint32(b []byte, i int) (v int32, next int, ok bool) {
	if i < len(b) && b[i] < 0x80 { // one byte: every length below 64
		return unzig32(b[i]), i + 1, true
	}
	return readVarint32Slow(b, i)
}

func readVarint32Slow(b []byte, i int) (v int32, next int, ok bool) {
	if i >= 0 && i+1 < len(b) && b[i] >= 0x80 && b[i+1] < 0x80 { // two bytes: lengths up to 8191
		u := uint32(b[i]&0x7f) | uint32(b[i+1])<<7
		return int32(u>>1) ^ -int32(u&1), i + 2, true
	}
	var u uint32
	for s := uint(0); s < 35; s += 7 {
		if i >= len(b) {
			return 0, i, false
		}
		c := b[i]
		i++
		if c < 0x80 {
			if s == 28 && c > 0x0f {
				return 0, i, false // bits beyond 32
			}
			u |= uint32(c) << s
			return int32(u>>1) ^ -int32(u&1), i, true
		}
		u |= uint32(c&0x7f) << s
	}
	return 0, i, false // more than 5 bytes
}

// readVarint64 decodes a Kafka varlong at b[i:], like readVarint32.
func readVarint64(b []byte, i int) (v int64, next int, ok bool) {
	if i < len(b) && b[i] < 0x80 {
		return int64(unzig32(b[i])), i + 1, true
	}
	return readVarint64Slow(b, i)
}

func readVarint64Slow(b []byte, i int) (v int64, next int, ok bool) {
	if i >= 0 && i+1 < len(b) && b[i] >= 0x80 && b[i+1] < 0x80 { // two bytes
		u := uint64(b[i]&0x7f) | uint64(b[i+1])<<7
		return int64(u>>1) ^ -int64(u&1), i + 2, true
	}
	var u uint64
	for s := uint(0); s < 70; s += 7 {
		if i >= len(b) {
			return 0, i, false
		}
		c := b[i]
		i++
		if c < 0x80 {
			if s == 63 && c > 1 {
				return 0, i, false // bits beyond 64
			}
			u |= uint64(c) << s
			return int64(u>>1) ^ -int64(u&1), i, true
		}
		u |= uint64(c&0x7f) << s
	}
	return 0, i, false // more than 10 bytes
}

// unzig32 decodes a one-byte varint (c < 0x80).
func unzig32(c byte) int32 { return int32(c>>1) ^ -int32(c&1) }

// unzig2 decodes a two-byte varint: c0 >= 0x80 (the caller checked that
// it is not one byte), c1 < 0x80.
func unzig2(c0, c1 byte) int32 {
	u := uint32(c0&0x7f) | uint32(c1)<<7
	return int32(u>>1) ^ -int32(u&1)
}

// varintLen is the encoded size of v as a zigzag varint (the same for varint and
// varlong when v fits in 32 bits).
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}
