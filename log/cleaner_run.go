package log

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
)

// cleanerCheckpointFile holds each compacted partition's first dirty offset
// (Kafka's cleaner-offset-checkpoint).
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// cleanerReadBytes is how much the cleaner reads from a segment at a time.
const cleanerReadBytes = 1 << 20

// errCleanerStopped ends a pass when the broker closes.
var errCleanerStopped = errors.New("log: cleaner stopped")

// cleaner is the broker's log cleaner: the driver of the plans of
// cleaner.go. One pass at a time (mu); the broker's cleanerLoop runs it
// every RetentionCheckInterval.
type cleaner struct {
	b *Broker

	mu          sync.Mutex
	firstDirty  map[TopicPartition]int64
	uncleanable map[*Partition]error // a pass failed: not cleaned again until reopened
	filter      batch.Filter         // copies batches, compressed ones too, keeping some records
	readBuf     []byte
	plain       []byte // a compressed batch of the dirty part, decompressed to map its keys
	maxInflate  int    // the most plain may hold: the pass's partition's MaxDecompressedBytes
	it          batch.Iter
	rec         batch.Record
	out         []byte
	writeBuf    []byte     // for segment.CreateCleaned
	m           *offsetMap // reused by the passes of a run
	// maxMapBytes is the largest offset map a pass has used (tests and the
	// benchmark check the memory bound).
	maxMapBytes int64
}

func newCleaner(b *Broker) *cleaner {
	c := &cleaner{b: b, uncleanable: map[*Partition]error{}}
	fd, err := map[TopicPartition]int64{}, error(nil)
	if !b.store.fresh { // a new data dir has no checkpoint to read
		fd, err = readCheckpoint(b.fs, filepath.Join(b.dir, cleanerCheckpointFile))
	}
	if err != nil {
		b.logger.Warn("ignoring unreadable cleaner checkpoint: compacted logs are all dirty", "err", err)
		fd = map[TopicPartition]int64{}
	}
	c.firstDirty = fd
	return c
}

// cleanerLoop runs the cleaner every RetentionCheckInterval until the
// broker stops.
func (b *Broker) cleanerLoop() {
	defer b.wg.Done()
	t := b.cfg.Clock.NewTimer(b.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C():
		}
		t.Reset(b.cfg.RetentionCheckInterval)
		if _, err := b.cleaner.run(b.cfg.Clock.Now()); err != nil && !errors.Is(err, errCleanerStopped) {
			b.logger.Error("log cleaner", "err", err)
		}
	}
}

// stopped reports whether the broker is closing.
func (c *cleaner) stopped() bool {
	select {
	case <-c.b.stop:
		return true
	default:
		return false
	}
}

// run cleans the compacted partitions that are due, dirtiest first, until
// none is. It returns the number of passes. A pass that fails makes its
// partition uncleanable (logged) until the broker is reopened; run goes on
// with the others.
func (c *cleaner) run(now time.Time) (passes int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { // idle, it holds no memory
		c.m, c.readBuf, c.writeBuf, c.out, c.plain, c.filter = nil, nil, nil, nil, nil, batch.Filter{}
		c.it, c.rec = batch.Iter{}, batch.Record{}
	}()
	// A run cleans what was dirty when it began (in as many passes as that
	// takes) and no more: under a steady stream of appends it still ends.
	runEnd := map[*Partition]int64{}
	for {
		if c.stopped() {
			return passes, errCleanerStopped
		}
		var parts []*Partition
		var plans []cleanPlan
		for _, p := range c.b.store.Partitions() {
			if p.config().Cleanup == CleanupDelete || c.uncleanable[p] != nil || p.closed.Load() {
				continue
			}
			plan, err := c.plan(p, now)
			if err != nil {
				c.markUncleanable(p, err)
				continue
			}
			if _, ok := runEnd[p]; !ok {
				runEnd[p] = plan.end
			}
			if plan.firstDirty >= runEnd[p] {
				continue
			}
			parts, plans = append(parts, p), append(plans, plan)
		}
		i := pickDirtiest(plans)
		if i < 0 {
			return passes, nil
		}
		p := parts[i]
		var pass cleanerPass
		if c.b.cfg.Metrics != nil {
			pass = c.startPass(p)
		}
		next, err := c.clean(p, plans[i], now)
		switch {
		case errors.Is(err, errCleanerStopped):
			return passes, err
		case err != nil && p.closed.Load():
			continue // deleted or closing: not an error
		case err != nil:
			c.markUncleanable(p, err)
			continue
		}
		passes++
		if c.b.cfg.Metrics != nil {
			c.endPass(pass, next)
		}
		c.firstDirty[TopicPartition{Topic: p.topic, Partition: p.id}] = next
		if err := c.writeCheckpoint(); err != nil {
			return passes, err
		}
	}
}

