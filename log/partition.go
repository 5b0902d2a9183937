package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-log/strata/clock"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// Partition is one partition of a topic: an ordered list of segments, the
// last of which (the active segment) takes appends.
//
// One writer at a time: Append, roll, retention and Close hold mu. Readers
// never take it: the segment list, the end offset, the log start offset and
// the recovery point are published atomically, and sealed segments are
// immutable.
type Partition struct {
	topic string
	id    int
	dir   string
	fs    vfs.FS
	// conf is the topic's configuration, replaced whole by setConfig (an
	// AlterTopicConfig): read it through config().
	conf   atomic.Pointer[TopicConfig]
	segCfg segment.Config
	logger *slog.Logger
	clock  clock.Clock
	// metrics, when set, is told of every flush (nil: none).
	metrics metrics.Hooks
	// maxInflate bounds a compressed batch's records decompressed
	// (StoreConfig.MaxDecompressedBytes): compression.go.
	maxInflate int
	// wake asks the broker's background loop to flush sealed segments.
	wake func()
	// appended, when set, is told about every append and every move of the
	// high watermark (long polls).
	appended func(*Partition)
	// hwLowered, when set, is called (without mu) after a truncation moved
	// the high watermark back, to checkpoint it at once.
	hwLowered func()
	// checkpoint, when set, writes the checkpoints of the store now (a
	// DeleteRecordsBefore makes its new log start offset durable with it).
	checkpoint func() error
	// hwFollowsEnd: the high watermark is the end offset (a standalone
	// broker, the only replica).
	hwFollowsEnd bool
	// ephemeral: of an ephemeral store, whose data dir no open reads
	// again: a new partition writes no leader-epoch checkpoint.
	ephemeral bool

	mu     sync.Mutex // the writer lock
	active *segment.Segment
	err    error // sticky: a failed write makes the partition read-only
	closed atomic.Bool

	segs          atomic.Pointer[[]*segment.Segment] // sorted by base offset
	leo           atomic.Int64                       // log end offset
	start         atomic.Int64                       // log start offset
	recoveryPoint atomic.Int64                       // offsets below it are durable
	hw            atomic.Int64                       // high watermark, in [start, leo]
	epoch         atomic.Int32                       // leader epoch stamped on leader appends
	epochs        atomic.Pointer[epochCache]         // leader-epoch cache; changed under mu
	lastFlush     atomic.Int64                       // unix ns of the last flush
	needFlush     atomic.Bool                        // a sealed segment awaits its fsync
	dirDirty      atomic.Bool                        // a segment was created since the last directory fsync
	bytesIn       atomic.Int64                       // bytes appended since open: wakes parked fetches
	truncGen      atomic.Int64                       // truncations since open; changed under mu
	// ps is the idempotent producers' state (partition_idempotence.go),
	// reflecting the log up to the end offset. Guarded by mu.
	ps *ProducerState
	// unstable holds the transactions that hold the last stable offset
	// back (partition_txn.go); nil when none. Changed under mu.
	unstable atomic.Pointer[[]unstableTxn]

	// snapUnsynced holds the names of the producer snapshots written by
	// rolls, for the next flush to fsync.
	snapMu       sync.Mutex
	snapUnsynced []string
	snapSyncMu   sync.Mutex // held while syncing them

	// Group commit: one fsync at a time; appenders that need one wait for
	// the fsync in progress and, if it did not cover them, share the next.
	syncMu  sync.Mutex
	syncCnd *sync.Cond
	syncing bool

	// tail holds the last batches the trusted path appended, for reads of
	// the end of the log (tail.go); nil: none. Changed under mu. tails is
	// the Store's budget for them (nil: no tail is kept).
	tail  atomic.Pointer[tailRing]
	tails *tailBudget
}

// Topic is the name of the partition's topic.
func (p *Partition) Topic() string { return p.topic }

// ID is the partition's number within its topic.
func (p *Partition) ID() int { return p.id }

// StartOffset is the log start offset: the first offset that can be read.
func (p *Partition) StartOffset() int64 { return p.start.Load() }

// EndOffset is the log end offset (LEO): the offset of the next record.
func (p *Partition) EndOffset() int64 { return p.leo.Load() }

