// Package errs holds the few sentinels of package log that the layers
// below it (segment, index, timingwheel, group) return under their own
// names, and Mark, which makes such a name.
//
// log's sentinels are Strata's one error vocabulary: whatever layer
// returns an error for a condition, errors.Is(err, log.ErrX) holds for it.
// A layer above log aliases or marks log's sentinel directly; a layer below
// cannot import log, so the sentinel is defined here, log exports it
// (log.ErrClosed is errs.ErrClosed), and the layer marks it:
//
//	var ErrClosed = errs.Mark("segment: closed", errs.ErrClosed)
//
// errors.Is(segment.ErrClosed, log.ErrClosed) then holds, and the layer's
// own name and message stay what they were.
package errs

import "errors"

// log's sentinels, defined here so that the layers below log can mark them.
var (
	// ErrClosed is log.ErrClosed.
	ErrClosed = errors.New("log: closed")
	// ErrInvalidConfig is log.ErrInvalidConfig.
	ErrInvalidConfig = errors.New("log: invalid config")
	// ErrInvalidRequest is log.ErrInvalidRequest.
	ErrInvalidRequest = errors.New("log: invalid request")
	// ErrCorrupt is log.ErrCorrupt and batch.ErrCorrupt: data that failed its
	// checks. Its text is the record batch's, where it was first defined.
	ErrCorrupt = errors.New("batch: corrupt record batch")
)

// Mark returns a sentinel whose text is msg and that matches base with
// errors.Is: a layer's own name for one of log's conditions.
func Mark(msg string, base error) error { return &marked{msg: msg, base: base} }

type marked struct {
	msg  string
	base error
}

func (e *marked) Error() string { return e.msg }

// Unwrap returns the sentinel it marks.
func (e *marked) Unwrap() error { return e.base }