func (c *cleaner) markUncleanable(p *Partition, err error) {
	c.uncleanable[p] = err
	c.b.logger.Error("log cleaner: partition marked uncleanable until the broker is reopened", "partition", p.String(), "err", err)
}

// writeCheckpoint writes the first dirty offsets of the partitions that
// still exist.
func (c *cleaner) writeCheckpoint() error {
	live := map[TopicPartition]int64{}
	for _, p := range c.b.store.Partitions() {
		tp := TopicPartition{Topic: p.topic, Partition: p.id}
		if off, ok := c.firstDirty[tp]; ok {
			live[tp] = off
		}
	}
	c.firstDirty = live
	return writeCheckpoint(c.b.fs, filepath.Join(c.b.dir, cleanerCheckpointFile), formatCheckpoint(live))
}

// plan gathers what planCleaning needs of p.
func (c *cleaner) plan(p *Partition, now time.Time) (cleanPlan, error) {
	segs := *p.segs.Load()
	in := cleanInput{
		segs:         make([]segInfo, len(segs)),
		start:        p.StartOffset(),
		hw:           min(p.LastStableOffset(), p.HighWatermark()), // nothing of an open transaction is cleaned
		firstDirty:   c.firstDirty[TopicPartition{Topic: p.topic, Partition: p.id}],
		firstDirtyTs: -1,
		now:          now,
		minLag:       p.config().MinCompactionLag,
		maxLag:       p.config().MaxCompactionLag,
		minRatio:     p.config().MinCleanableDirtyRatio,
	}
	for i, s := range segs {
		in.segs[i] = segInfo{base: s.BaseOffset(), next: s.NextOffset(), size: s.Size(), maxTs: s.MaxTimestamp()}
	}
	if in.firstDirty > p.EndOffset() {
		in.firstDirty = 0 // of a deleted topic of the same name: all is dirty
	}
	if in.maxLag > 0 {
		from := max(in.firstDirty, in.start)
		if s := p.segmentFor(from); s != nil {
			_, h, err := s.Locate(from)
			s.Release()
			_, horizonSet := h.DeleteHorizon()
			switch {
			case err == nil && !horizonSet:
				in.firstDirtyTs = h.BaseTimestamp
			case err == nil: // the base timestamp is the delete horizon
				in.firstDirtyTs = h.MaxTimestamp
			case !errors.Is(err, io.EOF):
				return cleanPlan{}, err
			}
		}
	}
	return planCleaning(in), nil
}

