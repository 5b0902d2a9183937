package segment

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// Suffixes of the files of a segment written by the log cleaner, Kafka's:
// a segment is written under .cleaned names (discarded if a crash finds it),
// renamed to .swap once durable (from then on the swap is completed, never
// undone), and renamed to its final names when installed.
const (
	CleanedSuffix = ".cleaned"
	SwapSuffix    = ".swap"
)

// cleanedBufSize is how much a Cleaned buffers before it writes.
const cleanedBufSize = 1 << 20

// Cleaned is a segment being written by the log cleaner: the batches it
// keeps of a group of sealed segments, with their original offsets, so with
// gaps between them. Its files carry CleanedSuffix until Commit.
type Cleaned struct {
	s   *Segment
	buf []byte
	pos int64 // file position of buf[0]
}

// CreateCleaned creates an empty cleaned segment with base offset base in
// dir, removing what an earlier attempt left under the same names. It
// buffers its writes in buf (reused; allocated if smaller than 1 MiB), which
// Buffer returns for the next one.
func CreateCleaned(fs vfs.FS, dir string, base int64, cfg Config, now time.Time, buf []byte) (*Cleaned, error) {
	s, err := createSuffixed(fs, dir, base, cfg, now, CleanedSuffix)
	if err != nil {
		return nil, err
	}
	if cap(buf) < cleanedBufSize {
		buf = make([]byte, 0, cleanedBufSize)
	}
	return &Cleaned{s: s, buf: buf[:0]}, nil
}

// Buffer returns the write buffer, for the next CreateCleaned.
func (c *Cleaned) Buffer() []byte { return c.buf[:0] }

// Append adds a whole batch, which must start after the last one appended
// (gaps are expected) and stay within the offsets a segment can index.
func (c *Cleaned) Append(b []byte, h batch.Header) error {
	s := c.s
	if h.BaseOffset < s.next.Load() {
		return fmt.Errorf("%w: cleaned batch at %d, segment next %d", ErrOffsetMismatch, h.BaseOffset, s.next.Load())
	}
	if h.LastOffset()-s.base > math.MaxInt32 {
		return fmt.Errorf("segment: cleaned batch ends at %d, beyond the offsets segment %d can index", h.LastOffset(), s.base)
	}
	if len(c.buf) > 0 && len(c.buf)+len(b) > cleanedBufSize {
		if err := c.flush(); err != nil {
			return err
		}
	}
	if err := s.index(s.f.Load(), h, c.pos+int64(len(c.buf))); err != nil {
		return err
	}
	if s.rollingTs < 0 {
		s.rollingTs = h.MaxTimestamp
	}
	c.buf = append(c.buf, b...)
	s.next.Store(h.NextOffset())
	return nil
}

func (c *Cleaned) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	if _, err := c.s.f.Load().log.WriteAt(c.buf, c.pos); err != nil {
		return fmt.Errorf("segment: write %s: %w", c.s.path(".log"), err)
	}
	c.pos += int64(len(c.buf))
	c.buf = c.buf[:0]
	return nil
}

// AppendAbortedTxn adds the .txnindex entry of a transaction whose ABORT
// marker the cleaned segment keeps (Kafka's cleaner rewrites the index of
// what it cleans). Entries come in the order of their markers.
func (c *Cleaned) AppendAbortedTxn(t index.AbortedTxn) error {
	return c.s.AppendAbortedTxn(t)
}

// Size is the number of bytes appended.
func (c *Cleaned) Size() int64 { return c.pos + int64(len(c.buf)) }

// NextOffset is the offset after the last batch appended (the base offset
// if none).
func (c *Cleaned) NextOffset() int64 { return c.s.next.Load() }

