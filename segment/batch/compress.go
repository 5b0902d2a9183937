package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codec ids: attribute bits 0-2 of a batch, Kafka's numbering.
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLz4    = 3
	CompressionZstd   = 4
)

// maxInflated bounds the decompressed records section of one batch whatever
// the caller's limit. A batch is at most 2 GiB on the wire; its records could
// be larger, but a payload that inflates past 1 GiB is refused as corrupt by
// Validate (recovery, the CLI's verify) and is the most any limit allows.
const maxInflated = 1 << 30

// DefaultMaxDecompressed is the limit on the decompressed records section of
// one batch that Decompress, Recompress, Records, Decode and a Filter with
// no Limit apply, and the default of a broker's (log.Config's
// MaxDecompressedBytes): 128 MiB, 128 times Kafka's default
// max.message.bytes. Decompression streams into the limit and stops as soon
// as it is passed (ErrTooLarge), so a decompression bomb (a 32 KB zstd
// payload of 1000 MiB of zeros) costs at most the limit in memory and in
// decoding time, not what it would inflate to.
const DefaultMaxDecompressed = 128 << 20

// zstdMinWindow is the smallest window a zstd decoder accepts whatever the
// limit: the 8 MiB every zstd decoder should support (RFC 8878), so that a
// payload from a producer's streaming encoder, which declares its window
// whatever the frame holds, decodes under a small limit too.
const zstdMinWindow = 8 << 20

// inflateLimit is limit as DecompressLimit and its kin apply it: 0 or less
// is DefaultMaxDecompressed, and none is above maxInflated.
func inflateLimit(limit int) int {
	if limit <= 0 {
		return DefaultMaxDecompressed
	}
	return min(limit, maxInflated)
}

// inflateError is the error for records of codec that decompress past
// limit: ErrTooLarge, or ErrCorrupt past maxInflated (no batch is that large).
func inflateError(codec, limit int) error {
	if limit >= maxInflated {
		return corruptf("%s payload inflates to more than %d bytes", codecName(codec), maxInflated)
	}
	return fmt.Errorf("%w: %s records inflate past %d bytes", ErrTooLarge, codecName(codec), limit)
}

// ValidCompression reports whether codec is one of Kafka's five codec ids.
func ValidCompression(codec int) bool { return codec >= CompressionNone && codec <= CompressionZstd }

// xerialMagic starts a snappy payload in the xerial (snappy-java) framing
// that Kafka's Java producer writes: the 8-byte magic, then a version and a
// minimum compatible version (int32 each), then chunks of a big-endian int32
// length and a raw snappy block. kgo and sarama write one raw snappy block
// instead; readers accept both, as kgo and sarama do.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

// compress appends to dst the records section src compressed with codec.
func compress(dst []byte, codec int, src []byte) ([]byte, error) {
	switch codec {
	case CompressionGzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		buf := appendWriter{b: dst}
		w.Reset(&buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("batch: gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("batch: gzip: %w", err)
		}
		return buf.b, nil
	case CompressionSnappy:
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("batch: snappy: %d bytes is too large for one block", len(src))
		}
		l := len(dst)
		dst = grow(dst, n)
		out := s2.EncodeSnappy(dst[l:l+n], src)
		return dst[:l+len(out)], nil
	case CompressionLz4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		buf := appendWriter{b: dst}
		w.Reset(&buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("batch: lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("batch: lz4: %w", err)
		}
		return buf.b, nil
	case CompressionZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("batch: unknown compression codec %d", codec)
}

// compressor returns a pooled writer that compresses with codec (gzip, lz4
// or zstd) what is written to it into w, and the function that gives it
// back to its pool once closed.
func compressor(codec int, w io.Writer) (io.WriteCloser, func()) {
	switch codec {
	case CompressionGzip:
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(w)
		return zw, func() { gzipWriters.Put(zw) }
	case CompressionLz4:
		zw := lz4Writers.Get().(*lz4.Writer)
		zw.Reset(w)
		return zw, func() { lz4Writers.Put(zw) }
	}
	zw := zstdStreams.Get().(*zstd.Encoder)
	zw.Reset(w)
	return zw, func() { zw.Reset(nil); zstdStreams.Put(zw) }
}

// grow returns b with room for n more bytes.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	g := make([]byte, len(b), len(b)+n+len(b)/4)
	copy(g, b)
	return g
}

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Pools of encoders and decoders: a zstd decoder costs hundreds of KiB and a
// gzip writer about as much, so they are made once and reused. None of them
// runs a goroutine (concurrency 1), so one dropped by a pool leaks nothing.
var (
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return w
	}}
	lz4Writers = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// Kafka's Java client writes 64 KiB blocks; the content checksum
		// is on, block checksums off (its KafkaLZ4BlockOutputStream too).
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1), lz4.ChecksumOption(true))
		return w
	}}
	zstdEncoders = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic("batch: zstd encoder options: " + err.Error()) // constant options: cannot fail
		}
		return e
	}}
	// zstdStreams compress streams (RecompressLimit): a window of 2 MiB,
	// as zstd-jni's level 3 that Kafka's Java producer uses, rather than
	// the 8 MiB a streaming encoder would otherwise keep.
	zstdStreams = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true), zstd.WithWindowSize(2<<20))
		if err != nil {
			panic("batch: zstd encoder options: " + err.Error()) // constant options: cannot fail
		}
		return e
	}}
	inflaters = sync.Pool{New: func() any { return new(inflater) }}
)

