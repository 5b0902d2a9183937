package batch

import "fmt"

// Batches calls fn for each batch in b, a buffer of concatenated batches such as a
// segment read or a fetch returns, after validating it in full (as Validate does).
// batch is exactly the batch's bytes (its capacity ends with it) and h its header.
//
// Batches stops at the first batch that is not whole and valid. Its error wraps the
// batch's byte position in b and ErrShort (the buffer ends inside the batch: a torn tail,
// or a read that cut a batch), ErrCorrupt, or ErrCompressed. Callers that read a buffer
// that may end mid-batch can ignore ErrShort: every batch before it has been passed to
// fn. An error from fn stops Batches and is returned unchanged.
func Batches(b []byte, fn func(batch []byte, h Header) error) error {
	for pos := 0; pos < len(b); {
		rest := b[pos:]
		size, err := PeekSize(rest)
		if err == nil && len(rest) < size {
			err = shortf("%d bytes, the batch needs %d", len(rest), size)
		}
		var h Header
		if err == nil {
			h, err = Validate(rest[:size])
		}
		if err != nil {
			return fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if err := fn(rest[:size:size], h); err != nil {
			return err
		}
		pos += size
	}
	return nil
}
