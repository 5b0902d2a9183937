package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// exitInterrupted is the exit code after SIGINT or SIGTERM (128 + SIGINT),
// once the command has stopped cleanly.
const exitInterrupted = 130

// errInterrupted says a command stopped early on SIGINT or SIGTERM, after
// flushing what it had and closing the data dir cleanly.
var errInterrupted = errors.New("interrupted")

// interruptible returns a context that SIGINT and SIGTERM cancel, and the
// function that releases the signals.
func interruptible() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// line is one line of input, or the error that ended the input.
type line struct {
	text []byte // without its newline (and a CR before it)
	err  error  // io.EOF at the end
}

// readLines reads r line by line on a goroutine of its own and sends the
// lines on the channel it returns, ending with one that carries the error
// (io.EOF at the end of the input), so that the caller can stop waiting for
// input on a signal. Closing quit ends the goroutine once its pending read
// returns. A read of a pipe or a terminal cannot be interrupted: a command
// that stops on a signal while stdin is silent returns with that one read
// still blocked, and the process exits under it.
func readLines(r io.Reader, quit <-chan struct{}) <-chan line {
	ch := make(chan line)
	go func() {
		send := func(l line) bool {
			select {
			case ch <- l:
				return true
			case <-quit:
				return false
			}
		}
		in := bufio.NewReaderSize(r, 64<<10)
		for {
			text, err := in.ReadBytes('\n') // err != nil: text does not end with '\n'
			if len(text) > 0 && !send(line{text: text[:len(text)-len(lineEnd(text))]}) {
				return
			}
			if err != nil {
				send(line{err: err})
				return
			}
		}
	}()
	return ch
}

// lineEnd returns the "\n" or "\r\n" that ends text, if any.
func lineEnd(text []byte) []byte {
	n := len(text)
	switch {
	case n >= 2 && text[n-2] == '\r' && text[n-1] == '\n':
		return text[n-2:]
	case n >= 1 && text[n-1] == '\n':
		return text[n-1:]
	}
	return nil
}
