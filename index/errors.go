package index

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/internal/errs"
)

var (
	// ErrIndexFull is returned by an append to an index that has no free slot
	// (for the time index: no free slot but the one kept for the roll). The
	// segment rolls when it sees it.
	ErrIndexFull = errors.New("index: index full")

	// ErrCorruptIndex marks an index file that failed SanityCheck. It is always
	// wrapped with the file name and the reason; test for it with errors.Is.
	// The cure is Reset and a rebuild from the .log.
	ErrCorruptIndex = errs.Mark("index: corrupt index", errs.ErrCorrupt) // matches log.ErrCorrupt

	// ErrInvalidEntry is returned for an entry that may not be appended: an
	// offset not above the last one (offset index) or below it (time index),
	// an offset below the base offset or more than [MaxRelativeOffset] above
	// it, or a position outside [0, [MaxPosition]] or below the last one.
	ErrInvalidEntry = errors.New("index: invalid entry")

	// ErrInvalidArgument is returned for a negative base offset, a maximum
	// size smaller than one entry, or a Resize below the valid entries.
	ErrInvalidArgument = errors.New("index: invalid argument")

	// ErrClosed is returned by any method that changes the index or its file
	// after Close or Delete.
	ErrClosed = errs.Mark("index: closed", errs.ErrClosed) // matches log.ErrClosed
)

// corrupt builds an ErrCorruptIndex that names the file and the reason.
func corrupt(name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorruptIndex, name, fmt.Sprintf(format, args...))
}
