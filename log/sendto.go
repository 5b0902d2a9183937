package log

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/strata-log/strata/internal/nozero"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/vfs"
	"golang.org/x/sys/unix"
)

// SendTo writes whole record batches to conn, from the one holding offset on,
// as many as fit in maxBytes but at least one, none at or past the high
// watermark; they may come from several segments. It is [Partition.Slice]
// and [Batches.WriteTo]: sendfile(2) from the segment files straight to
// the socket when conn is a TCP or Unix socket and the segments are
// operating-system files, an ordinary read and write otherwise (TLS,
// net.Pipe, the in-memory FS). n is the number of bytes written and next
// the offset to pass to the following SendTo. At the high watermark it
// writes nothing and returns next = offset. DecodeRecords turns the bytes
// back into records.
func (p *Partition) SendTo(conn net.Conn, offset int64, maxBytes int) (n, next int64, err error) {
	return p.sendTo(conn, offset, maxBytes, p.HighWatermark())
}

// sendTo is SendTo below maxOffset.
func (p *Partition) sendTo(conn net.Conn, offset int64, maxBytes int, maxOffset int64) (n, next int64, err error) {
	b, err := p.Slice(offset, maxBytes, maxOffset)
	if err != nil {
		return 0, 0, err
	}
	defer b.Release()
	n, err = b.WriteTo(conn)
	if err != nil {
		return n, offset, fmt.Errorf("log: send %s at %d: %w", p, offset, err)
	}
	return n, b.next, nil
}

// ErrReleased is returned by a [Batches] used after its Release.
var ErrReleased = errors.New("log: record batches used after Release")

// Batches is a handle on whole record batches as they are stored (Kafka's
// RecordBatch v2, what DecodeRecords reads): byte ranges of segment files,
// several when a read spans segments ([Partition.Slice], a fetch), or bytes
// in memory ([BatchesOf], what a network client received). It is how a
// server sends records without copying them: WriteTo uses sendfile onto a
// socket.
//
// A handle read from a partition holds its segments (each is
// reference-counted) so that their files stay open, even if retention
// deletes them meanwhile, until Release. Release it exactly once, when done
// with it; the zero Batches is empty and needs none. Do not copy a Batches to
// use both copies. Its methods are not safe for concurrent use.
//
// The bytes are read when WriteTo or Bytes is called, not when the handle is
// made: if the log is truncated below them meanwhile (a follower's
// truncation), they fail with an error rather than return other bytes
// whole.
type Batches struct {
	mem      []byte      // in memory; nil when the batches are in files
	first    fileRange   // most reads are within one segment
	more     []fileRange // the ranges after the first
	n        int         // number of file ranges
	size     int64
	next     int64 // the offset after the last batch (file ranges only)
	released bool
	// tail, when set, is the partition's tail when the handle was made:
	// Bytes takes the batches from it when it holds them (tail.go).
	tail *tailRing
}

// fileRange is [pos, pos+len) of a segment's .log, holding a reference.
type fileRange struct {
	seg      *segment.Segment
	pos, len int64
}

// BatchesOf returns a handle on record batches in memory, b (whole
// batches, as Kafka's Fetch response carries them). It holds nothing;
// Bytes returns b itself.
func BatchesOf(b []byte) Batches { return Batches{mem: b} }

// add appends a range of seg, whose reference the handle takes.
func (b *Batches) add(seg *segment.Segment, pos, length, next int64) {
	r := fileRange{seg: seg, pos: pos, len: length}
	if b.n == 0 {
		b.first = r
	} else {
		b.more = append(b.more, r)
	}
	b.n++
	b.size += length
	b.next = next
}

func (b *Batches) rangeAt(i int) fileRange {
	if i == 0 {
		return b.first
	}
	return b.more[i-1]
}

// Len is the number of bytes of the batches.
func (b *Batches) Len() int64 {
	if b.mem != nil {
		return int64(len(b.mem))
	}
	return b.size
}

// NumRanges is the number of file ranges the batches are in: 0 for batches
// in memory.
func (b *Batches) NumRanges() int { return b.n }

// FileRange returns range i (of NumRanges) of the batches: length bytes of
// f from pos. f stays open until Release; read it with ReadAt only.
func (b *Batches) FileRange(i int) (f vfs.File, pos, length int64) {
	r := b.rangeAt(i)
	return r.seg.File(), r.pos, r.len
}