// HighWatermark is the offset up to which records are committed, in
// [StartOffset, EndOffset]. On a standalone broker it is the end offset; a
// cluster member moves it with SetHighWatermark.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// RecoveryPoint is the offset below which every record is known durable
// (fsynced).
func (p *Partition) RecoveryPoint() int64 { return p.recoveryPoint.Load() }

// Size is the number of bytes in the partition's segments.
func (p *Partition) Size() int64 {
	var n int64
	for _, s := range *p.segs.Load() {
		n += s.Size()
	}
	return n
}

// Segments is the number of segments.
func (p *Partition) Segments() int { return len(*p.segs.Load()) }

// config is the partition's current configuration.
func (p *Partition) config() *TopicConfig { return p.conf.Load() }

func (p *Partition) String() string { return fmt.Sprintf("%s-%d", p.topic, p.id) }

var builders = sync.Pool{New: func() any { return new(batch.Builder) }}

// pooledBuilder takes a Builder from the pool, set to codec: a Builder
// keeps its codec across Reset, so one from the pool would otherwise have
// its last user's (put it back with builders.Put).
func pooledBuilder(codec int) *batch.Builder {
	bd := builders.Get().(*batch.Builder)
	bd.SetCompression(codec)
	return bd
}

// Append appends the records as one record batch and returns the offset of
// the first. Record Topic, Partition and Offset fields are ignored; a zero
// Timestamp means now. With FlushMessages set, Append returns once the
// records are fsynced. A batch larger than MaxMessageBytes gets
// ErrRecordTooLarge and changes nothing. Appending no records does nothing
// and returns the end offset.
func (p *Partition) Append(recs ...Record) (baseOffset int64, err error) {
	if len(recs) == 0 {
		if p.closed.Load() {
			return 0, p.closedErr()
		}
		return p.EndOffset(), nil
	}
	bd := pooledBuilder(p.config().Compression.appendCodec())
	defer builders.Put(bd)
	now := p.clock.Now().UnixMilli()
	// Where the batch will most likely go (the end of the active segment,
	// the last of segs), so that the builder can align it with its place in
	// the page cache; a concurrent append or a roll only makes the copy
	// slower. No lock: segs is published atomically.
	segs := *p.segs.Load()
	bd.ResetAt(timestampMs(recs[0].Timestamp, now), segs[len(segs)-1].Size())
	for i := range recs {
		r := &recs[i]
		bd.Append(timestampMs(r.Timestamp, now), r.Key, r.Value, r.Headers)
	}
	b := bd.Bytes()
	if len(b) > p.config().MaxMessageBytes {
		return 0, fmt.Errorf("%s: %w", p, &RecordTooLargeError{Size: len(b), Max: p.config().MaxMessageBytes})
	}
	// The batch was just built here: its header is all that needs reading.
	h, err := batch.ParseHeader(b)
	if err != nil {
		return 0, fmt.Errorf("log: append to %s: %w", p, err)
	}
	base, _, err := p.appendValid(b, h, nil, false)
	return base, err
}

// AppendBatch appends one encoded record batch (as a producer sends it): it
// is validated, given offsets from the end of the log, and written. It
// returns the batch's first and next offsets. b is modified in place (its base
// offset). b must be exactly one batch: anything else is refused and changes
// nothing.
//
// A batch with a producer id goes through the idempotent producer's checks
// (ProducerState.Check): a duplicate of one of the producer's last 5 batches
// appends nothing and returns the offsets it got the first time; a gap in
// its sequence is ErrOutOfOrderSequence, an unknown producer with a sequence
// other than 0 ErrUnknownProducerID, an older epoch ErrProducerFenced, each
// changing nothing. A transactional batch (partition_txn.go) belongs to its
// producer's transaction, opened by the first one; one without a producer
// id, or a producer's non-transactional batch while its transaction is
// open, is ErrInvalidTxnState. Control batches are
// ErrTransactionsUnsupported: only the coordinator appends markers
// (AppendMarker).
func (p *Partition) AppendBatch(b []byte) (base, next int64, err error) {
	if len(b) > p.config().MaxMessageBytes {
		return 0, 0, fmt.Errorf("%s: %w", p, &RecordTooLargeError{Size: len(b), Max: p.config().MaxMessageBytes})
	}
	b, h, err := p.producedBatch(b) // validated; recompressed if the topic says so
	if err != nil {
		return 0, 0, fmt.Errorf("log: append to %s: %w", p, err)
	}
	if h.Size() != len(b) {
		return 0, 0, fmt.Errorf("log: append to %s: %w: %d bytes after the batch", p, ErrCorrupt, len(b)-h.Size())
	}
	if h.Control() {
		return 0, 0, fmt.Errorf("log: append to %s: %w", p, ErrTransactionsUnsupported)
	}
	if h.Transactional() && h.ProducerID < 0 {
		return 0, 0, fmt.Errorf("log: append to %s: %w: transactional batch without a producer id", p, ErrInvalidTxnState)
	}
	return p.appendValidCopy(b, h, nil, false, true)
}