// clean runs one pass over p: it maps the dirty part's keys, as many as the
// buffer holds, then rewrites the segments from the start of the log to
// where the map ends, in groups, installing each cleaned group as it is
// done. It returns the new first dirty offset.
func (c *cleaner) clean(p *Partition, plan cleanPlan, now time.Time) (int64, error) {
	// The list may have changed since the plan (rolls, retention): take the
	// sealed segments below the plan's end from the list as it is now.
	all := *p.segs.Load()
	n := 0
	for n < len(all)-1 && all[n].BaseOffset() < plan.end {
		n++
	}
	segs := all[:n]
	if len(segs) == 0 {
		return plan.firstDirty, nil
	}
	for i, s := range segs {
		if !s.Acquire() {
			for _, s := range segs[:i] {
				s.Release()
			}
			return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, ErrClosed)
		}
	}
	defer func() {
		for _, s := range segs {
			s.Release()
		}
	}()

	// The offset map, and the last batch of each producer id in the part of
	// the log this pass rewrites (a superset of each one's last batch there:
	// their state survives).
	if c.m == nil {
		c.m = newOffsetMap(c.b.cfg.CleanerBufferBytes, 1<<12) // grows with the keys
	} else {
		c.m.reset()
	}
	// A compressed batch is decompressed up to MaxDecompressedBytes: a
	// bomb stops the pass there (ErrRecordTooLarge) and the partition is
	// marked uncleanable (run), its segments left as they are.
	c.maxInflate = p.maxInflate
	c.filter.Limit = p.maxInflate
	m := c.m
	// The last data batch of each producer id, and its last marker, which
	// is kept only if the producer has no data batch there (Kafka's
	// lastRecordsOfActiveProducers: the marker then holds its epoch).
	lastBatch, lastMarker := map[int64]int64{}, map[int64]int64{}
	note := func(h batch.Header) {
		switch {
		case h.ProducerID < 0:
		case h.Control():
			lastMarker[h.ProducerID] = h.BaseOffset
		default:
			lastBatch[h.ProducerID] = h.BaseOffset
		}
	}
	mapEnd := plan.end
	full := false
	// Neither markers nor the records of aborted transactions are mapped:
	// an aborted record never supersedes a committed one.
	var mapAb abortFilter
	for _, s := range segs {
		if s.NextOffset() > plan.firstDirty {
			aborted, err := p.AbortedTransactions(nil, s.BaseOffset(), plan.end)
			if err != nil {
				return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
			}
			mapAb.reset(aborted)
			break
		}
	}
	for _, s := range segs {
		if s.NextOffset() <= plan.firstDirty && !full {
			// Clean part: only producer ids, from the headers.
			if err := c.walk(s, s.BaseOffset(), false, func(b []byte, h batch.Header) (bool, error) {
				note(h)
				return true, nil
			}); err != nil {
				return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
			}
			continue
		}
		if full {
			break
		}
		// From the segment's start: the producer ids of its clean batches
		// count too.
		err := c.walk(s, s.BaseOffset(), true, func(b []byte, h batch.Header) (bool, error) {
			skip := mapAb.skip(h, b)
			if h.NextOffset() <= plan.firstDirty || skip {
				if !full {
					note(h)
				}
				return true, nil
			}
			err := c.records(b, h, func(r *batch.Record) error {
				if r.Offset < plan.firstDirty || r.Key == nil || full {
					return nil
				}
				if !m.put(r.Key, r.Offset) {
					full, mapEnd = true, r.Offset
				}
				return nil
			})
			if err != nil {
				return false, err
			}
			if !full {
				note(h)
			}
			return !full, nil
		})
		if err != nil {
			return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
		}
	}
	c.maxMapBytes = max(c.maxMapBytes, m.bytes())
	if mapEnd <= plan.firstDirty {
		return plan.firstDirty, fmt.Errorf("log: clean %s: the offset map holds no key", p)
	}

	// Segments from the start of the log to the one where the map ends.
	k := 0
	for k < len(segs) && segs[k].BaseOffset() < mapEnd {
		k++
	}
	infos := make([]segInfo, k)
	for i, s := range segs[:k] {
		infos[i] = segInfo{base: s.BaseOffset(), next: s.NextOffset(), size: s.Size(), maxTs: s.MaxTimestamp()}
	}
	limits := groupLimits{maxBytes: p.config().SegmentBytes, maxIndexBytes: int64(p.config().MaxIndexBytes), indexInterval: int64(p.config().IndexIntervalBytes)}
	nowMs := now.UnixMilli()
	horizon := nowMs + p.config().DeleteRetention.Milliseconds()
	var keepH batch.Header
	keep := func(r *batch.Record) bool {
		if r.Key == nil {
			return true
		}
		if latest := m.get(r.Key); latest > r.Offset {
			return false // a later record of its key was mapped
		}
		if r.Value == nil {
			if hz, ok := keepH.DeleteHorizon(); ok && nowMs >= hz {
				return false // a tombstone past its delete retention
			}
		}
		return true
	}
	keepAll := func(*batch.Record) bool { return true }
	keepNone := func(*batch.Record) bool { return false }
	txns := newCleanTxns()
	i := 0
	for _, n := range groupSegments(infos, limits) {
		group := segs[i : i+n]
		i += n
		if c.stopped() {
			return plan.firstDirty, errCleanerStopped
		}
		// Indexes preallocated for what the group can hold, not MaxIndexBytes.
		var groupBytes int64
		for _, s := range group {
			groupBytes += s.Size()
		}
		scfg := p.segCfg
		scfg.MaxIndexBytes = int(min(int64(p.config().MaxIndexBytes), (limits.indexBytes(groupBytes)/24+2)*24))
		var aborted []index.AbortedTxn
		if err := p.abortedTxnEntries(group[0].BaseOffset(), group[len(group)-1].NextOffset(),
			func(t index.AbortedTxn) { aborted = append(aborted, t) }, func() { aborted = aborted[:0] }); err != nil {
			return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
		}
		txns.add(aborted)
		cw, err := segment.CreateCleaned(p.fs, p.dir, group[0].BaseOffset(), scfg, now, c.writeBuf)
		if err != nil {
			return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
		}
		for gi, s := range group {
			last := gi == len(group)-1
			err = c.walk(s, s.BaseOffset(), true, func(b []byte, h batch.Header) (bool, error) {
				keepH = h
				data, hasData := lastBatch[h.ProducerID]
				producersLast := h.ProducerID >= 0 && (!h.Control() && data == h.BaseOffset ||
					h.Control() && !hasData && lastMarker[h.ProducerID] == h.BaseOffset)
				groupEnd := last && h.NextOffset() == s.NextOffset()
				kf, hz := keep, horizon
				if h.Control() {
					// A marker is kept whole, never emptied (it would no
					// longer parse), and compared with no key; one whose
					// transaction's data is gone gets a delete horizon and
					// goes after it.
					discardable, entry := txns.onControl(h, b)
					if entry != nil {
						if err := cw.AppendAbortedTxn(*entry); err != nil {
							return false, err
						}
					}
					if hzSet, ok := h.DeleteHorizon(); discardable && ok && nowMs >= hzSet && !producersLast && !groupEnd {
						return true, nil
					}
					kf = keepAll
					if !discardable {
						hz = -1
					}
				} else if txns.onBatch(h) {
					kf = keepNone // an aborted transaction's
				}
				out, kept, err := c.filter.Apply(c.out[:0], b, h, hz, kf)
				c.out = out
				if err != nil {
					return false, inflated(err)
				}
				// An emptied batch is kept (Kafka's empty batch, its header
				// only) when it is its producer's last, so that producer
				// state survives, or when it ends the group, so that the
				// cleaned segment ends where the old ones did.
				if kept == 0 && !producersLast && !groupEnd {
					return true, nil
				}
				oh, err := batch.ParseHeader(out)
				if err != nil {
					return false, err
				}
				return true, cw.Append(out, oh)
			})
			if err != nil {
				break
			}
		}
		if err == nil && cw.NextOffset() != group[len(group)-1].NextOffset() {
			err = fmt.Errorf("cleaned segment %d ends at %d, not %d", group[0].BaseOffset(), cw.NextOffset(), group[len(group)-1].NextOffset())
		}
		if err != nil {
			cw.Abort()
			return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
		}
		c.writeBuf = cw.Buffer()
		seg, err := cw.Commit()
		if err != nil {
			return plan.firstDirty, fmt.Errorf("log: clean %s: %w", p, err)
		}
		if err := p.installCleaned(group, seg); err != nil {
			return plan.firstDirty, err
		}
	}
	p.logger.Debug("log cleaner pass", "partition", p.String(), "from", plan.firstDirty, "to", mapEnd, "segments", k)
	return mapEnd, nil
}

