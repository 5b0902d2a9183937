package share

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-log/strata/tp"
)

// part returns the share-partition t of a group, initialized if it has
// no state yet: at the log's start or end (share.auto.offset.reset), a
// snapshot of which is stored before it is used. ge.mu is held.
func (c *Coordinator) part(ge *groupEntry, t TopicPartition) (*partEntry, error) {
	if pe := ge.parts[t]; pe != nil {
		return pe, nil
	}
	if n := c.partitionCount(t.Topic); t.Partition < 0 || t.Partition >= n {
		return nil, fmt.Errorf("share: partition %s of share group %q: %w", t, ge.id, errUnknownPartition)
	}
	logStart, logEnd, err := c.cfg.Offsets(t)
	if err != nil {
		return nil, fmt.Errorf("share: offsets of %s: %w", t, err)
	}
	c.mu.Lock()
	reset, pc := c.offsetReset(ge.id), c.partitionConfig(ge.id)
	c.mu.Unlock()
	now := c.clock.Now()
	pe := &partEntry{
		key:     stateKey{group: ge.id, topicID: tp.TopicID(t.Topic), partition: int32(t.Partition)},
		p:       newPartition(pc, initialStart(reset, logStart, logEnd)),
		created: now,
	}
	if err := c.flush(pe, true); err != nil {
		return nil, err
	}
	ge.parts[t] = pe
	return pe, nil
}

// errUnknownPartition: a partition of no topic.
var errUnknownPartition = fmt.Errorf("%w: unknown topic or partition", ErrInvalidRequest)