// appendValid appends a batch known to be valid, with header h. With keep
// set, b is given up by the caller and may stay in the partition's tail
// (tail.go), with spans, where its records are (nil if unknown).
func (p *Partition) appendValid(b []byte, h batch.Header, spans []batch.Span, keep bool) (base, next int64, err error) {
	return p.appendValidCopy(b, h, spans, keep, false)
}

// appendValidCopy is appendValid where, with copySmall, a batch the caller
// keeps (not keep) of tailCopyMax bytes or fewer goes to the tail as a
// copy (tail.go).
func (p *Partition) appendValidCopy(b []byte, h batch.Header, spans []batch.Span, keep, copySmall bool) (base, next int64, err error) {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, 0, p.closedErr()
	}
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return 0, 0, err
	}
	pb := ProducerBatchOf(h)
	var pe *producerEntry
	if pb.Idempotent() {
		var c AppendCheck
		pe, c, err = p.checkProducerLocked(pb)
		if err != nil || c.Duplicate {
			p.mu.Unlock()
			if err != nil {
				return 0, 0, err
			}
			return p.answerDuplicate(c)
		}
	}
	base = p.leo.Load()
	batch.SetBaseOffset(b, base)
	h.BaseOffset = base
	epoch := p.epoch.Load()
	batch.SetPartitionLeaderEpoch(b, epoch)
	h.PartitionLeaderEpoch = epoch
	w := b
	if copySmall && !keep && p.tails != nil && len(b) <= tailCopyMax {
		w, keep = bytes.Clone(b), true
	}
	if err := p.writeLocked(w, h, spans, keep); err != nil {
		p.mu.Unlock()
		return 0, 0, err
	}
	p.ps.update(pe, pb, base)
	p.publishTxnsLocked()
	next = h.NextOffset()
	p.mu.Unlock()

	if p.appended != nil {
		p.appended(p)
	}
	if fm := p.config().FlushMessages; fm > 0 && next-p.recoveryPoint.Load() >= fm {
		if err := p.syncTo(next, false); err != nil {
			return 0, 0, err
		}
	}
	return base, next, nil
}

// writeLocked writes one valid batch whose offsets and epoch are set at the
// end of the log: it records a new epoch in the cache (durably, before the
// batch), rolls if needed, appends, and publishes the new end offset. A
// failure makes the partition read-only. With keep, b may stay in the
// tail (tail.go), with spans, else the tail is emptied. Holds mu.
func (p *Partition) writeLocked(b []byte, h batch.Header, spans []batch.Span, keep bool) error {
	if c, changed := p.loadEpochs().assign(h.PartitionLeaderEpoch, h.BaseOffset); changed {
		if err := p.storeEpochs(c); err != nil {
			// The cache changes only once the file is replaced.
			p.failUnlessOutOfFiles(err)
			return err
		}
	}
	now := p.clock.Now()
	if p.active.ShouldRoll(len(b), h.LastOffset(), h.MaxTimestamp, p.config().SegmentBytes, p.config().SegmentTime, now) {
		if err := p.roll(now); err != nil {
			p.failUnlessOutOfFiles(err)
			return err
		}
	}
	pos := p.active.Size()
	if err := p.active.Append(b, h); err != nil {
		p.dropTailLocked()
		p.fail(err)
		return err
	}
	if !keep || !p.keepTailLocked(p.active, pos, b, spans) {
		p.dropTailLocked()
	}
	next := h.NextOffset()
	p.leo.Store(next)
	if p.hwFollowsEnd {
		p.hw.Store(next)
	}
	p.bytesIn.Add(int64(len(b)))
	return nil
}

