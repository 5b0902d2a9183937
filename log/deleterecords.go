package log

import (
	"fmt"

	"github.com/strata-log/strata/segment"
)

// DeleteRecordsBefore moves the log start offset to offset (Kafka's
// DeleteRecords; -1 means the high watermark), so that the records below it
// can no longer be read (a read there gets an *OffsetOutOfRangeError, and
// ListOffset's earliest is offset), and deletes the segments wholly below
// it. It returns the log start offset after the call, Kafka's low
// watermark: an offset at or below the current start changes nothing. An
// offset above the high watermark is an *OffsetOutOfRangeError, one below
// -1 ErrInvalidOffset; neither changes anything.
//
// Crash safety: the new start is written to the log-start-offset
// checkpoint (fsynced) before DeleteRecordsBefore returns and before any
// segment file is removed, so a crash at any point either keeps the old
// start with every segment, or has the new start, which Open applies to
// whatever segments are left (removing those wholly below it).
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	if offset < -1 {
		return 0, fmt.Errorf("log: delete records of %s before %d: %w", p, offset, ErrInvalidOffset)
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, p.closedErr()
	}
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return 0, err
	}
	hw := p.hw.Load()
	if offset == -1 {
		offset = hw
	}
	if offset > hw {
		p.mu.Unlock()
		return 0, p.outOfRange(offset)
	}
	if offset <= p.start.Load() {
		start := p.start.Load()
		p.mu.Unlock()
		return start, nil
	}
	segs := *p.segs.Load()
	k := 0 // segs[k] holds offset (or is the active segment)
	for k < len(segs)-1 && segs[k+1].BaseOffset() <= offset {
		k++
	}
	kept := append([]*segment.Segment(nil), segs[k:]...)
	p.start.Store(offset)
	p.segs.Store(&kept)
	var first error
	if c, changed := p.loadEpochs().truncateFromStart(offset); changed {
		first = p.storeEpochs(c)
	}
	if err := p.removeSnapshotsBelow(kept[0].BaseOffset()); err != nil && first == nil {
		first = err
	}
	p.mu.Unlock()

	// The new start is durable before any file goes (and before the caller
	// is told).
	if p.checkpoint != nil {
		if err := p.checkpoint(); err != nil {
			return offset, fmt.Errorf("log: delete records of %s: %w", p, err)
		}
	}
	for _, s := range segs[:k] {
		if err := s.Delete(); err != nil && first == nil {
			first = err
		}
	}
	if k > 0 {
		if err := p.fs.SyncDir(p.dir); err != nil && first == nil {
			first = fmt.Errorf("log: sync dir %s: %w", p.dir, err)
		}
	}
	p.logger.Info("deleted records", "partition", p.String(), "segments", k, "start", offset)
	return offset, first
}
