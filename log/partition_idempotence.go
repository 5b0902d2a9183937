package log

import (
	"errors"
	"fmt"
	"github.com/strata-log/strata/vfs"
	"time"

	"github.com/strata-log/strata/segment"
)

// The partition's side of the idempotent producer (Kafka's
// UnifiedLog.analyzeAndValidateProducerState and the ProducerStateManager's
// life cycle). The partition's ProducerState is guarded by the writer lock:
//
//   - leader appends (AppendBatch): a batch with a producer id is checked
//     first; a duplicate of one of its producer's last 5 batches appends
//     nothing and is answered with the offsets it got the first time, once
//     those are as durable as a new append would be; a refused batch
//     (ErrOutOfOrderSequence, ErrUnknownProducerID, ErrProducerFenced,
//     ErrInvalidSequence) changes nothing. Every appended batch updates the
//     state, so its EndOffset is the log end offset.
//   - follower appends (AppendAsFollower) replay the leader's batches, never
//     checked: the leader's log is the truth.
//   - a roll writes <offset>.snapshot at the new segment's base offset, left
//     to the next flush to fsync (as Kafka flushes it asynchronously); a
//     clean close writes one at the end offset, durably.
//   - open loads the newest usable snapshot at or below the end offset and
//     replays the batch headers after it, then expires the producers silent
//     for TopicConfig.ProducerIDExpiration; the Store's background loop
//     expires them every StoreConfig.ProducerIDExpirationCheckInterval.
//   - TruncateTo rebuilds the state the same way at the new end (the
//     snapshots above it are deleted); TruncateFullyAndStartAt deletes every
//     snapshot and starts empty; retention deletes the snapshots below the
//     new log start offset (the producers stay: KIP-360).

// ErrTransactionsUnsupported: a client's batch is a control batch (a
// transaction marker). Only a transaction coordinator appends markers
// (Partition.AppendMarker); Kafka refuses them from producers as well.
var ErrTransactionsUnsupported = errors.New("log: control batches are not accepted from producers")

// checkProducerLocked checks a client's batch against the producer state.
// It returns the producer's entry for updateProducerLocked, and for a
// duplicate the offsets it got the first time. Holds mu.
func (p *Partition) checkProducerLocked(pb ProducerBatch) (*producerEntry, AppendCheck, error) {
	e, c, err := p.ps.check(pb)
	if err != nil {
		return nil, c, fmt.Errorf("log: append to %s: %w", p, err)
	}
	return e, c, nil
}

// answerDuplicate answers a duplicate batch with the offsets it got the
// first time. The first append may still be waiting for its fsync: with
// FlushMessages, the answer waits for the same durability a new append of
// the batch would have waited for.
func (p *Partition) answerDuplicate(c AppendCheck) (base, next int64, err error) {
	next = c.LastOffset + 1
	if fm := p.config().FlushMessages; fm > 0 && next-p.recoveryPoint.Load() >= fm {
		if err := p.syncTo(next, false); err != nil {
			return 0, 0, err
		}
	}
	return c.FirstOffset, next, nil
}

// producerStateEnd brings the state's EndOffset to the end offset before a
// snapshot: every batch below it was passed to the state, but a log whose
// last batches were compacted away ends past the last batch seen. Holds mu.
func (p *Partition) producerStateEnd() {
	p.ps.endOffset = max(p.ps.endOffset, p.leo.Load())
}

// snapshotOnRoll writes the producer state at the end offset, the base of
// the segment a roll is about to create, without waiting for the disk: the
// next flush (which the roll wakes the background loop for) fsyncs the file
// before the directory. A crash before that leaves the file absent, empty or
// torn; its CRC fails and open falls back to an older snapshot or the log.
// Holds mu.
func (p *Partition) snapshotOnRoll() error {
	p.producerStateEnd()
	name := producerSnapshotName(p.dir, p.ps.EndOffset())
	f, err := p.fs.Create(name)
	if err != nil {
		return fmt.Errorf("log: write producer snapshot %s: %w", name, err)
	}
	_, err = f.Write(encodeProducerSnapshot(p.ps))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("log: write producer snapshot %s: %w", name, err)
	}
	// The file is closed and opened again to be fsynced: a partition that
	// rolls thousands of times between flushes holds no descriptor for it.
	p.snapMu.Lock()
	p.snapUnsynced = append(p.snapUnsynced, name)
	p.snapMu.Unlock()
	return nil
}

// syncSnapshots fsyncs the snapshot files written by rolls since the last
// flush (opening each again: fsync makes a file's data durable whichever
// descriptor it is called on). A file deleted since (retention,
// truncation) is skipped. When it returns without error, every snapshot
// written before the call is durable, even those a concurrent call took;
// on error the files not synced stay for the next call.
func (p *Partition) syncSnapshots() error {
	p.snapSyncMu.Lock()
	defer p.snapSyncMu.Unlock()
	p.snapMu.Lock()
	names := p.snapUnsynced
	p.snapUnsynced = nil
	p.snapMu.Unlock()
	for i, name := range names {
		if err := syncFile(p.fs, name); err != nil {
			p.snapMu.Lock()
			p.snapUnsynced = append(names[i:], p.snapUnsynced...)
			p.snapMu.Unlock()
			return fmt.Errorf("log: sync producer snapshot: %w", err)
		}
	}
	return nil
}