// failUnlessOutOfFiles makes the partition read-only after a write error,
// unless the error is the process (or the system) running out of file
// descriptors where nothing was written yet (opening or creating a file):
// that error goes to the caller alone, and the next write tries again once
// descriptors are free. Holds mu.
func (p *Partition) failUnlessOutOfFiles(err error) {
	if !outOfFiles(err) {
		p.fail(err)
	}
}

// outOfFiles reports whether err is EMFILE or ENFILE: too many open files.
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// fail makes the partition read-only after a write error. Holds mu.
func (p *Partition) fail(err error) {
	if p.err == nil {
		p.err = fmt.Errorf("log: %s is read-only after a write error (reopen the broker): %w", p, err)
		p.logger.Error("partition failed", "partition", p.String(), "err", err)
	}
}

func (p *Partition) closedErr() error { return fmt.Errorf("log: %s: %w", p, ErrClosed) }

// roll seals the active segment, writes the producer state snapshot at the
// end offset and starts a new segment there. Nothing here waits for the
// disk: the sealed segment's fsyncs, the snapshot's and the directory's are
// left to the next flush, which the background loop is woken for, and which
// any append that needs durability waits for. Holds mu.
//
// The files are created first, so that running out of file descriptors
// (or any error opening them) leaves the partition as it was: the new
// segment's files are removed and the active segment is not sealed.
func (p *Partition) roll(now time.Time) error {
	seg, err := segment.Create(p.fs, p.dir, p.leo.Load(), p.segCfg, now)
	if err != nil {
		return err
	}
	if err := p.snapshotOnRoll(); err != nil {
		seg.Delete()
		return err
	}
	if err := p.active.Seal(); err != nil {
		seg.Delete()
		return err
	}
	old := *p.segs.Load()
	segs := make([]*segment.Segment, len(old), len(old)+1)
	copy(segs, old)
	segs = append(segs, seg)
	p.segs.Store(&segs)
	p.active = seg
	p.dirDirty.Store(true)
	p.needFlush.Store(true)
	if p.wake != nil {
		p.wake()
	}
	return nil
}

// Roll seals the active segment and starts a new one, unless the active
// segment is empty.
func (p *Partition) Roll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return p.closedErr()
	}
	if p.err != nil {
		return p.err
	}
	if p.active.Size() == 0 {
		return nil
	}
	if err := p.roll(p.clock.Now()); err != nil {
		p.failUnlessOutOfFiles(err)
		return err
	}
	return nil
}

// syncTo returns once every offset below target is durable, sharing fsyncs
// with concurrent callers (group commit). With force it runs at least one
// flush of its own even if target is already covered (to make a roll
// durable).
func (p *Partition) syncTo(target int64, force bool) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	// A truncation may cut the log below target: what it removed needs no
	// fsync.
	for force || p.recoveryPoint.Load() < min(target, p.leo.Load()) {
		if p.closed.Load() {
			return p.closedErr()
		}
		if p.syncing {
			p.syncCnd.Wait()
			continue
		}
		p.syncing = true
		p.syncMu.Unlock()
		err := p.timedFlush()
		p.syncMu.Lock()
		p.syncing = false
		p.syncCnd.Broadcast()
		if err != nil {
			return err
		}
		force = false
	}
	return nil
}

// Flush makes every record appended so far durable.
func (p *Partition) Flush() error {
	if p.closed.Load() {
		return p.closedErr()
	}
	return p.syncTo(p.leo.Load(), p.needFlush.Load())
}