// An inflater turns a compressed records section into a stream of its
// decompressed bytes. It keeps one decoder per codec once made, so a pooled
// inflater reuses them. Not safe for concurrent use.
type inflater struct {
	src   sliceReader
	gz    *gzip.Reader
	lz    *lz4.Reader
	zd    *zstd.Decoder
	zdMax uint64 // zd's WithDecoderMaxMemory
	xr    xerialReader
	block []byte // snappy: the decoded raw block
}

func getInflater() *inflater { return inflaters.Get().(*inflater) }

// release drops the references to the payload and returns f to the pool.
func (f *inflater) release() {
	f.src.b = nil
	f.xr.src = nil
	if f.lz != nil {
		f.lz.Reset(nil)
	}
	if f.zd != nil {
		_ = f.zd.Reset(nil)
	}
	if cap(f.block) > 4<<20 { // keep the pool's memory small after a large batch
		f.block = nil
	}
	if cap(f.xr.buf) > 4<<20 {
		f.xr.buf = nil
	}
	inflaters.Put(f)
}

// open starts decompressing payload with codec, for a reader that stops
// at limit bytes (inflateLimit applied): the decoders allocate no more than
// that for it (a zstd window, a snappy block), and a block that says it
// holds more is ErrTooLarge (inflateError) before it is decoded. The reader
// itself does not count: its caller stops at limit. open returns either a
// reader of the decompressed bytes or, for a raw snappy block (not
// streamable), the decoded bytes themselves. Other errors wrap ErrCorrupt.
func (f *inflater) open(codec int, payload []byte, limit int) (io.Reader, []byte, error) {
	f.src = sliceReader{b: payload}
	switch codec {
	case CompressionGzip:
		var err error
		if f.gz == nil {
			f.gz, err = gzip.NewReader(&f.src)
		} else {
			err = f.gz.Reset(&f.src)
		}
		if err != nil {
			return nil, nil, corruptf("gzip: %v", err)
		}
		return f.gz, nil, nil
	case CompressionSnappy:
		if len(payload) >= xerialHeaderLen && bytes.HasPrefix(payload, xerialMagic) {
			f.xr.reset(payload[xerialHeaderLen:], limit)
			return &f.xr, nil, nil
		}
		n, err := s2.DecodedLen(payload)
		if err != nil {
			return nil, nil, corruptf("snappy: %v", err)
		}
		if n > snappyMaxDecoded(len(payload)) {
			return nil, nil, corruptf("snappy: a block of %d bytes cannot inflate to the %d it claims", len(payload), n)
		}
		if n > limit {
			return nil, nil, inflateError(codec, limit)
		}
		if cap(f.block) < n || f.block == nil {
			f.block = make([]byte, max(n, 64))
		}
		out, err := s2.Decode(f.block[:n], payload)
		if err != nil {
			return nil, nil, corruptf("snappy: %v", err)
		}
		return nil, f.block[:len(out)], nil // never nil: nil means a reader
	case CompressionLz4:
		if f.lz == nil {
			f.lz = lz4.NewReader(nil)
		}
		f.lz.Reset(lz4Lenient(&f.src, payload))
		return f.lz, nil, nil
	case CompressionZstd:
		// f.src is not a *bytes.Buffer: the decoder streams it block by
		// block instead of decoding the whole payload into one buffer.
		// Streaming, the decoder's memory limit is its window's.
		if err := f.zstdReset(&f.src, limit); err != nil {
			return nil, nil, corruptf("zstd: %v", err)
		}
		return f.zd, nil, nil
	}
	return nil, nil, corruptf("unknown compression codec %d", codec)
}

// zstdReset makes f's zstd decoder if it has none yet and resets it to read
// r with a window of limit bytes at most (its memory: the caller counts the
// output), or zstdMinWindow when that is more. Options are reset only when
// the limit changed: a reset with options allocates.
func (f *inflater) zstdReset(r io.Reader, limit int) error {
	mem := uint64(max(limit, zstdMinWindow))
	if f.zd == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(mem), zstd.WithDecoderLowmem(true))
		if err != nil {
			return fmt.Errorf("batch: zstd decoder options: %w", err)
		}
		f.zd, f.zdMax = d, mem
	}
	if f.zdMax != mem {
		f.zdMax = mem
		return f.zd.ResetWithOptions(r, zstd.WithDecoderMaxMemory(mem))
	}
	return f.zd.Reset(r)
}

// snappyMaxDecoded bounds what n bytes of snappy block can decode to: a copy
// element of 2 bytes yields at most 11, one of 3 or 5 bytes at most 64. A
// block whose header claims more is corrupt, found before its buffer is
// allocated.
func snappyMaxDecoded(n int) int { return min(32*n+64, maxInflated) }

// sliceReader reads a byte slice. Unlike bytes.Reader it has no Len method,
// so zstd does not take it for a buffer to decode in one piece.
type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// codecError turns an error of a decompressing reader into ErrCorrupt.
func codecError(codec int, err error) error {
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	return corruptf("%s payload: %v", codecName(codec), err)
}

func codecName(codec int) string {
	switch codec {
	case CompressionNone:
		return "uncompressed"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLz4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec %d", codec)
}
