package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestMark(t *testing.T) {
	m := Mark("segment: closed", ErrClosed)
	if m.Error() != "segment: closed" {
		t.Errorf("text %q, want the mark's own", m.Error())
	}
	wrapped := fmt.Errorf("read: %w", m)
	if !errors.Is(wrapped, ErrClosed) || !errors.Is(wrapped, m) {
		t.Errorf("%v matches Closed %v, its mark %v; want both", wrapped, errors.Is(wrapped, ErrClosed), errors.Is(wrapped, m))
	}
	if errors.Is(ErrClosed, m) || errors.Is(m, ErrInvalidConfig) || errors.Is(Mark("x", ErrClosed), m) {
		t.Error("a mark matches only itself and what it marks")
	}
}