// syncFile fsyncs the file name; one that is gone is not an error.
func syncFile(fs vfs.FS, name string) error {
	f, err := fs.Open(name)
	if isNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// snapshotOnClose writes the producer state at the end offset, durably, so
// that the next open replays nothing. A log that never held a record has
// nothing to replay and no producer: it gets no snapshot (Kafka's
// takeSnapshot skips an offset not past the last snapshot's, 0 at first).
// Holds mu.
func (p *Partition) snapshotOnClose() error {
	if p.leo.Load() == 0 {
		return nil
	}
	p.producerStateEnd()
	_, err := WriteProducerSnapshot(p.fs, p.dir, p.ps)
	return err
}

// loadProducerState rebuilds the producer state of a log of [start, end)
// from the newest usable snapshot at or below end and the batches after it
// (Kafka's loadProducerState), reading the transaction markers; the
// snapshots above end are deleted. The segments in rebuild (open's
// recovered ones, whose .txnindex Recover emptied) get their .txnindex
// entries again (rebuildTxnIndexes). It does not expire producers. At
// open, or holding mu.
func (p *Partition) loadProducerState(end int64, rebuild map[*segment.Segment]bool) (*ProducerState, error) {
	ps, err := loadProducerStateDir(p.fs, p.dir, p.start.Load(), end)
	if err != nil {
		return nil, fmt.Errorf("log: %s: load producer state: %w", p, err)
	}
	from := ps.EndOffset()
	if err := p.rebuildTxnIndexes(from, rebuild); err != nil {
		return nil, err
	}
	if err := p.replaySegments(ps, from, end, rebuild); err != nil {
		return nil, err
	}
	if ps.EndOffset() < end {
		// The last batches were compacted away: the state reflects the log
		// up to end all the same.
		ps.endOffset = end
	}
	return ps, nil
}

// replaySegments replays the batches of [from, end) into ps; the aborts in
// the segments of rebuild go to their .txnindex.
func (p *Partition) replaySegments(ps *ProducerState, from, end int64, rebuild map[*segment.Segment]bool) error {
	for _, s := range *p.segs.Load() {
		if s.NextOffset() <= from {
			continue
		}
		if s.BaseOffset() >= end {
			break
		}
		if err := p.replaySegment(ps, s, end, rebuild[s]); err != nil {
			return fmt.Errorf("log: %s: rebuild producer state from segment %d: %w", p, s.BaseOffset(), err)
		}
	}
	return nil
}

// openProducerState loads the producer state at open and expires the
// producers silent too long.
func (p *Partition) openProducerState(now time.Time) error {
	rebuild := map[*segment.Segment]bool{}
	for _, s := range *p.segs.Load() {
		if s.Recovered() {
			rebuild[s] = true
		}
	}
	ps, err := p.loadProducerState(p.leo.Load(), rebuild)
	if err != nil {
		return err
	}
	if n := ps.Expire(now, p.config().ProducerIDExpiration); n > 0 {
		p.logger.Info("expired producers", "partition", p.String(), "producers", n)
	}
	p.ps = ps
	p.publishTxnsLocked()
	return nil
}

// removeSnapshotsBelow removes the snapshots below offset, the new log start
// offset, without syncing the directory (the caller does). The one at the
// start is kept: it holds the producers of the deleted segments, and is made
// durable first (a roll wrote it without waiting for the disk), so that a
// crash cannot leave its predecessors deleted and it torn. Holds mu.
func (p *Partition) removeSnapshotsBelow(offset int64) error {
	if err := p.syncSnapshots(); err != nil {
		return err
	}
	offs, err := listProducerSnapshots(p.fs, p.dir)
	if err != nil {
		return err
	}
	for _, off := range offs {
		if off >= offset {
			break
		}
		if err := p.fs.Remove(producerSnapshotName(p.dir, off)); err != nil && !isNotExist(err) {
			return fmt.Errorf("log: delete producer snapshot: %w", err)
		}
	}
	return nil
}

// removeAllSnapshots removes every snapshot and syncs the directory: for a
// log deleted whole (TruncateFullyAndStartAt). Holds mu.
func (p *Partition) removeAllSnapshots() error {
	return deleteProducerSnapshots(p.fs, p.dir, func(int64) bool { return true })
}

// expireProducers forgets the producers silent for ProducerIDExpiration
// and returns how many.
func (p *Partition) expireProducers(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return 0
	}
	return p.ps.Expire(now, p.config().ProducerIDExpiration)
}

// ProducerLastOffsets returns, for every producer the partition knows, the
// last offset of its last batch: what a log cleaner must keep (the batch
// ending at that offset) so that the producer's state survives a rebuild
// from the log (Kafka's lastRecordsOfActiveProducers).
func (p *Partition) ProducerLastOffsets() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]int64, len(p.ps.producers))
	for id, e := range p.ps.producers {
		if e.n > 0 {
			out[id] = e.last.LastOffset
		}
	}
	return out
}

// producers returns a copy of the producer state, for tests.
func (p *Partition) producers() *ProducerState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ps.Clone()
}
