package log

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
)

// Errors of the replication API of a Partition.
var (
	// ErrInvalidOffset is returned for a negative offset given to
	// TruncateTo, TruncateFullyAndStartAt or SetHighWatermark.
	ErrInvalidOffset = errors.New("log: invalid offset")
	// ErrUnexpectedOffset is returned by AppendAsFollower for batches that
	// do not start at the end offset or do not follow one another (Kafka's
	// UnexpectedAppendOffsetException).
	ErrUnexpectedOffset = errors.New("log: batch does not start at the log end offset")
	// ErrInvalidEpoch is returned for a negative leader epoch, one below the
	// partition's current epoch (SetLeaderEpoch), or batches whose epochs go
	// backwards (AppendAsFollower).
	ErrInvalidEpoch = errors.New("log: invalid leader epoch")
)

// loadEpochs returns the leader-epoch cache.
func (p *Partition) loadEpochs() epochCache { return *p.epochs.Load() }

// storeEpochs writes c to the partition's leader-epoch-checkpoint (temp
// file, fsync, rename, directory fsync) and then publishes it. Holds mu.
func (p *Partition) storeEpochs(c epochCache) error {
	if err := writeCheckpoint(p.fs, filepath.Join(p.dir, epochCheckpointFile), formatEpochCheckpoint(c)); err != nil {
		return fmt.Errorf("log: %s: %w", p, err)
	}
	p.epochs.Store(&c)
	return nil
}

// writable returns the error an operation that changes the partition gets:
// closed, or read-only after a write error. Holds mu.
func (p *Partition) writable() error {
	if p.closed.Load() {
		return p.closedErr()
	}
	return p.err
}

// LeaderEpoch is the epoch that leader appends (Append, AppendBatch) stamp
// on their batches: the latest given to SetLeaderEpoch or seen in a batch
// appended by AppendAsFollower; on open the latest epoch of the cache; 0 if
// none.
func (p *Partition) LeaderEpoch() int32 { return p.epoch.Load() }

// SetLeaderEpoch makes epoch the partition's leader epoch, as a replica
// does on becoming leader: later leader appends carry it, and the cache
// records that it starts at the end offset (durably, before SetLeaderEpoch
// returns). An epoch below the current one is ErrInvalidEpoch and changes
// nothing; the current one changes nothing.
func (p *Partition) SetLeaderEpoch(epoch int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writable(); err != nil {
		return err
	}
	if cur := p.epoch.Load(); epoch < 0 || epoch < cur {
		return fmt.Errorf("log: %s: %w: %d is below the current epoch %d", p, ErrInvalidEpoch, epoch, cur)
	}
	if c, changed := p.loadEpochs().assign(epoch, p.leo.Load()); changed {
		if err := p.storeEpochs(c); err != nil {
			p.failUnlessOutOfFiles(err) // the cache changes only with the file
			return err
		}
	}
	p.epoch.Store(epoch)
	return nil
}

// EpochEntries returns the leader-epoch cache: for each epoch, the offset
// its leader's first record got, both increasing.
func (p *Partition) EpochEntries() []EpochEntry {
	return append([]EpochEntry(nil), p.loadEpochs()...)
}

// EndOffsetForEpoch answers Kafka's OffsetsForLeaderEpoch for this replica:
// the largest epoch at or below epoch that it knows, and the offset where
// that epoch ended (the start of the next epoch, or the end offset for the
// latest). An epoch below the first known one answers (epoch, start of the
// first); UndefinedEpoch, an empty cache or an epoch above the latest answer
// (UndefinedEpoch, UndefinedEpochOffset). A follower truncates to the
// returned offset (if below its end) before fetching from a new leader.
func (p *Partition) EndOffsetForEpoch(epoch int32) (int32, int64) {
	// The cache is read before the end offset: an append that starts a new
	// epoch publishes the cache first, so the latest epoch read here is
	// never ahead of the end offset read after it.
	c := p.loadEpochs()
	return c.endOffsetFor(epoch, p.leo.Load())
}

