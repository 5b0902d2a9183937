package batch

import (
	"encoding/binary"
	"io"
	"math/bits"

	"github.com/klauspost/compress/s2"
)

// xerialReader reads the chunks of a xerial-framed snappy payload (after its
// 16-byte header): each a big-endian int32 length and a raw snappy block,
// decoded one at a time into buf.
type xerialReader struct {
	src   []byte // the chunks not read yet
	buf   []byte // the current chunk, decoded
	out   []byte // what of buf is not read yet
	limit int    // a chunk that decodes to more is not decoded
}

func (x *xerialReader) reset(chunks []byte, limit int) {
	x.src, x.out, x.limit = chunks, nil, limit
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for len(x.out) == 0 {
		if len(x.src) == 0 {
			return 0, io.EOF
		}
		if len(x.src) < 4 {
			return 0, corruptf("snappy: xerial chunk length cut short")
		}
		n := binary.BigEndian.Uint32(x.src)
		if uint64(n) > uint64(len(x.src)-4) {
			return 0, corruptf("snappy: xerial chunk of %d bytes, %d left", n, len(x.src)-4)
		}
		chunk := x.src[4 : 4+n]
		x.src = x.src[4+n:]
		dl, err := s2.DecodedLen(chunk)
		if err != nil {
			return 0, corruptf("snappy: xerial chunk: %v", err)
		}
		if dl > snappyMaxDecoded(len(chunk)) {
			return 0, corruptf("snappy: a xerial chunk of %d bytes cannot inflate to the %d it claims", len(chunk), dl)
		}
		if dl > x.limit {
			return 0, inflateError(CompressionSnappy, x.limit)
		}
		if cap(x.buf) < dl {
			x.buf = make([]byte, dl)
		}
		if x.out, err = s2.Decode(x.buf[:dl], chunk); err != nil {
			return 0, corruptf("snappy: xerial chunk: %v", err)
		}
	}
	n := copy(p, x.out)
	x.out = x.out[n:]
	return n, nil
}

// lz4Lenient returns the reader of an LZ4 frame for pierrec/lz4, which
// checks the frame descriptor's header checksum. Kafka before 0.10 (magic 0)
// computed that checksum over the frame magic too; a frame whose checksum is
// wrong in exactly that way is passed on with it corrected, as Kafka's own
// reader accepts such frames. Magic 2 batches from any current client have
// the right checksum, and the bytes of the batch are never changed.
func lz4Lenient(src *sliceReader, payload []byte) io.Reader {
	const magic = 0x184D2204
	if len(payload) < 7 || binary.LittleEndian.Uint32(payload) != magic {
		return src
	}
	flg := payload[4]
	descLen := 2 // FLG, BD
	if flg&0x08 != 0 {
		descLen += 8 // content size
	}
	if flg&0x01 != 0 {
		descLen += 4 // dictionary id
	}
	hc := 4 + descLen
	if len(payload) <= hc {
		return src
	}
	right := byte(xxh32(payload[4:hc]) >> 8)
	if payload[hc] == right || payload[hc] != byte(xxh32(payload[:hc])>>8) {
		return src
	}
	fixed := &lz4FixedHeader{rest: payload[hc+1:]}
	fixed.head = append(fixed.arr[:0], payload[:hc]...)
	fixed.head = append(fixed.head, right)
	return fixed
}

// lz4FixedHeader reads head, then rest.
type lz4FixedHeader struct {
	arr  [19]byte
	head []byte
	rest []byte
}

func (r *lz4FixedHeader) Read(p []byte) (int, error) {
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// xxh32 is the 32-bit xxHash with seed 0, for the LZ4 header checksum.
func xxh32(b []byte) uint32 {
	const (
		p1 uint32 = 2654435761
		p2 uint32 = 2246822519
		p3 uint32 = 3266489917
		p4 uint32 = 668265263
		p5 uint32 = 374761393
	)
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		seed := uint32(0)
		v1, v2, v3, v4 := seed+p1+p2, seed+p2, seed, seed-p1
		for len(b) >= 16 {
			v1 = bits.RotateLeft32(v1+binary.LittleEndian.Uint32(b)*p2, 13) * p1
			v2 = bits.RotateLeft32(v2+binary.LittleEndian.Uint32(b[4:])*p2, 13) * p1
			v3 = bits.RotateLeft32(v3+binary.LittleEndian.Uint32(b[8:])*p2, 13) * p1
			v4 = bits.RotateLeft32(v4+binary.LittleEndian.Uint32(b[12:])*p2, 13) * p1
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = p5
	}
	h += n
	for len(b) >= 4 {
		h = bits.RotateLeft32(h+binary.LittleEndian.Uint32(b)*p3, 17) * p4
		b = b[4:]
	}
	for _, c := range b {
		h = bits.RotateLeft32(h+uint32(c)*p5, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