// WriteTo writes the batches to w (io.WriterTo): with sendfile(2) from the
// segment files when w is a *net.TCPConn or *net.UnixConn and the files
// are operating-system files, with a copy otherwise. It returns the number
// of bytes written.
func (b *Batches) WriteTo(w io.Writer) (int64, error) {
	if b.released {
		return 0, ErrReleased
	}
	if b.mem != nil {
		n, err := w.Write(b.mem)
		return int64(n), err
	}
	var written int64
	for i := range b.n {
		r := b.rangeAt(i)
		n, err := sendFile(w, r.seg.File(), r.pos, r.len)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// Bytes returns the batches' bytes. Batches in memory are returned as they
// are, without a copy; batches in files are read into one new slice, of
// Len bytes, unless the partition still holds them in memory (the latest
// batches of a Producer of this process), which are returned without a
// copy. The slice stays valid after Release; it is to read, not to write
// to: it may be shared.
func (b *Batches) Bytes() ([]byte, error) {
	buf, _, err := b.bytes()
	return buf, err
}

// bytes is Bytes, with the tail's batches the bytes are if they are the
// tail's (in order; nil if not): batches this process built and
// checksummed, which never left its memory (tail.go).
func (b *Batches) bytes() (buf []byte, tail []tailBatch, err error) {
	if b.released {
		return nil, nil, ErrReleased
	}
	if b.mem != nil || b.n == 0 {
		return b.mem, nil, nil
	}
	if b.tail != nil {
		if buf, tail, ok := b.tail.bytesOf(b); ok {
			return buf, tail, nil
		}
	}
	// Every byte is read into below (or the buffer is dropped): not
	// cleared first, a tenth of a 1 MiB Read's CPU.
	buf = nozero.Make(int(b.size))[:b.size]
	at := int64(0)
	for i := range b.n {
		r := b.rangeAt(i)
		if err := readFull(r.seg.File(), buf[at:at+r.len], r.pos); err != nil {
			return nil, nil, fmt.Errorf("log: read batches: %w", err)
		}
		at += r.len
	}
	return buf, nil, nil
}

// readFull reads len(p) bytes of f at pos: a short read is
// io.ErrUnexpectedEOF (the file was truncated under the handle).
func readFull(f vfs.File, p []byte, pos int64) error {
	n, err := f.ReadAt(p, pos)
	switch {
	case n == len(p):
		return nil
	case err == nil || errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	}
	return err
}

// Release drops the handle's references to its segments. Releasing again,
// or releasing the zero Batches, does nothing.
func (b *Batches) Release() {
	if b.released {
		return
	}
	b.released = true
	for i := range b.n {
		b.rangeAt(i).seg.Release()
	}
	b.first, b.more, b.mem, b.tail = fileRange{}, nil, nil, nil
}

// sendFile writes length bytes of f at pos to w, zero-copy when it can.
func sendFile(w io.Writer, f vfs.File, pos, length int64) (int64, error) {
	if fd, ok := f.(vfs.Fder); ok {
		switch c := w.(type) {
		case *net.TCPConn:
			return sendfile(c, int(fd.Fd()), pos, length)
		case *net.UnixConn:
			return sendfile(c, int(fd.Fd()), pos, length)
		}
	}
	return copyFile(w, f, pos, length)
}

// sendfile loops sendfile(2) on the socket's descriptor, waiting for the
// socket to be writable through the runtime's poller (so deadlines hold).
func sendfile(c syscall.Conn, src int, pos, length int64) (int64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var serr error
	err = rc.Write(func(dst uintptr) bool {
		for written < length {
			chunk := int(min(length-written, 1<<30))
			off := pos + written
			n, err := unix.Sendfile(int(dst), src, &off, chunk)
			if n > 0 {
				written += int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until writable
			case err == unix.EINTR:
				continue
			case err != nil:
				serr = err
				return true
			case n == 0:
				serr = io.ErrUnexpectedEOF // the file is shorter than its segment says
				return true
			}
		}
		return true
	})
	if serr != nil {
		return written, fmt.Errorf("sendfile: %w", serr)
	}
	return written, err
}

// copyBufs recycles copyFile's buffers: a server copying under TLS does it
// for every partition of every fetch.
var copyBufs = sync.Pool{New: func() any {
	b := make([]byte, 256<<10)
	return &b
}}

// copyFile is the fallback: read into a buffer, write to w.
func copyFile(w io.Writer, f vfs.File, pos, length int64) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var written int64
	for written < length {
		chunk := buf[:min(int64(len(buf)), length-written)]
		if err := readFull(f, chunk, pos+written); err != nil {
			return written, err
		}
		n, err := w.Write(chunk)
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}