// Acquire acquires for member of group at most max records of partition
// t (Kafka's ShareFetch of one partition): the records given back first,
// then new ones up to the partition's high watermark. It returns the
// acquired offsets, in order, each run with its delivery count; the
// member reads their records from the log and acknowledges each within
// the group's lock duration (LockDuration). None acquired is no error.
func (c *Coordinator) Acquire(ctx context.Context, group, member string, t TopicPartition, max int) ([]AcquiredRange, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if member == "" {
		return nil, fmt.Errorf("%w: empty member id", ErrInvalidRequest)
	}
	if group != "" && c.cfg.OtherGroup(group) {
		return nil, fmt.Errorf("%w: %q is not a share group", ErrGroupNotFound, group)
	}
	if err := c.leads(t); err != nil {
		return nil, err
	}
	ge, err := c.lookup(group, true)
	if err != nil {
		return nil, err
	}
	ge.mu.Lock()
	pe, err := c.part(ge, t)
	ge.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if pe.writing.Load() && !pe.acquirable.Load() {
		// An acknowledgement is being written (an fsync) and nothing can
		// be acquired before it is: none now, rather than wait for the
		// write with the fetch's other partitions. The write signals
		// (Watch) if it frees records or room.
		return nil, nil
	}
	logStart, logEnd, err := c.cfg.Offsets(t)
	if err != nil {
		return nil, fmt.Errorf("share: offsets of %s: %w", t, err)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.gone {
		return nil, nil // deleted meanwhile: nothing to deliver from it now
	}
	moved := pe.p.logStartMoved(logStart)
	if pe.p.start > logEnd {
		// The log is behind the share-partition: the topic was deleted
		// and made again under its name (its id, tp.TopicID, is the
		// same), or a crash lost records the state had seen. Start anew.
		c.mu.Lock()
		reset := c.offsetReset(group)
		c.mu.Unlock()
		pe.p.resetTo(initialStart(reset, logStart, logEnd))
		pe.p.takeChanges()
		if err := c.flush(pe, true); err != nil {
			return nil, fmt.Errorf("share: store share-partition state of group %q, %s: %w", group, t, err)
		}
	}
	ranges, deadline := pe.p.acquire(c.clock.Now(), member, max, logEnd)
	if len(ranges) > 0 {
		c.armLock(pe, deadline)
	}
	if moved || len(pe.p.changed) > 0 {
		// Expired locks released, or the start moved with the log's.
		if err := c.flush(pe, false); err != nil {
			c.cfg.Logger.Warn("share: store share-partition state", "group", group, "partition", t, "err", err)
		}
	}
	return ranges, nil
}

// Acknowledge applies member's acknowledgements of records of partition
// t, all or none, and makes them durable before it returns: an accepted
// record is never delivered again, even after a crash. A release makes
// the record Available to any member (Archived at the delivery count
// limit), a renewal starts its lock anew.
//
// Errors: ErrInvalidRecordState (a record member does not hold: never
// acquired, acquired by another, its lock expired, or of no
// share-partition of the group), ErrInvalidRequest (malformed batches),
// a store error (wrapped; nothing applied), ErrClosed, ctx's error.
func (c *Coordinator) Acknowledge(ctx context.Context, group, member string, t TopicPartition, batches []AckBatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.leads(t); err != nil {
		return err
	}
	ge, err := c.lookup(group, false)
	if err != nil {
		if c.isClosed() {
			return err
		}
		return fmt.Errorf("%w: share group %q has no state", ErrInvalidRecordState, group)
	}
	ge.mu.Lock()
	pe := ge.parts[t]
	ge.mu.Unlock()
	if pe == nil {
		return fmt.Errorf("%w: share group %q has no state of %s", ErrInvalidRecordState, group, t)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.gone {
		return fmt.Errorf("%w: share group %q has no state of %s", ErrInvalidRecordState, group, t)
	}
	if c.isClosed() {
		return ErrClosed
	}
	start := pe.p.start
	// What may be acquired whatever the write's outcome: if nothing, an
	// Acquire meanwhile need not wait for the write (the write signals
	// what it frees).
	acquirable := pe.p.mayAcquire()
	renewed, err := pe.p.acknowledge(c.clock.Now(), member, batches)
	if err != nil {
		return fmt.Errorf("share: group %q, %s: %w", group, t, err)
	}
	pe.acquirable.Store(acquirable)
	pe.writing.Store(true)
	err = c.flush(pe, false)
	pe.writing.Store(false)
	if err != nil {
		pe.p.rollback()
		return fmt.Errorf("share: store acknowledgements of group %q, %s: %w", group, t, err)
	}
	if !renewed.IsZero() {
		c.armLock(pe, renewed)
	}
	if releases(batches) || pe.p.start != start {
		// Records to acquire again, or room in the in-flight window
		// (MaxInFlight) for new ones: a fetch waiting for either goes on.
		c.signal()
	}
	return nil
}

func releases(batches []AckBatch) bool {
	for _, b := range batches {
		if slices.Contains(b.Types, AckRelease) {
			return true
		}
	}
	return false
}

// Unacquire gives back the records of partition t from offset from on
// that member acquired with its last Acquire and that were not delivered
// (a fetch response could not hold them): they are Available again with
// the delivery count they had, as if never acquired.
func (c *Coordinator) Unacquire(group, member string, t TopicPartition, from int64) {
	ge, err := c.lookup(group, false)
	if err != nil {
		return
	}
	ge.mu.Lock()
	pe := ge.parts[t]
	ge.mu.Unlock()
	if pe == nil {
		return
	}
	pe.mu.Lock()
	n := pe.p.unacquire(member, from)
	pe.mu.Unlock()
	if n > 0 {
		c.signal()
	}
}

// Watch returns a channel closed the next time records become Available
// again in some share-partition (released, their lock expired, their
// member gone, offsets altered): a fetch that found nothing to acquire
// waits on it and on new records.
func (c *Coordinator) Watch() <-chan struct{} {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.watch == nil {
		c.watch = make(chan struct{})
	}
	return c.watch
}

// signal wakes the Watch channel's waiters.
func (c *Coordinator) signal() {
	c.watchMu.Lock()
	if c.watch != nil {
		close(c.watch)
		c.watch = nil
	}
	c.watchMu.Unlock()
}

// LockDuration is how long group's members hold a record they acquired.
func (c *Coordinator) LockDuration(group string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partitionConfig(group).LockDuration
}

// flush writes the share-partition's changes: a ShareUpdate record with
// the changed state batches and the start offset, or, every
// SnapshotEvery updates or when whole is set, a ShareSnapshot of all of
// it. On failure the changes stay to be written with the next. pe.mu is
// held (or pe is not shared yet).
func (c *Coordinator) flush(pe *partEntry, whole bool) error {
	changes := pe.p.takeChanges()
	now := c.clock.Now()
	var rec Record
	if whole || pe.updates+1 >= c.cfg.SnapshotEvery {
		rec.Key = encodeKey(recSnapshot, pe.key)
		rec.Value = encodeValue(recSnapshot, stateValue{
			snapshotEpoch: pe.epoch + 1, leaderEpoch: -1, start: pe.p.start,
			createMs: pe.created.UnixMilli(), writeMs: now.UnixMilli(), batches: pe.p.snapshot(),
		})
	} else {
		rec.Key = encodeKey(recUpdate, pe.key)
		rec.Value = encodeValue(recUpdate, stateValue{snapshotEpoch: pe.epoch, leaderEpoch: -1, start: pe.p.start, batches: changes})
	}
	var at int64
	if c.log != nil {
		var err error
		if at, err = c.log.Append([]Record{rec}); err != nil {
			pe.p.changed = append(changes, pe.p.changed...)
			return err
		}
	}
	c.writes.Add(1)
	if rec.Key[1] != recSnapshot {
		pe.updates++
		return nil
	}
	pe.epoch++
	pe.updates = 0
	pe.snapped = now
	c.snapshotAt(pe.key, at)
	return nil
}

// armCold arms the cold-partition snapshot timer, if there is a log to
// write to.
func (c *Coordinator) armCold() {
	if c.log == nil || c.cfg.ColdSnapshotInterval < 0 {
		return
	}
	a := c.afterFunc(c.clock.Now().Add(c.cfg.ColdSnapshotInterval), func(a *armed) {
		c.snapshotCold()
		c.mu.Lock()
		mine := c.cold == a && !c.closed
		c.mu.Unlock()
		if mine {
			c.armCold()
		}
	})
	c.mu.Lock()
	if c.closed && a != nil {
		if a.stop.Stop() {
			c.callbacks.Done()
		}
		a = nil
	}
	c.cold = a
	c.mu.Unlock()
}

// snapshotCold writes a snapshot of every share-partition whose latest
// one is ColdSnapshotInterval old or older (Kafka's
// snapshotColdPartitions), unless nothing was written since the last
// pass: a quiet coordinator does not write the same snapshots again.
func (c *Coordinator) snapshotCold() {
	writes := c.writes.Load()
	if writes == c.coldWrites {
		return
	}
	now := c.clock.Now()
	c.mu.Lock()
	groups := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	for _, ge := range groups {
		ge.mu.Lock()
		parts := slices.Collect(maps.Values(ge.parts))
		ge.mu.Unlock()
		for _, pe := range parts {
			pe.mu.Lock()
			if !pe.gone && now.Sub(pe.snapped) >= c.cfg.ColdSnapshotInterval {
				if err := c.flush(pe, true); err != nil {
					c.cfg.Logger.Warn("share: snapshot a cold share-partition", "group", pe.key.group, "err", err)
				}
			}
			pe.mu.Unlock()
		}
	}
	c.coldWrites = c.writes.Load() // with this pass's own
}

// snapshotAt notes that the latest snapshot of a share-partition is at
// offset at of the log, and drops the records no share-partition needs
// any more: those before the oldest latest snapshot.
func (c *Coordinator) snapshotAt(k stateKey, at int64) {
	if c.pruner == nil {
		return
	}
	c.pruneMu.Lock()
	c.snaps[k] = at
	oldest := int64(-1)
	for _, o := range c.snaps {
		if oldest < 0 || o < oldest {
			oldest = o
		}
	}
	if oldest <= c.pruned {
		c.pruneMu.Unlock()
		return
	}
	c.pruned = oldest
	c.pruneMu.Unlock()
	if err := c.pruner.DeleteBefore(oldest); err != nil {
		c.cfg.Logger.Warn("share: drop obsolete records of __share_group_state", "before", oldest, "err", err)
	}
}

// forgetSnapshot: the share-partition of k was deleted.
func (c *Coordinator) forgetSnapshot(k stateKey) {
	c.pruneMu.Lock()
	delete(c.snaps, k)
	c.pruneMu.Unlock()
}

// armLock arms the share-partition's lock timer to fire at at, unless it
// fires earlier already (it then arms itself again). pe.mu is held.
func (c *Coordinator) armLock(pe *partEntry, at time.Time) {
	if pe.timer != nil {
		if !pe.timer.at.After(at) {
			return
		}
		if pe.timer.stop.Stop() {
			c.callbacks.Done()
		}
	}
	pe.timer = c.afterFunc(at, func(a *armed) { c.lockFired(pe, a) })
}

// lockFired is the lock timer a: it releases the records whose lock
// expired, stores that, and arms the timer at the next deadline.
func (c *Coordinator) lockFired(pe *partEntry, a *armed) {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.timer != a || pe.gone {
		return
	}
	pe.timer = nil
	if pe.p.expire(c.clock.Now()) > 0 {
		if err := c.flush(pe, false); err != nil {
			c.cfg.Logger.Warn("share: store records released at lock expiry", "group", pe.key.group, "err", err)
		}
		c.signal()
	}
	if next := pe.p.minDeadline; !next.IsZero() {
		c.armLock(pe, next)
	}
}