// flush makes durable everything appended before it started: the directory
// (if segments were created), the indexes of sealed segments, and the .log
// of every segment holding records at or above the recovery point; then it
// moves the recovery point to the end offset it read first. Only syncTo
// calls it, so flushes do not overlap.
func (p *Partition) flush() error {
	gen := p.truncGen.Load()
	// The end offset under mu: an append publishes it before it finishes
	// under mu (AppendMarker adds the .txnindex entry of an ABORT after the
	// marker is in the log), and the recovery point must not pass a marker
	// whose entry this flush cannot see yet: recovery would not rebuild it,
	// and a later flush skips the segment as below the recovery point.
	p.mu.Lock()
	upTo := p.leo.Load()
	p.mu.Unlock()
	rp := p.recoveryPoint.Load()
	p.needFlush.Store(false)
	fail := func(err error) error {
		if outOfFiles(err) {
			// Opening the directory or a closed segment's files: nothing
			// was synced, all is synced again by the next flush.
			p.needFlush.Store(true)
		} else {
			p.mu.Lock()
			p.fail(err)
			p.mu.Unlock()
		}
		return fmt.Errorf("log: flush %s: %w", p, err)
	}
	// The snapshots written by rolls, before the directory names them.
	if err := p.syncSnapshots(); err != nil {
		return fail(err)
	}
	if p.dirDirty.Swap(false) {
		if err := p.fs.SyncDir(p.dir); err != nil {
			p.dirDirty.Store(true)
			return fail(err)
		}
	}
	segs := *p.segs.Load()
	for i, s := range segs {
		sealedDirty := i < len(segs)-1 && s.IndexesDirty()
		if !sealedDirty && (s.NextOffset() <= rp || s.BaseOffset() >= upTo) {
			continue
		}
		if !s.Acquire() {
			if p.closed.Load() {
				return p.closedErr()
			}
			continue // deleted by retention
		}
		err := s.Sync()
		if err == nil && sealedDirty {
			err = s.FlushIndexes()
		}
		s.Release()
		if err != nil {
			return fail(err)
		}
	}
	if upTo > rp {
		// Under mu, and only if no truncation came in between: one could
		// have cut the log below upTo (and lowered the recovery point).
		p.mu.Lock()
		if p.truncGen.Load() == gen && upTo > p.recoveryPoint.Load() {
			p.recoveryPoint.Store(upTo)
		}
		p.mu.Unlock()
	}
	p.lastFlush.Store(p.clock.Now().UnixNano())
	return nil
}

// checkpointRecoveryPoint is the recovery point to write to the checkpoint:
// never past a sealed segment whose indexes are not durable yet, so that a
// crash recovers that segment rather than trusting its indexes.
func (p *Partition) checkpointRecoveryPoint() int64 {
	rp := p.recoveryPoint.Load()
	segs := *p.segs.Load()
	for _, s := range segs[:len(segs)-1] {
		if s.IndexesDirty() {
			return min(rp, s.BaseOffset())
		}
	}
	return rp
}

// close flushes the partition, writes its producer state snapshot and
// closes its segments.
func (p *Partition) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Swap(true) {
		return nil
	}
	p.dropTailLocked()
	var first error
	segs := *p.segs.Load()
	if p.err == nil {
		rp := p.recoveryPoint.Load()
		if p.dirDirty.Load() {
			if err := p.fs.SyncDir(p.dir); err != nil {
				first = fmt.Errorf("log: close %s: %w", p, err)
			}
		}
		for _, s := range segs {
			if s.NextOffset() <= rp && !s.IndexesDirty() {
				continue // nothing new since the last flush
			}
			if err := s.Flush(); err != nil && first == nil {
				first = fmt.Errorf("log: close %s: %w", p, err)
			}
		}
		if err := p.syncSnapshots(); err != nil && first == nil {
			first = fmt.Errorf("log: close %s: %w", p, err)
		}
		if first == nil {
			p.recoveryPoint.Store(p.leo.Load())
			// The next open loads the state from here, replaying nothing.
			if err := p.snapshotOnClose(); err != nil {
				first = fmt.Errorf("log: close %s: %w", p, err)
			}
		}
	} else {
		// The partition failed: its snapshots are not synced.
		p.snapMu.Lock()
		p.snapUnsynced = nil
		p.snapMu.Unlock()
	}
	for _, s := range segs {
		s.Close()
	}
	if first == nil {
		first = p.err
	}
	p.syncMu.Lock()
	p.syncCnd.Broadcast()
	p.syncMu.Unlock()
	return first
}
