package log

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// maxRecoverBatch bounds the size of a batch that recovery accepts: larger
// lengths are taken as garbage, not read.
const maxRecoverBatch = 256 << 20

// partitionState is what the checkpoints say about a partition.
type partitionState struct {
	recoveryPoint int64 // -1: unknown
	startOffset   int64 // -1: unknown
	highWatermark int64 // -1: unknown
}

func (s *Store) newPartition(topic string, id int, cfg TopicConfig) *Partition {
	p := &Partition{
		topic:        topic,
		id:           id,
		dir:          s.partitionDir(topic, id),
		fs:           s.fs,
		segCfg:       segment.Config{IndexIntervalBytes: cfg.IndexIntervalBytes, MaxIndexBytes: cfg.MaxIndexBytes, Cache: s.segFiles},
		logger:       s.logger,
		clock:        s.cfg.Clock,
		metrics:      s.cfg.Metrics,
		maxInflate:   s.cfg.MaxDecompressedBytes,
		wake:         s.wakeLoop,
		appended:     s.notify,
		hwFollowsEnd: s.cfg.HighWatermarkFollowsEnd,
		ephemeral:    s.cfg.ephemeral,
		hwLowered: func() {
			if err := s.writeCheckpoints(); err != nil {
				s.logger.Error("checkpoint failed", "err", err)
			}
		},
		checkpoint: s.writeCheckpoints,
		tails:      &s.tails,
	}
	p.conf.Store(&cfg)
	p.epochs.Store(new(epochCache))
	p.ps = NewProducerState(0)
	p.syncCnd = sync.NewCond(&p.syncMu)
	return p
}

// create makes the directory and first segment of a new partition.
func (p *Partition) create() error {
	if err := p.fs.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("log: create %s: %w", p.dir, err)
	}
	// The leader epoch starts at offset 0 from the creation, as Kafka's
	// makeLeader assigns it when the replica becomes leader, not at the
	// first append: that append would otherwise wait for the checkpoint's
	// fsyncs (1.5 to 25 ms on this machine's disk) in the producer's path.
	// A follower's first AppendAsFollower, or SetLeaderEpoch, replaces it.
	if c, changed := p.loadEpochs().assign(p.epoch.Load(), 0); changed {
		if p.ephemeral {
			p.epochs.Store(&c) // the file is for a later open: none comes
		} else if err := p.storeEpochs(c); err != nil {
			return err
		}
	}
	return p.createAt(0)
}

