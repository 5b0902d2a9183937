package kafka

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/nozero"
	"github.com/strata-log/strata/internal/wire"
)

// Framing (Kafka's protocol guide): every request and response is an int32
// size followed by that many bytes. A request starts with its header:
//
//	api_key int16, api_version int16, correlation_id int32,
//	client_id nullable string (int16 length, even in flexible versions),
//	tagged fields (header v2: flexible versions only)
//
// A response starts with correlation_id int32 and, in flexible versions but
// never for ApiVersions, an empty tagged-field section (header v1).

// errBadFrame marks a frame the server cannot read: the connection is
// closed.
var errBadFrame = errors.New("kafka: bad frame")

// readFrame reads one size-prefixed frame into buf (grown if needed) and
// returns it without its size. A size that is negative or above max is
// errBadFrame. (A raw SASL token, after SaslHandshake v0, may be shorter
// than a request header.) started reports whether any byte of the
// frame was read, for telling an idle connection from a torn frame.
//
// A frame of frameRecycleMin bytes or more that buf cannot hold is read into
// a buffer of pool's when pool is not nil.
func readFrame(r io.Reader, buf []byte, maxSize int, pool *framePool) (frame []byte, started bool, err error) {
	return readFrameSized(r, buf, maxSize, pool, nil)
}

// readFrameSized is readFrame calling sized, if not nil, with the frame's
// size once it is read and found within maxSize, before the frame's bytes
// are: an error from it is returned as it is, the frame unread.
func readFrameSized(r io.Reader, buf []byte, maxSize int, pool *framePool, sized func(int) error) (frame []byte, started bool, err error) {
	sz, n, err := readSize(r)
	if err != nil {
		return nil, n > 0, err
	}
	switch {
	case sz < 0:
		return nil, true, fmt.Errorf("%w: negative size %d", errBadFrame, sz)
	case int(sz) > maxSize:
		return nil, true, fmt.Errorf("%w: size %d is larger than the maximum request size %d", errBadFrame, sz, maxSize)
	}
	if sized != nil {
		if err := sized(int(sz)); err != nil {
			return nil, true, err
		}
	}
	if int(sz) <= max(cap(buf), eagerFrameBytes) {
		switch {
		case int(sz) <= cap(buf):
		case pool != nil && sz >= frameRecycleMin:
			buf = pool.get(int(sz))
		default:
			buf = nozero.Make(int(sz)) // ReadFull writes all of it, or buf goes
		}
		buf = buf[:sz]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, true, unexpected(err)
		}
		return buf, true, nil
	}
	// Past eagerFrameBytes the memory follows the bytes that arrive, not
	// the size a peer claims: a frame that says 100 MiB and sends nothing
	// costs little.
	var b bytes.Buffer
	b.Grow(eagerFrameBytes)
	if n, err := b.ReadFrom(io.LimitReader(r, int64(sz))); err != nil {
		return nil, true, err
	} else if n < int64(sz) {
		return nil, true, io.ErrUnexpectedEOF
	}
	return b.Bytes(), true, nil
}

// readSize reads a frame's 4-byte size: from a bufio.Reader's buffer
// when it can (no array escaping to the heap through io.Reader), n the
// bytes of it read.
func readSize(r io.Reader) (sz int32, n int, err error) {
	if br, ok := r.(*bufio.Reader); ok {
		b, err := br.Peek(4)
		if err != nil { // as io.ReadFull fails
			n = len(b)
			br.Discard(n)
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, n, err
		}
		sz = int32(binary.BigEndian.Uint32(b))
		br.Discard(4)
		return sz, 4, nil
	}
	var size [4]byte
	n, err = io.ReadFull(r, size[:])
	if err != nil {
		return 0, n, err
	}
	return int32(binary.BigEndian.Uint32(size[:])), n, nil
}

// eagerFrameBytes is the largest frame whose buffer is allocated at once.
const eagerFrameBytes = 1 << 20

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// header is a request's header.
type header struct {
	key, version  int16
	correlationID int32
	clientID      *string
	flexible      bool // the request (and so its response header) is flexible
}

// parseHeader parses a request header up to its tagged fields (see
// skipHeaderTags); rest is what follows. The key and version are not
// checked against what the server serves; h.flexible is kmsg's for them.
func parseHeader(frame []byte) (h header, rest []byte, err error) {
	return parseHeaderReusing(frame, nil)
}

// parseHeaderReusing is parseHeader taking h.clientID from prev when the
// request names the same client id (a connection's requests all do): no
// allocation for it.
func parseHeaderReusing(frame []byte, prev *string) (h header, rest []byte, err error) {
	if len(frame) < 10 {
		return h, nil, fmt.Errorf("%w: %d bytes is too short for a request header", errBadFrame, len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest = frame[10:]
	switch {
	case n < -1:
		return h, nil, fmt.Errorf("%w: client id length %d", errBadFrame, n)
	case n >= 0:
		if int(n) > len(rest) {
			return h, nil, fmt.Errorf("%w: client id of %d bytes in %d", errBadFrame, n, len(rest))
		}
		if prev != nil && *prev == string(rest[:n]) {
			h.clientID = prev
		} else {
			id := string(rest[:n])
			h.clientID = &id
		}
		rest = rest[n:]
	}
	h.flexible = isFlexible(h.key, h.version)
	return h, rest, nil
}

// flexibleFrom holds, for each API key kmsg knows, the first version of
// its requests that is flexible (KIP-482); -1: none is. Filled once, so
// that parseHeader need not allocate a request to ask it.
var flexibleFrom = func() []int16 {
	var from []int16
	for key := int16(0); ; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			if key > 200 {
				return from
			}
			from = append(from, -2) // unknown key
			continue
		}
		first := int16(-1)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				first = v
				break
			}
		}
		from = append(from, first)
	}
}()

// isFlexible reports whether version v of key's requests is flexible, as
// kmsg's request for it says.
func isFlexible(key, v int16) bool {
	if key < 0 || int(key) >= len(flexibleFrom) || v < 0 {
		return false
	}
	f := flexibleFrom[key]
	return f >= 0 && v >= f // kmsg's rule is a threshold
}

// skipHeaderTags skips the tagged fields that end a flexible request
// header (header v2) and returns the body after them.
func skipHeaderTags(h header, rest []byte) ([]byte, error) {
	if !h.flexible {
		return rest, nil
	}
	rest, ok := wire.SkipTags(rest)
	if !ok {
		return nil, fmt.Errorf("%w: truncated tagged fields in the request header", errBadFrame)
	}
	return rest, nil
}

// appendResponse appends a whole response frame: size, header and body.
func appendResponse(dst []byte, h header, resp kmsg.Response) []byte {
	start := len(dst)
	dst = appendResponseHeader(dst, h)
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// appendResponseHeader appends a response's size (to be filled in) and
// header.
func appendResponseHeader(dst []byte, h header) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.correlationID))
	if h.flexible && h.key != apiVersionsKey {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}