// records calls fn for each record of the batch b, with header h from a
// walk, as batch.Records does but with nothing allocated per batch: the
// record and iterator are the cleaner's, and a compressed batch is
// decompressed (and its records checked) into c.plain, reused from batch to
// batch.
func (c *cleaner) records(b []byte, h batch.Header, fn func(r *batch.Record) error) error {
	if h.Compression() != batch.CompressionNone {
		plain, err := batch.DecompressLimit(c.plain[:0], b, h, c.maxInflate)
		if cap(plain) <= cleanerReadBytes<<2 {
			c.plain = plain[:0]
		} else {
			c.plain = nil // not kept after an unusually large batch
		}
		if err != nil {
			return inflated(err)
		}
		if h, err = batch.ParseHeader(plain); err != nil {
			return err
		}
		b = plain
	}
	if err := c.it.Reset(b, h); err != nil {
		return err
	}
	for {
		ok, err := c.it.Next(&c.rec)
		if err != nil || !ok {
			return err
		}
		if err := fn(&c.rec); err != nil {
			return err
		}
	}
}

// walk calls fn for each batch of s from the one holding from on, after
// checking its CRC (and with records, its records as fn parses them); fn
// returns false to stop. The batch bytes are valid during the call.
func (c *cleaner) walk(s *segment.Segment, from int64, records bool, fn func(b []byte, h batch.Header) (bool, error)) error {
	if c.readBuf == nil {
		c.readBuf = make([]byte, 0, cleanerReadBytes)
	}
	for off := from; off < s.NextOffset(); {
		if c.stopped() {
			return errCleanerStopped
		}
		raw, err := s.ReadInto(c.readBuf, off)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if cap(raw) > cap(c.readBuf) {
			c.readBuf = raw[:0] // grown for a large batch
		}
		for pos := 0; pos < len(raw); {
			var h batch.Header
			var err error
			if records {
				h, err = batch.Check(raw[pos:])
			} else {
				h, err = batch.ParseHeader(raw[pos:])
			}
			if err != nil {
				return fmt.Errorf("segment %d at offset %d: %w", s.BaseOffset(), off, err)
			}
			b := raw[pos : pos+h.Size()]
			pos += h.Size()
			off = h.NextOffset()
			more, err := fn(b, h)
			if err != nil {
				return fmt.Errorf("segment %d, batch at %d: %w", s.BaseOffset(), h.BaseOffset, err)
			}
			if !more {
				return nil
			}
		}
	}
	return nil
}