// load opens an existing partition. After a clean shutdown segments are
// trusted (indexes still get their sanity check); after an unclean one every
// segment from the one holding the recovery point on is scanned and
// validated, and a torn or corrupt tail is cut off together with every
// segment after it. The producer state is then loaded from the newest
// usable .snapshot file at or below the end offset and the batch headers
// after it (snapshots past the end are deleted).
func (p *Partition) load(clean bool, st partitionState) error {
	if err := p.fs.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("log: open %s: %w", p.dir, err)
	}
	forced, err := p.finishCleaning()
	if err != nil {
		return err
	}
	names, err := p.fs.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("log: open %s: %w", p.dir, err)
	}
	var bases []int64
	hasLog := map[int64]bool{}
	for _, name := range names {
		ext := filepath.Ext(name)
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		switch {
		case strings.HasSuffix(name, ".tmp"):
			p.fs.Remove(filepath.Join(p.dir, name))
		case err != nil || base < 0:
			// Not a segment file: leave it alone.
		case ext == ".log":
			bases = append(bases, base)
			hasLog[base] = true
		}
	}
	// Indexes without their .log are leftovers of a deletion.
	for _, name := range names {
		ext := filepath.Ext(name)
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err == nil && (ext == ".index" || ext == ".timeindex" || ext == ".txnindex") && !hasLog[base] {
			p.fs.Remove(filepath.Join(p.dir, name))
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if len(bases) == 0 {
		if err := p.createAt(max(st.startOffset, 0)); err != nil {
			return err
		}
		if err := p.openProducerState(p.clock.Now()); err != nil {
			return err
		}
		return p.openEpochs()
	}

	rp := st.recoveryPoint
	if clean {
		rp = -1 // nothing to recover
	} else if rp < 0 {
		rp = 0 // no checkpoint: recover everything
	}
	// The first segment to recover is the one holding the recovery point.
	firstRecover := len(bases)
	if rp >= 0 {
		firstRecover = sort.Search(len(bases), func(i int) bool { return bases[i] > rp }) - 1
		if firstRecover < 0 {
			firstRecover = 0
		}
	}
	now := p.clock.Now()
	var segs []*segment.Segment
	lazy := map[*segment.Segment]bool{} // opened with OpenSealed
	closeAll := func() {
		for _, s := range segs {
			s.Close()
		}
	}
	// dropFrom deletes the files of the segments from bases[i] on.
	dropFrom := func(i int, why string, args ...any) error {
		p.logger.Warn(why, append([]any{"partition", p.String(), "deleted", len(bases) - i}, args...)...)
		for _, later := range bases[i:] {
			for _, ext := range []string{".log", ".index", ".timeindex", ".txnindex"} {
				name := filepath.Join(p.dir, segment.Name(later, ext))
				if err := p.fs.Remove(name); err != nil && !isNotExist(err) {
					// The next open finds it again and drops it again.
					p.logger.Warn("could not delete a segment file past the end of the log", "file", name, "err", err)
				}
			}
		}
		if err := p.fs.SyncDir(p.dir); err != nil {
			return fmt.Errorf("log: sync dir %s: %w", p.dir, err)
		}
		return nil
	}
	for i, base := range bases {
		recover := i >= firstRecover || forced[base]
		if len(segs) > 0 && base < segs[len(segs)-1].NextOffset() {
			// Inside the offsets of the segment before it: a segment that a
			// cleaned one replaced, left by a crash before it was deleted.
			p.logger.Info("deleting a segment replaced by a cleaned one", "partition", p.String(), "segment", base)
			for _, ext := range []string{".log", ".index", ".timeindex", ".txnindex"} {
				if err := p.fs.Remove(filepath.Join(p.dir, segment.Name(base, ext))); err != nil && !isNotExist(err) {
					closeAll()
					return fmt.Errorf("log: open %s: %w", p, err)
				}
			}
			if err := p.fs.SyncDir(p.dir); err != nil {
				closeAll()
				return fmt.Errorf("log: sync dir %s: %w", p.dir, err)
			}
			continue
		}
		if !clean && len(segs) > 0 && base != segs[len(segs)-1].NextOffset() {
			// Segments must follow one another: a gap means the end of an
			// earlier segment was lost while a later one's unsynced bytes
			// survived, or a crash came in the middle of a TruncateTo,
			// between the durable cut of one segment and the deletion of
			// those after it. Either way the log ends at the gap.
			if err := dropFrom(i, "segment does not follow the one before it; deleting it and those after it",
				"segment", base, "expected", segs[len(segs)-1].NextOffset()); err != nil {
				closeAll()
				return err
			}
			break
		}
		// Sealed segments that need no recovery open lazily: their files
		// are opened by the first read that needs them.
		var seg *segment.Segment
		var truncated int64
		var err error
		if !recover && i < len(bases)-1 {
			seg, truncated, err = segment.OpenSealed(p.fs, p.dir, base, p.segCfg, maxRecoverBatch, now)
			lazy[seg] = err == nil
		} else {
			seg, truncated, err = segment.Open(p.fs, p.dir, base, p.segCfg, recover, maxRecoverBatch, now)
		}
		if err != nil {
			closeAll()
			return fmt.Errorf("log: open %s: %w", p, err)
		}
		segs = append(segs, seg)
		if len(segs) > 1 {
			// The one before is not the last: seal it now, so that its
			// files may be closed while the others open.
			if err := sealLoaded(segs[len(segs)-2]); err != nil {
				closeAll()
				return fmt.Errorf("log: open %s: %w", p, err)
			}
		}
		if truncated > 0 {
			p.logger.Warn("truncated torn or corrupt tail", "partition", p.String(), "segment", base, "bytes", truncated)
		}
		if truncated > 0 && i+1 < len(bases) {
			// Kafka's rule: a torn or corrupt segment ends the log; what
			// follows it was never acknowledged as durable.
			if err := dropFrom(i+1, "deleting the segments after a truncated one"); err != nil {
				closeAll()
				return err
			}
			break
		}
	}

	// Segments wholly below the log start offset were deleted by retention
	// before a crash could remove their files.
	start := max(st.startOffset, segs[0].BaseOffset())
	for len(segs) > 1 && segs[1].BaseOffset() <= start {
		segs[0].Delete()
		segs = segs[1:]
	}
	if last := segs[len(segs)-1]; lazy[last] {
		// The segments after it went (dropFrom): it is the active one.
		last.Close()
		seg, _, err := segment.Open(p.fs, p.dir, last.BaseOffset(), p.segCfg, false, maxRecoverBatch, now)
		if err != nil {
			segs = segs[:len(segs)-1]
			closeAll()
			return fmt.Errorf("log: open %s: %w", p, err)
		}
		segs[len(segs)-1] = seg
	}
	active := segs[len(segs)-1]
	if err := active.ResizeIndexes(p.config().MaxIndexBytes); err != nil {
		closeAll()
		return fmt.Errorf("log: open %s: %w", p, err)
	}
	leo := active.NextOffset()
	if start > leo {
		start = leo
	}
	p.active = active
	p.segs.Store(&segs)
	p.leo.Store(leo)
	p.start.Store(start)
	if clean {
		p.recoveryPoint.Store(leo)
	} else {
		// What recovery kept is what the disk holds; treat it as durable
		// only once flushed again.
		p.recoveryPoint.Store(min(max(rp, start), leo))
	}
	// The high watermark checkpoint may be older than the log start (a
	// crash after retention) or newer than what survived (a crash that lost
	// unsynced records): it is clamped, never trusted past the log.
	switch {
	case p.hwFollowsEnd:
		p.hw.Store(leo)
	default:
		p.hw.Store(min(max(st.highWatermark, start), leo))
	}
	p.lastFlush.Store(now.UnixNano())
	if err := p.openProducerState(now); err != nil {
		closeAll()
		return err
	}
	return p.openEpochs()
}

// sealLoaded seals a segment that open found not to be the last: a
// recovered one gets its final time-index entry and trimmed indexes again;
// either way its files may from then on be closed while no one reads it.
func sealLoaded(s *segment.Segment) error {
	if s.Recovered() {
		return s.Seal()
	}
	s.MarkSealed()
	return nil
}

// openEpochs reads the partition's leader-epoch-checkpoint and fits it to
// the log: epochs that start after the end offset are dropped (the
// records they started at were lost, or a truncation did not get to
// rewrite the file), and the first kept one starts no earlier than the log
// start offset. A file that does not parse or whose entries do not
// increase, or a missing or empty one while the log's first batch carries
// an epoch, is not trusted: the cache is rebuilt from the epochs in the
// batch headers and checkpointed. The leader epoch becomes the latest
// epoch of the cache (0 if none).
func (p *Partition) openEpochs() error {
	name := filepath.Join(p.dir, epochCheckpointFile)
	var c epochCache
	data, err := vfs.ReadFile(p.fs, name)
	rebuild := false
	switch {
	case isNotExist(err):
		rebuild = true
	case err != nil:
		return fmt.Errorf("log: open %s: read %s: %w", p, epochCheckpointFile, err)
	default:
		c, err = parseEpochCheckpoint(data)
		if err != nil {
			p.logger.Warn("leader-epoch checkpoint not trusted: rebuilding it from the log", "partition", p.String(), "err", err)
			rebuild = true
		}
	}
	start, leo := p.start.Load(), p.leo.Load()
	if !rebuild && leo > start {
		if len(c) == 0 || c[0].StartOffset > start {
			// The checkpoint lost the head of the history (or never had it):
			// check the first batch.
			e, err := p.firstBatchEpoch()
			if err != nil {
				return fmt.Errorf("log: open %s: %w", p, err)
			}
			rebuild = e >= 0
		}
	}
	if rebuild {
		if c, err = p.epochsFromLog(); err != nil {
			return fmt.Errorf("log: open %s: rebuild leader epochs: %w", p, err)
		}
	}
	// An epoch that starts at the end offset is kept: its leader was
	// elected and had appended nothing (or lost it in the crash).
	fitted, ch1 := c.truncateFromEnd(leo + 1)
	fitted, ch2 := fitted.truncateFromStart(start)
	p.epochs.Store(&fitted)
	if rebuild || ch1 || ch2 {
		if err := p.storeEpochs(fitted); err != nil {
			return fmt.Errorf("log: open %s: %w", p, err)
		}
	}
	if l, ok := fitted.latest(); ok {
		p.epoch.Store(l.Epoch)
	}
	return nil
}

// firstBatchEpoch returns the leader epoch of the first batch at or after
// the log start offset, -1 if there is none.
func (p *Partition) firstBatchEpoch() (int32, error) {
	e := int32(-1)
	start := p.start.Load()
	for _, s := range *p.segs.Load() {
		var found bool
		err := s.BatchHeaders(func(h batch.Header) bool {
			if h.LastOffset() >= start {
				e, found = h.PartitionLeaderEpoch, true
				return false
			}
			return true
		})
		if err != nil || found {
			return e, err
		}
	}
	return e, nil
}

// epochsFromLog rebuilds the leader-epoch cache from the batch headers.
func (p *Partition) epochsFromLog() (epochCache, error) {
	var c epochCache
	for _, s := range *p.segs.Load() {
		err := s.BatchHeaders(func(h batch.Header) bool {
			c, _ = c.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// createAt starts an empty partition whose first offset is base.
func (p *Partition) createAt(base int64) error {
	seg, err := segment.Create(p.fs, p.dir, base, p.segCfg, p.clock.Now())
	if err != nil {
		return err
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		seg.Close()
		return fmt.Errorf("log: sync dir %s: %w", p.dir, err)
	}
	p.active = seg
	p.segs.Store(&[]*segment.Segment{seg})
	p.leo.Store(base)
	p.start.Store(base)
	p.hw.Store(base)
	p.recoveryPoint.Store(base)
	p.lastFlush.Store(p.clock.Now().UnixNano())
	return nil
}
