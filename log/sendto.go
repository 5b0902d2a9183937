package log

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/strata-log/strata/vfs"
	"golang.org/x/sys/unix"
)

// SendTo writes whole record batches to conn, from the one holding offset on,
// as many as fit in maxBytes but at least one, all from one segment. It uses
// sendfile(2) from the segment file straight to the socket when conn is a
// TCP or Unix socket and the segment is an operating-system file, and an
// ordinary read and write otherwise (TLS, net.Pipe, the in-memory FS). n is
// the number of bytes written and next the offset to pass to the following
// SendTo. At the end offset it writes nothing and returns next = offset.
// DecodeRecords turns the bytes back into records.
func (p *Partition) SendTo(conn net.Conn, offset int64, maxBytes int) (n, next int64, err error) {
	return p.sendTo(conn, offset, maxBytes, p.HighWatermark())
}

// sendTo is SendTo below maxOffset.
func (p *Partition) sendTo(conn net.Conn, offset int64, maxBytes int, hw int64) (n, next int64, err error) {
	if err := p.checkRange(offset); err != nil {
		return 0, 0, err
	}
	for offset < hw {
		seg := p.segmentFor(offset)
		if seg == nil {
			return 0, 0, p.outOfRange(offset)
		}
		pos, length, nxt, err := seg.Range(offset, maxBytes, hw, true)
		if errors.Is(err, io.EOF) {
			offset = seg.NextOffset()
			seg.Release()
			continue
		}
		if err != nil {
			seg.Release()
			return 0, 0, fmt.Errorf("log: send %s at %d: %w", p, offset, err)
		}
		n, err = sendFile(conn, seg.File(), pos, length)
		seg.Release()
		if err != nil {
			return n, offset, fmt.Errorf("log: send %s at %d: %w", p, offset, err)
		}
		return n, nxt, nil
	}
	return 0, offset, nil
}

// sendFile writes length bytes of f at pos to conn, zero-copy when it can.
func sendFile(conn net.Conn, f vfs.File, pos, length int64) (int64, error) {
	if fd, ok := f.(vfs.Fder); ok {
		switch c := conn.(type) {
		case *net.TCPConn:
			return sendfile(c, int(fd.Fd()), pos, length)
		case *net.UnixConn:
			return sendfile(c, int(fd.Fd()), pos, length)
		}
	}
	return copyFile(conn, f, pos, length)
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

// copyFile is the fallback: read into a buffer, write to conn.
func copyFile(conn net.Conn, f vfs.File, pos, length int64) (int64, error) {
	buf := make([]byte, min(length, 1<<20))
	var written int64
	for written < length {
		chunk := buf[:min(int64(len(buf)), length-written)]
		if _, err := f.ReadAt(chunk, pos+written); err != nil {
			return written, err
		}
		n, err := conn.Write(chunk)
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}
