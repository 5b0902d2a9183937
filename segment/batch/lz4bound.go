package batch

import "encoding/binary"

// lz4Bound returns an upper bound of what the lz4 frames of payload
// decompress to, read from their headers without decompressing: the sum of
// their blocks' largest size (a stored block: its own length). A content
// size a frame declares is not trusted: a corrupt one could be too small. ok is false when payload
// is not a sequence of well-formed lz4 frames: the caller guesses then.
// Decompress sizes its buffer with it: a batch of this process's Producer
// (64 KiB blocks) inflates into a buffer at most 64 KiB too large, where a
// guess of 4:1 took 1.7 times the room of 1 MB of JSON compressed 2.3:1,
// all of it zeroed.
func lz4Bound(payload []byte) (n int, ok bool) {
	const magic = 0x184D2204
	le := binary.LittleEndian
	for len(payload) > 0 {
		if len(payload) < 7 || le.Uint32(payload) != magic {
			return 0, false
		}
		flg, bd := payload[4], payload[5]
		if flg>>6 != 1 { // version 01
			return 0, false
		}
		maxBlock := 0
		switch (bd >> 4) & 7 {
		case 4:
			maxBlock = 64 << 10
		case 5:
			maxBlock = 256 << 10
		case 6:
			maxBlock = 1 << 20
		case 7:
			maxBlock = 4 << 20
		default:
			return 0, false
		}
		pos := 6
		if flg&0x08 != 0 {
			pos += 8 // content size
		}
		if flg&0x01 != 0 {
			pos += 4 // dictionary id
		}
		pos++ // header checksum
		blockSum := 0
		if flg&0x10 != 0 {
			blockSum = 4
		}
		frame := 0
		for {
			if len(payload) < pos+4 {
				return 0, false
			}
			v := le.Uint32(payload[pos:])
			pos += 4
			if v == 0 {
				break // end mark
			}
			size := int(v &^ (1 << 31))
			if size > maxBlock || len(payload)-pos < size+blockSum {
				return 0, false
			}
			pos += size + blockSum
			if v&(1<<31) != 0 {
				frame += size // stored uncompressed
			} else {
				frame += maxBlock
			}
			if frame > maxInflated {
				return 0, false
			}
		}
		if flg&0x04 != 0 {
			pos += 4 // content checksum
		}
		if pos > len(payload) {
			return 0, false
		}
		n += frame
		if n > maxInflated {
			return 0, false
		}
		payload = payload[pos:]
	}
	return n, true
}
