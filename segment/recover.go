package segment

import (
	"errors"
	"fmt"
	"math"

	"github.com/strata-log/strata/segment/batch"
)

// recoverBufSize is how much of the .log recovery reads at a time.
const recoverBufSize = 1 << 20

// Recover scans the whole .log, validating every batch — framing, CRC, and
// offsets that increase and fit the segment — and rebuilds both indexes from
// it. Its .txnindex is emptied: the caller fills it again
// (AppendAbortedTxn), replaying the segment's markers through the
// producer state. The file is truncated at the first torn or corrupt batch; everything
// before it is kept. It returns the number of bytes truncated. Batches larger
// than maxBatchBytes (when > 0) count as corrupt.
func (s *Segment) Recover(maxBatchBytes int) (truncated int64, err error) {
	f, err := s.hold()
	if err != nil {
		return 0, err
	}
	defer s.Release()
	fi, err := f.log.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment: recover %s: %w", s.path(".log"), err)
	}
	size := fi.Size()
	oi, ti, err := s.indexes(f)
	if err != nil {
		return 0, err
	}
	if err := oi.Reset(); err != nil {
		return 0, fmt.Errorf("segment: recover: %w", err)
	}
	if err := ti.Reset(); err != nil {
		return 0, fmt.Errorf("segment: recover: %w", err)
	}
	if err := s.resetTxnIndex(); err != nil {
		return 0, fmt.Errorf("segment: recover: %w", err)
	}
	s.cuts.Add(1)
	s.recent.Store(nil) // appends record the batches after what is kept
	s.maxTs.Store(-1)
	s.offsetOfMaxTs, s.bytesSinceIndex, s.rollingTs = s.base, 0, -1

	var (
		buf      = make([]byte, recoverBufSize)
		bufStart int64 // file position of buf[0]
		bufLen   int   // valid bytes in buf
		pos      int64
		next     = s.base
	)
	// fill makes sure buf holds [pos, pos+n) of the file; false if the file
	// is shorter than that.
	fill := func(n int) (bool, error) {
		if pos+int64(n) > size {
			return false, nil
		}
		if pos >= bufStart && pos+int64(n) <= bufStart+int64(bufLen) {
			return true, nil
		}
		if n > len(buf) {
			buf = make([]byte, n)
		}
		want := int64(len(buf))
		if size-pos < want {
			want = size - pos
		}
		if _, err := f.log.ReadAt(buf[:want], pos); err != nil {
			return false, err
		}
		bufStart, bufLen = pos, int(want)
		return true, nil
	}
	for pos < size {
		ok, err := fill(12)
		if err != nil {
			return 0, fmt.Errorf("segment: recover %s at %d: %w", s.path(".log"), pos, err)
		}
		if !ok {
			break
		}
		n, err := batch.PeekSize(buf[pos-bufStart:])
		if err != nil || (maxBatchBytes > 0 && n > maxBatchBytes) {
			break
		}
		if ok, err = fill(n); err != nil {
			return 0, fmt.Errorf("segment: recover %s at %d: %w", s.path(".log"), pos, err)
		} else if !ok {
			break
		}
		b := buf[pos-bufStart : pos-bufStart+int64(n)]
		h, err := batch.Validate(b)
		if err != nil {
			if errors.Is(err, batch.ErrCorrupt) || errors.Is(err, batch.ErrShort) {
				break
			}
			return 0, fmt.Errorf("segment: recover %s at %d: %w", s.path(".log"), pos, err)
		}
		if h.BaseOffset < next || h.LastOffset()-s.base > math.MaxInt32 {
			break
		}
		if err := s.index(f, h, pos); err != nil {
			return 0, err
		}
		if s.rollingTs < 0 {
			s.rollingTs = h.MaxTimestamp
		}
		next = h.NextOffset()
		pos += int64(n)
	}
	if pos < size {
		// The cut must be durable before anything is appended after it:
		// otherwise a second crash could bring the torn tail back in the
		// middle of the log.
		if err := f.log.Truncate(pos); err != nil {
			return 0, fmt.Errorf("segment: truncate %s to %d: %w", s.path(".log"), pos, err)
		}
		if err := f.log.Sync(); err != nil {
			return 0, fmt.Errorf("segment: sync %s: %w", s.path(".log"), err)
		}
	}
	s.size.Store(pos)
	s.next.Store(next)
	return size - pos, nil
}