// installCleaned replaces the segments of group, in p's published list, by
// seg, the committed cleaned segment that holds what they keep; then it
// installs seg's files and deletes those of the others. Readers holding an
// old segment go on reading it; readers that look the list up again find
// seg, which holds, for every key, the latest record they could have found
// in the old ones. If the list no longer holds group (retention deleted some
// of it) seg is discarded.
func (p *Partition) installCleaned(group []*segment.Segment, seg *segment.Segment) error {
	p.mu.Lock()
	segs := *p.segs.Load()
	at := -1
	for i, s := range segs {
		if s == group[0] {
			at = i
			break
		}
	}
	ok := at >= 0 && at+len(group) < len(segs) && !p.closed.Load() && p.err == nil
	for j := 0; ok && j < len(group); j++ {
		ok = segs[at+j] == group[j]
	}
	if !ok {
		p.mu.Unlock()
		seg.Discard()
		if err := p.fs.SyncDir(p.dir); err != nil {
			return fmt.Errorf("log: clean %s: sync dir: %w", p, err)
		}
		if p.closed.Load() {
			return p.closedErr()
		}
		return nil
	}
	list := make([]*segment.Segment, 0, len(segs)-len(group)+1)
	list = append(list, segs[:at]...)
	list = append(list, seg)
	list = append(list, segs[at+len(group):]...)
	p.segs.Store(&list)
	// group[0]'s files are about to be replaced under their names: it must
	// never open them again (its files may be closed while idle).
	group[0].Retire()
	// Renames only, under the lock so that retention does not delete seg
	// halfway through them.
	err := seg.Install()
	if err != nil {
		p.fail(err)
	}
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("log: clean %s: %w", p, err)
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return fmt.Errorf("log: clean %s: sync dir: %w", p, err)
	}
	// group[0]'s files were replaced by seg's; the others' go. A crash
	// before this is done leaves segments inside seg's offsets, which
	// Open deletes.
	group[0].Close()
	var first error
	for _, s := range group[1:] {
		if err := s.Delete(); err != nil && first == nil {
			first = err
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil && first == nil {
		first = fmt.Errorf("log: clean %s: sync dir: %w", p, err)
	}
	return first
}
