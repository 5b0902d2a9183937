// Package wire holds the pieces of Kafka's framing that kmsg leaves to its
// callers, for every package of this module that reads frames itself: the
// Kafka server and client, the cluster's transport, the bench's responder.
package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SkipTags skips the tagged fields that end a flexible request or response
// header and returns what follows them; false if they are truncated or
// malformed.
func SkipTags(b []byte) ([]byte, bool) {
	if len(b) > 0 && b[0] == 0 {
		return b[1:], true // no tagged fields (the usual case), without a tagReader escaping to the heap
	}
	tr := tagReader{src: b}
	kmsg.SkipTags(&tr)
	return tr.src, !tr.failed
}

// tagReader is a kmsg.TagReader over a byte slice.
type tagReader struct {
	src    []byte
	failed bool
}

func (r *tagReader) Ok() bool { return !r.failed }

func (r *tagReader) Uvarint() uint32 {
	v, n := binary.Uvarint(r.src)
	if n <= 0 || v > 1<<32-1 {
		r.failed, r.src = true, nil
		return 0
	}
	r.src = r.src[n:]
	return uint32(v)
}

func (r *tagReader) Span(n int) []byte {
	if n < 0 || n > len(r.src) {
		r.failed, r.src = true, nil
		return nil
	}
	b := r.src[:n]
	r.src = r.src[n:]
	return b
}