// SetHighWatermark moves the high watermark forward to hw, capped at the
// end offset, and returns the high watermark after the call. A value at or
// below the current high watermark changes nothing (only a truncation moves
// it back). A move wakes the fetches parked on the partition. A negative hw
// is ErrInvalidOffset.
func (p *Partition) SetHighWatermark(hw int64) (int64, error) {
	if hw < 0 {
		return 0, fmt.Errorf("log: %s: high watermark %d: %w", p, hw, ErrInvalidOffset)
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, p.closedErr()
	}
	hw = min(hw, p.leo.Load())
	cur := p.hw.Load()
	moved := hw > cur
	if moved {
		p.hw.Store(hw)
		p.publishTxnsLocked()
	}
	p.mu.Unlock()
	if moved && p.appended != nil {
		p.appended(p)
	}
	return max(hw, cur), nil
}

// followerBatch is one batch of an AppendAsFollower call.
type followerBatch struct {
	b []byte
	h batch.Header
}

// AppendAsFollower appends record batches that already carry their offsets
// and leader epochs, as a follower copies them from its leader: raw is one
// or more whole batches, the first starting at the end offset and each
// following the one before. Each is checked as Kafka's follower checks
// it: framing, CRC, header fields and MaxMessageBytes (batch.Check), not
// record by record: the leader validated the records when it appended
// them, and the CRC shows these are its bytes, so a follower neither walks
// them nor decompresses a compressed batch again (with lz4 or zstd that
// was most of its CPU). Offsets and epochs are kept as they are. A batch
// with an epoch above the latest of the cache records it (durably, before
// the batch is written); epochs must not go backwards (ErrInvalidEpoch)
// except over epochs that hold no record, which are dropped. It returns the
// first offset and the new end offset. Anything refused changes nothing.
// The high watermark does not move (SetHighWatermark does), except on a
// standalone broker, where it is the end offset.
func (p *Partition) AppendAsFollower(raw []byte) (first, next int64, err error) {
	var bs []followerBatch
	prevEpoch := int32(-1)
	for pos := 0; pos < len(raw); {
		h, err := batch.Check(raw[pos:])
		if err != nil {
			return 0, 0, fmt.Errorf("log: append to %s: batch at byte %d: %w", p, pos, err)
		}
		if h.Size() > p.config().MaxMessageBytes {
			return 0, 0, fmt.Errorf("%s: %w", p, &RecordTooLargeError{Size: h.Size(), Max: p.config().MaxMessageBytes})
		}
		if n := len(bs); n > 0 && h.BaseOffset != bs[n-1].h.NextOffset() {
			return 0, 0, fmt.Errorf("log: append to %s: %w: batch at %d follows one ending at %d", p, ErrUnexpectedOffset, h.BaseOffset, bs[n-1].h.NextOffset())
		}
		if e := h.PartitionLeaderEpoch; e >= 0 {
			if e < prevEpoch {
				return 0, 0, fmt.Errorf("log: append to %s: %w: batch at %d has epoch %d after epoch %d", p, ErrInvalidEpoch, h.BaseOffset, e, prevEpoch)
			}
			prevEpoch = e
		}
		if h.Control() {
			// A marker is replayed into the producer state once written:
			// one that does not parse is refused before anything is.
			if _, _, err := batch.ParseMarker(raw[pos : pos+h.Size()]); err != nil && !errors.Is(err, batch.ErrNotMarker) {
				return 0, 0, fmt.Errorf("log: append to %s: batch at %d: %w", p, h.BaseOffset, err)
			}
		}
		bs = append(bs, followerBatch{b: raw[pos : pos+h.Size()], h: h})
		pos += h.Size()
	}

	p.mu.Lock()
	if err := p.writable(); err != nil {
		p.mu.Unlock()
		return 0, 0, err
	}
	leo := p.leo.Load()
	if len(bs) == 0 {
		p.mu.Unlock()
		return leo, leo, nil
	}
	if bs[0].h.BaseOffset != leo {
		p.mu.Unlock()
		return 0, 0, fmt.Errorf("log: append to %s: %w: batch at %d, end offset %d", p, ErrUnexpectedOffset, bs[0].h.BaseOffset, leo)
	}
	c := p.loadEpochs()
	if e := bs[0].h.PartitionLeaderEpoch; e >= 0 {
		if l, ok := c.latest(); ok && e < l.Epoch {
			// Epochs that start at the end offset hold no record (this
			// replica led them without appending): the new leader's
			// history replaces them.
			trimmed, _ := c.truncateFromEnd(leo)
			if l, ok := trimmed.latest(); ok && e < l.Epoch {
				p.mu.Unlock()
				return 0, 0, fmt.Errorf("log: append to %s: %w: batch at %d has epoch %d, the log is at epoch %d", p, ErrInvalidEpoch, leo, e, l.Epoch)
			}
			if err := p.storeEpochs(trimmed); err != nil {
				p.failUnlessOutOfFiles(err) // the cache changes only with the file
				p.mu.Unlock()
				return 0, 0, err
			}
		}
	}
	for _, fb := range bs {
		if err := p.writeLocked(fb.b, fb.h, nil, false); err != nil {
			p.mu.Unlock()
			return 0, 0, err
		}
		// The leader checked the batch: its producer state follows the
		// log, never refuses it. A marker's abort goes to the .txnindex.
		c, ended, err := p.ps.ReplayBatch(fb.b, fb.h)
		if err == nil {
			err = p.indexAbortLocked(p.active, c, ended)
		} else {
			p.fail(err)
		}
		if err != nil {
			p.publishTxnsLocked()
			p.mu.Unlock()
			return 0, 0, err
		}
		// The leader's epoch is known from here on: leader appends never
		// stamp an older one (which would rewrite the cache's history).
		if e := fb.h.PartitionLeaderEpoch; e > p.epoch.Load() {
			p.epoch.Store(e)
		}
	}
	p.publishTxnsLocked()
	next = p.leo.Load()
	p.mu.Unlock()

	if p.appended != nil {
		p.appended(p)
	}
	if fm := p.config().FlushMessages; fm > 0 && next-p.recoveryPoint.Load() >= fm {
		if err := p.syncTo(next, false); err != nil {
			return 0, 0, err
		}
	}
	return leo, next, nil
}

