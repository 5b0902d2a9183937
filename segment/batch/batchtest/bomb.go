// Package batchtest builds hostile record batches for tests: decompression
// bombs, small compressed batches whose records inflate to far more than a
// broker should hold. They are built streaming, so that making one costs the
// compressor's memory, not the size it inflates to.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/strata-log/strata/segment/batch"
)

// Timestamp is the create time (ms) of a bomb's record.
const Timestamp = 1_700_000_000_000

// Bomb returns a valid batch (CRC, header and records all check out) of one
// record with a null key and a value of n zero bytes, its records section
// compressed with codec (batch.CompressionGzip ... batch.CompressionZstd):
// with zstd, n = 1000 MiB makes a batch of about 32 KB. Snappy, one raw
// block, inflates at most about 21:1, so its bomb holds the n bytes in
// memory while it is built; the others stream.
func Bomb(codec int, n int64) ([]byte, error) {
	var rec []byte
	body := 1 + 1 + 1 + 1 + varintLen(n) + n + 1 // attributes, ts delta, offset delta, key -1, value length, value, header count
	rec = binary.AppendVarint(rec, body)
	rec = append(rec, 0)                        // attributes
	rec = binary.AppendVarint(rec, 0)           // timestamp delta
	rec = binary.AppendVarint(rec, 0)           // offset delta
	rec = binary.AppendVarint(rec, -1)          // null key
	rec = binary.AppendVarint(rec, n)           // value length
	tail := binary.AppendVarint(nil, 0)         // no headers
	b := make([]byte, batch.HeaderSize, 64<<10) // header, written below
	out := &appendWriter{b: b}
	if err := compressStream(out, codec, rec, n, tail); err != nil {
		return nil, err
	}
	b = out.b
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                   // base offset
	be.PutUint32(b[8:], uint32(len(b)-12))   // length
	be.PutUint32(b[12:], 0xFFFFFFFF)         // partition leader epoch -1
	b[16] = 2                                // magic
	be.PutUint16(b[21:], uint16(codec))      // attributes
	be.PutUint32(b[23:], 0)                  // last offset delta
	be.PutUint64(b[27:], Timestamp)          // base timestamp
	be.PutUint64(b[35:], Timestamp)          // max timestamp
	be.PutUint64(b[43:], 0xFFFFFFFFFFFFFFFF) // producer id -1
	be.PutUint16(b[51:], 0xFFFF)             // producer epoch -1
	be.PutUint32(b[53:], 0xFFFFFFFF)         // base sequence -1
	be.PutUint32(b[57:], 1)                  // one record
	batch.SetCRC(b)
	return b, nil
}

func varintLen(v int64) int64 { return int64(len(binary.AppendVarint(nil, v))) }

// compressStream writes head, n zero bytes and tail compressed with codec.
func compressStream(w io.Writer, codec int, head []byte, n int64, tail []byte) error {
	var (
		zw    io.WriteCloser
		err   error
		plain *bytes.Buffer // snappy: the block, whole
	)
	switch codec {
	case batch.CompressionGzip:
		return gzipMembers(w, head, n, tail)
	case batch.CompressionLz4:
		lw := lz4.NewWriter(w)
		err = lw.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.CompressionLevelOption(lz4.Level9))
		zw = lw
	case batch.CompressionZstd:
		zw, err = zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	case batch.CompressionSnappy:
		plain = bytes.NewBuffer(make([]byte, 0, n+int64(len(head)+len(tail))))
		zw = nopCloser{plain}
	default:
		return fmt.Errorf("batchtest: no bomb for codec %d", codec)
	}
	if err != nil {
		return err
	}
	if _, err := zw.Write(head); err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; {
		k := min(left, int64(len(zeros)))
		if _, err := zw.Write(zeros[:k]); err != nil {
			return err
		}
		left -= k
	}
	if _, err := zw.Write(tail); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if plain != nil {
		_, err = w.Write(s2.EncodeSnappy(nil, plain.Bytes()))
	}
	return err
}

// gzipMembers writes head, n zero bytes and tail as a sequence of gzip
// members (a reader reads them as one stream, as Java's GZIPInputStream
// and Go's gzip.Reader do), each MiB of zeros the same member: compressed
// once, so that a bomb of 1000 MiB takes a second, not five.
func gzipMembers(w io.Writer, head []byte, n int64, tail []byte) error {
	member := func(p []byte) ([]byte, error) {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(p); err != nil {
			return nil, err
		}
		err = zw.Close()
		return buf.Bytes(), err
	}
	const chunk = 1 << 20
	zeros := make([]byte, chunk)
	full, err := member(zeros)
	if err != nil {
		return err
	}
	last, err := member(zeros[:n%chunk])
	if err != nil {
		return err
	}
	first, err := member(head)
	if err != nil {
		return err
	}
	end, err := member(tail)
	if err != nil {
		return err
	}
	parts := [][]byte{first}
	for range n / chunk {
		parts = append(parts, full)
	}
	if n%chunk != 0 {
		parts = append(parts, last)
	}
	for _, p := range append(parts, end) {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
