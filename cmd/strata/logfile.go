package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/strata-log/strata/segment/batch"
)

// maxBatchBytes bounds the size of a batch the readers accept: a larger
// length is taken as damage, not read (the log package's recovery uses the
// same bound).
const maxBatchBytes = 256 << 20

// chunkBytes is how much of a .log file one read takes.
const chunkBytes = 1 << 20

// logFile reads the batches of a .log file one after another, in large
// chunks, without trusting anything but the 12-byte framing of each batch
// (batch.PeekSize). It never writes.
type logFile struct {
	f      *os.File
	size   int64  // the file's size when it was opened
	buf    []byte // bytes [bufPos, bufPos+len(buf)) of the file
	bufPos int64
	pos    int64 // position of the next batch
}

// errFraming wraps an error that stops the walk of a .log: the next batch's
// length cannot be trusted, so nothing after it can be found.
type framingError struct {
	pos int64
	err error
}

func (e *framingError) Error() string { return fmt.Sprintf("batch at byte %d: %v", e.pos, e.err) }
func (e *framingError) Unwrap() error { return e.err }

func openLogFile(path string) (*logFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &logFile{f: f, size: st.Size()}, nil
}

func (l *logFile) Close() error { return l.f.Close() }

// next returns the position and bytes of the next batch, valid until the
// following call. It returns io.EOF at the end of the file and a
// *framingError (wrapping batch.ErrShort for a torn tail, batch.ErrCorrupt
// for a length that cannot be right) when the walk cannot go on.
func (l *logFile) next() (int64, []byte, error) {
	pos := l.pos
	if pos >= l.size {
		return pos, nil, io.EOF
	}
	head, err := l.bytes(pos, min(12, l.size-pos))
	if err != nil {
		return pos, nil, err
	}
	n, err := batch.PeekSize(head)
	if err == nil && n > maxBatchBytes {
		err = fmt.Errorf("%w: batch length %d is above the %d-byte limit", batch.ErrCorrupt, n, maxBatchBytes)
	}
	if err == nil && int64(n) > l.size-pos {
		err = fmt.Errorf("%w: the batch needs %d bytes, the file has %d left (a torn tail)", batch.ErrShort, n, l.size-pos)
	}
	if err != nil {
		return pos, nil, &framingError{pos, err}
	}
	b, err := l.bytes(pos, int64(n))
	if err != nil {
		return pos, nil, err
	}
	l.pos = pos + int64(n)
	return pos, b, nil
}

// bytes returns n bytes of the file at pos, reading a new chunk when the
// buffer does not hold them.
func (l *logFile) bytes(pos, n int64) ([]byte, error) {
	if pos >= l.bufPos && pos+n <= l.bufPos+int64(len(l.buf)) {
		off := pos - l.bufPos
		return l.buf[off : off+n : off+n], nil
	}
	want := min(max(n, chunkBytes), l.size-pos)
	if int64(cap(l.buf)) < want {
		l.buf = make([]byte, want)
	}
	l.buf = l.buf[:want]
	got, err := l.f.ReadAt(l.buf, pos)
	if int64(got) < want {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%s: file shrank while being read", l.f.Name())
		}
		l.buf = l.buf[:0]
		return nil, err
	}
	l.bufPos = pos
	return l.buf[:n:n], nil
}