// TruncateTo removes the records at and after offset, as a follower does
// before fetching from a new leader: the segments after the one holding
// offset, and the batches of that one from the batch holding offset on
// (both indexes too). The log then ends on a batch boundary at or before
// offset. The high watermark, the recovery point and the log start offset
// move back to the new end if they were past it, and the leader-epoch
// cache loses the epochs that start at or after it. The producer state is
// rebuilt at the new end (the newest snapshot at or below it, then the log
// after it; the snapshots above it are deleted). An offset at or past the
// end offset changes no record but still drops epochs that start at the
// end offset (led without a record); one below the first segment is
// TruncateFullyAndStartAt. A negative offset is ErrInvalidOffset.
//
// Crash safety: the cut of the segment holding offset is made durable
// first (indexes, then the .log, each fsynced); the later segments are then
// deleted and the directory fsynced. A crash before the cut leaves the log
// as it was; after it, a log that ends at or before offset: on open, a
// segment that does not follow the one before it ends the log.
func (p *Partition) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("log: truncate %s to %d: %w", p, offset, ErrInvalidOffset)
	}
	p.mu.Lock()
	lowered, err := p.truncateToLocked(offset)
	p.mu.Unlock()
	p.afterTruncate(lowered)
	return err
}

// afterTruncate wakes parked fetches and checkpoints a lowered high
// watermark.
func (p *Partition) afterTruncate(lowered bool) {
	if !lowered {
		return
	}
	if p.hwLowered != nil {
		p.hwLowered()
	}
	if p.appended != nil {
		p.appended(p)
	}
}