// Commit writes what is buffered, seals the segment and makes its .log and
// indexes durable, then renames its files from .cleaned to .swap, the .log
// last, and syncs the directory: from then on Open completes the swap. It
// returns the segment, readable, its files still under .swap names until
// Install. On error the cleaned files are removed.
func (c *Cleaned) Commit() (*Segment, error) {
	s := c.s
	err := c.flush()
	if err == nil {
		s.size.Store(c.pos)
		err = s.Seal()
	}
	if err == nil {
		err = s.Sync()
	}
	if err == nil {
		err = s.FlushIndexes()
	}
	// The renames and the new suffix change the names the files are
	// opened by: no one opens them meanwhile. The .txnindex, made durable
	// by Sync, exists only if an entry was appended; it is closed, to be
	// opened again by its new name.
	s.closeTxnIndex()
	s.fmu.Lock()
	for _, ext := range []string{".index", ".timeindex", ".txnindex", ".log"} {
		if err != nil {
			break
		}
		from := s.path(ext)
		if ext == ".txnindex" {
			if _, serr := s.fs.Stat(from); isNotExist(serr) {
				continue
			}
		}
		if err = s.fs.Rename(from, filepath.Join(s.dir, Name(s.base, ext)+SwapSuffix)); err != nil {
			err = fmt.Errorf("segment: rename %s: %w", from, err)
		}
	}
	if err == nil {
		sfx := SwapSuffix
		s.suffix.Store(&sfx)
	}
	s.fmu.Unlock()
	if err == nil {
		if err = s.fs.SyncDir(s.dir); err != nil {
			err = fmt.Errorf("segment: sync dir %s: %w", s.dir, err)
		}
	}
	if err != nil {
		c.Abort()
		return nil, err
	}
	return s, nil
}

// Abort closes the cleaned segment and removes its files.
func (c *Cleaned) Abort() {
	c.s.Close()
	for _, ext := range []string{".log", ".index", ".timeindex", ".txnindex"} {
		for _, sfx := range []string{CleanedSuffix, SwapSuffix} {
			c.s.fs.Remove(filepath.Join(c.s.dir, Name(c.s.base, ext)+sfx))
		}
	}
}

// Install renames the files of a committed cleaned segment from .swap to
// their final names, replacing those of the segment with the same base
// offset (readers holding that one keep its open files), indexes first and
// the .log last. A cleaned segment without a .txnindex removes the one of
// the segment it replaces, before its .log is renamed: a crash in between
// completes the swap at open, which rebuilds the indexes. The caller syncs
// the directory, and then deletes the other segments the cleaned one
// replaces.
func (s *Segment) Install() error {
	if sfx := s.suffix.Load(); sfx == nil || *sfx != SwapSuffix {
		return fmt.Errorf("segment: install %s: not a committed cleaned segment", s.path(".log"))
	}
	s.closeTxnIndex() // opened again by its final name
	// The renames change the names the files are opened by.
	s.fmu.Lock()
	defer s.fmu.Unlock()
	for _, ext := range []string{".index", ".timeindex", ".txnindex", ".log"} {
		from, to := s.path(ext), filepath.Join(s.dir, Name(s.base, ext))
		if ext == ".txnindex" {
			if _, err := s.fs.Stat(from); isNotExist(err) {
				if err := s.fs.Remove(to); err != nil && !isNotExist(err) {
					return fmt.Errorf("segment: remove %s: %w", to, err)
				}
				continue
			}
		}
		if err := s.fs.Rename(from, to); err != nil {
			return fmt.Errorf("segment: rename %s: %w", from, err)
		}
	}
	s.suffix.Store(nil)
	return nil
}

// ReadInto reads into buf, reusing it, the whole batches from the one that
// holds offset (or the first after it) on: as many as fit in cap(buf), and
// at least one (buf is grown for a larger one). It returns io.EOF when no
// batch in the segment ends at or after offset. The cleaner reads with it
// without allocating a buffer per read.
func (s *Segment) ReadInto(buf []byte, offset int64) ([]byte, error) {
	f, err := s.files()
	if err != nil {
		return buf[:0], err
	}
	end := s.size.Load()
	sp, _, _, err := s.locate(f, offset, end)
	if err != nil {
		return buf[:0], err
	}
	pos := sp.pos
	n := min(end-pos, int64(cap(buf)))
	n = max(n, sp.size)
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := f.log.ReadAt(buf, pos); err != nil {
		return buf[:0], fmt.Errorf("segment: read %s at %d: %w", s.path(".log"), pos, err)
	}
	k, _ := wholeBatches(buf, NoBound)
	return buf[:k], nil
}

// Discard closes a committed cleaned segment that is not to be installed
// and removes its .swap files. The caller syncs the directory.
func (s *Segment) Discard() {
	s.Close()
	for _, ext := range []string{".log", ".index", ".timeindex", ".txnindex"} {
		s.fs.Remove(filepath.Join(s.dir, Name(s.base, ext)+SwapSuffix))
	}
}
