package segment

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/strata-log/strata/vfs"
)

// Sizes of the index entries, as package index writes them.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

// OpenSealed opens a sealed segment of a log that was closed cleanly, as
// Kafka's LazyIndex does, without keeping any of its files open: its size,
// next offset and largest timestamp come from the .log's size, the last
// entries of its indexes and a walk of the batch headers after them, each
// file opened, read and closed in turn. Its files are opened by the first
// reader that needs them, which also gives the indexes the sanity check
// Open gives them (rebuilding them from the .log if they fail it), and may
// be closed again by the Config's Cache.
//
// If that quick look finds anything amiss (an index missing or of a size
// that is not whole entries, a tail that does not parse), OpenSealed opens
// the segment as Open does, recovering it if need be, and seals it; it
// reports what recovery truncated.
func OpenSealed(fs vfs.FS, dir string, base int64, cfg Config, maxBatchBytes int, now time.Time) (s *Segment, truncated int64, err error) {
	cfg = cfg.withDefaults()
	s = newSegment(fs, dir, base, cfg, now)
	if err := s.peek(); err == nil {
		s.sealed.Store(true)
		return s, 0, nil
	}
	s, truncated, err = Open(fs, dir, base, cfg, false, maxBatchBytes, now)
	if err != nil {
		return nil, 0, err
	}
	if s.recovered {
		err = s.Seal()
	} else {
		s.MarkSealed()
	}
	if err != nil {
		s.Close()
		return nil, 0, err
	}
	return s, truncated, nil
}

// peek sets the state of a sealed segment from its files without keeping
// them open (OpenSealed).
func (s *Segment) peek() error {
	fi, err := s.fs.Stat(s.path(".log"))
	if err != nil {
		return err
	}
	size := fi.Size()
	oi, err := s.fs.Open(s.path(".index"))
	if err != nil {
		return err
	}
	defer oi.Close()
	oiSize, err := statSize(oi)
	if err != nil {
		return err
	}
	ti, err := s.fs.Open(s.path(".timeindex"))
	if err != nil {
		return err
	}
	defer ti.Close()
	tiSize, err := statSize(ti)
	if err != nil {
		return err
	}
	if oiSize%offsetEntrySize != 0 || tiSize%timeEntrySize != 0 {
		return fmt.Errorf("segment: index sizes %d and %d are not whole entries", oiSize, tiSize)
	}
	// The time index's last entry: the largest timestamp (a sealed
	// segment's last entry holds the segment's), and its offset.
	maxTs, offOfMax := int64(-1), s.base
	if tiSize > 0 {
		var e [timeEntrySize]byte
		if _, err := ti.ReadAt(e[:], tiSize-timeEntrySize); err != nil {
			return err
		}
		maxTs = int64(binary.BigEndian.Uint64(e[:]))
		offOfMax = s.base + int64(binary.BigEndian.Uint32(e[8:]))
	}
	// Walk the batches from the indexed one that holds that offset, or
	// from the last indexed one if that comes first.
	n := oiSize / offsetEntrySize
	entry := func(i int64) (rel, pos int64, err error) {
		var e [offsetEntrySize]byte
		if _, err := oi.ReadAt(e[:], i*offsetEntrySize); err != nil {
			return 0, 0, err
		}
		return int64(binary.BigEndian.Uint32(e[:])), int64(binary.BigEndian.Uint32(e[4:])), nil
	}
	start := int64(0)
	if n > 0 {
		// The largest entry whose offset is at most offOfMax.
		lo, hi := int64(-1), n-1 // entry lo is at most offOfMax (-1: none)
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			rel, _, err := entry(mid)
			if err != nil {
				return err
			}
			if s.base+rel <= offOfMax {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo >= 0 {
			if _, start, err = entry(lo); err != nil {
				return err
			}
			if start >= size {
				return fmt.Errorf("segment: index position %d past the %d-byte log", start, size)
			}
		}
	}
	log, err := s.fs.Open(s.path(".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	next, maxTs, offOfMax, err := walkHeaders(log, start, size, s.base, maxTs, offOfMax)
	if err != nil {
		return err
	}
	if tiSize > 0 && (offOfMax < s.base || offOfMax >= next || maxTs < 0) {
		return fmt.Errorf("segment: time index entry (%d, %d) outside the segment", maxTs, offOfMax)
	}
	s.size.Store(size)
	s.next.Store(next)
	s.maxTs.Store(maxTs)
	s.offsetOfMaxTs = offOfMax
	return nil
}

func statSize(f vfs.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
