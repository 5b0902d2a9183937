package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time (user + system) of the calling OS thread.
// Lock the goroutine to its thread (runtime.LockOSThread) around the pair of
// calls that brackets the work.
func threadCPU() time.Duration { return rusage(unix.RUSAGE_THREAD) }

// processCPU returns the CPU time (user + system) of the whole process.
func processCPU() time.Duration { return rusage(unix.RUSAGE_SELF) }

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stopwatch times the measured part of a run: wall time and the process's
// CPU time (user + system, every goroutine and the kernel work they cause).
type stopwatch struct {
	start time.Time
	cpu0  time.Duration
}

func startStopwatch() stopwatch { return stopwatch{cpu0: processCPU(), start: time.Now()} }

// sample is what the stopwatch read for records records of size bytes.
func (w stopwatch) sample(records int64, size int) sample {
	el := time.Since(w.start)
	return sample{Records: records, Bytes: records * int64(size), Elapsed: el, CPU: processCPU() - w.cpu0}
}

// loopback is a TCP connection over 127.0.0.1 whose far end is drained by a
// receiver goroutine into a 1 MiB buffer.
type loopback struct {
	conn *net.TCPConn // the sending end
	done chan result  // the receiver's total, once the sender closed
}

type result struct {
	n   int64
	err error
}

// newLoopback connects a sender to a draining receiver on 127.0.0.1.
func newLoopback() (*loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	acceptErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			acceptErr <- err
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		<-acceptErr
		return nil, err
	}
	var server net.Conn
	select {
	case server = <-accepted:
	case err := <-acceptErr:
		c.Close()
		return nil, err
	}
	lb := &loopback{conn: c.(*net.TCPConn), done: make(chan result, 1)}
	go func() {
		defer server.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			k, err := server.Read(buf)
			n += int64(k)
			if errors.Is(err, io.EOF) {
				lb.done <- result{n: n}
				return
			}
			if err != nil {
				lb.done <- result{n: n, err: err}
				return
			}
		}
	}()
	return lb, nil
}

// finish closes the sending end and returns how many bytes the receiver
// got, once it has them all.
func (lb *loopback) finish() (int64, error) {
	if err := lb.conn.CloseWrite(); err != nil {
		lb.conn.Close()
		<-lb.done
		return 0, err
	}
	r := <-lb.done
	lb.conn.Close()
	return r.n, r.err
}

// abort closes the connection and waits for the receiver.
func (lb *loopback) abort() {
	lb.conn.Close()
	<-lb.done
}

// sendfileChunk is the most one sendfile(2) call may send: 4 MiB, as Go's
// net package does. (One call for a whole large file was often slower here:
// the kernel marks all but its last piece "more to come".)
const sendfileChunk = 4 << 20

// rawSendfile sends length bytes of f from pos to conn with sendfile(2),
// in calls of sendfileChunk: the zero-copy limit.
func rawSendfile(conn *net.TCPConn, f *os.File, pos, length int64) (int64, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	src := int(f.Fd())
	var written int64
	var serr error
	err = rc.Write(func(dst uintptr) bool {
		for written < length {
			off := pos + written
			n, err := unix.Sendfile(int(dst), src, &off, int(min(length-written, sendfileChunk)))
			if n > 0 {
				written += int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
				continue
			case err != nil:
				serr = err
				return true
			case n == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if serr != nil {
		return written, fmt.Errorf("sendfile: %w", serr)
	}
	runtime.KeepAlive(f)
	return written, err
}

// userCopy sends length bytes of f from pos to conn through a 1 MiB buffer
// in user space: pread, then write.
func userCopy(conn net.Conn, f *os.File, pos, length int64) (int64, error) {
	buf := make([]byte, 1<<20)
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

// payload returns n bytes that do not compress to nothing.
func payload(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