// truncateToLocked is TruncateTo; lowered reports whether the end offset
// moved back. Holds mu.
func (p *Partition) truncateToLocked(offset int64) (lowered bool, err error) {
	if err := p.writable(); err != nil {
		return false, err
	}
	leo := p.leo.Load()
	if offset >= leo {
		return false, p.truncateEpochsFromEnd(leo)
	}
	segs := *p.segs.Load()
	if offset < segs[0].BaseOffset() {
		return true, p.truncateFullyLocked(offset)
	}
	k := sort.Search(len(segs), func(i int) bool { return segs[i].BaseOffset() > offset }) - 1
	// A flush in progress must not move the recovery point past the cut.
	p.truncGen.Add(1)
	p.dropTailLocked() // the bytes at its positions may change
	// Readers past the cut get out of range from here on.
	p.leo.Store(offset)
	p.lowerTo(offset)
	next, err := segs[k].TruncateTo(offset, p.config().MaxIndexBytes)
	if err != nil {
		err = fmt.Errorf("log: truncate %s to %d: %w", p, offset, err)
		p.fail(err)
		return true, err
	}
	kept := append([]*segment.Segment(nil), segs[:k+1]...)
	p.segs.Store(&kept)
	p.active = segs[k]
	p.leo.Store(next)
	p.lowerTo(next)
	if k+1 < len(segs) {
		var first error
		for _, s := range segs[k+1:] {
			if err := s.Delete(); err != nil && first == nil {
				first = err
			}
		}
		if err := p.fs.SyncDir(p.dir); err != nil && first == nil {
			first = err
		}
		p.dirDirty.Store(false)
		if first != nil {
			err := fmt.Errorf("log: truncate %s to %d: %w", p, offset, first)
			p.fail(err)
			return true, err
		}
	}
	// The producer state is rebuilt at the new end from a snapshot at or
	// below it and the log after it; the snapshots above it go.
	ps, err := p.loadProducerState(next, nil)
	if err != nil {
		p.fail(err)
		return true, err
	}
	p.ps = ps
	p.publishTxnsLocked()
	p.logger.Info("truncated", "partition", p.String(), "offset", offset, "end", next, "segments deleted", len(segs)-k-1)
	return true, p.truncateEpochsFromEnd(next)
}

// lowerTo moves the high watermark, the recovery point and the log start
// offset back to off if they are past it. Holds mu.
func (p *Partition) lowerTo(off int64) {
	if p.hw.Load() > off {
		p.hw.Store(off)
	}
	if p.recoveryPoint.Load() > off {
		p.recoveryPoint.Store(off)
	}
	if p.start.Load() > off {
		p.start.Store(off)
	}
}

// truncateEpochsFromEnd drops the epochs that start at or after end, and
// checkpoints the cache if that changed it. Holds mu.
func (p *Partition) truncateEpochsFromEnd(end int64) error {
	c, changed := p.loadEpochs().truncateFromEnd(end)
	if !changed {
		return nil
	}
	if err := p.storeEpochs(c); err != nil {
		p.fail(err)
		return err
	}
	return nil
}

// TruncateFullyAndStartAt deletes every record and starts the partition
// empty at offset: end offset, log start offset, high watermark and
// recovery point all become offset, and the leader-epoch cache and the
// producer state (with its snapshots) are cleared.
// A follower does this when the leader's log starts after its own end. A
// negative offset is ErrInvalidOffset.
//
// Crash safety: the cleared cache is checkpointed first, then the segment
// files are removed and the directory fsynced, then the new empty segment
// is created and the directory fsynced again. A crash leaves either the
// old log (whose epochs are rebuilt from its batches on open) or an empty
// one, never part of the old records.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("log: truncate %s fully to %d: %w", p, offset, ErrInvalidOffset)
	}
	p.mu.Lock()
	err := p.writable()
	if err == nil {
		err = p.truncateFullyLocked(offset)
	}
	p.mu.Unlock()
	p.afterTruncate(err == nil)
	return err
}

// truncateFullyLocked is TruncateFullyAndStartAt. Holds mu.
func (p *Partition) truncateFullyLocked(offset int64) error {
	fail := func(err error) error {
		err = fmt.Errorf("log: truncate %s fully to %d: %w", p, offset, err)
		p.fail(err)
		return err
	}
	if err := p.storeEpochs(nil); err != nil {
		return fail(err)
	}
	// No snapshot may outlive the log it describes.
	if err := p.removeAllSnapshots(); err != nil {
		return fail(err)
	}
	p.ps.Reset(offset)
	p.publishTxnsLocked()
	old := *p.segs.Load()
	p.truncGen.Add(1)
	p.dropTailLocked() // the bytes at its positions may change
	p.leo.Store(offset)
	p.start.Store(offset)
	p.hw.Store(offset)
	p.recoveryPoint.Store(offset)
	// The old segments' files go, but the segments stay open and listed
	// until the new one replaces them: a reader never finds a closed
	// segment in the list (and reads nothing: the end offset is offset).
	var first error
	for _, s := range old {
		if err := s.Unlink(); err != nil && first == nil {
			first = err
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return fail(first)
	}
	if err := p.createAt(offset); err != nil {
		return fail(err)
	}
	for _, s := range old {
		s.Close()
	}
	p.dirDirty.Store(false)
	p.needFlush.Store(false)
	p.logger.Info("truncated fully", "partition", p.String(), "start", offset, "segments deleted", len(old))
	return nil
}
