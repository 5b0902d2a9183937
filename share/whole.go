package share

import (
	"context"
	"fmt"
	"time"
)

// Whole batches (KIP-1206). A Kafka share fetch in its default mode
// (batch_optimized) acquires whole log batches: MaxRecords is a soft
// limit, the last acquired offset is the last of a batch, so that no
// record goes to the member without being its own. The driver, which
// reads the log, learns where the batch of the last acquired record ends
// only after Acquire; AcquireRest then acquires the rest of that batch.

// AcquireRest acquires for member the records of partition t after offset
// last up to offset through (the rest of the log batch that holds last),
// if last is the share-partition's last record in flight and member's
// (its Acquire just took it from the log's end): records past the end,
// below the log's high watermark and within the in-flight limit
// (PartitionConfig.MaxInFlight). It returns the range acquired; ok is
// false when none was. The member reads their records from the same batch
// and acknowledges each, as with Acquire.
func (c *Coordinator) AcquireRest(ctx context.Context, group, member string, t TopicPartition, last, through int64) (r AcquiredRange, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return AcquiredRange{}, false, err
	}
	if through <= last {
		return AcquiredRange{}, false, nil
	}
	if err := c.leads(t); err != nil {
		return AcquiredRange{}, false, err
	}
	ge, err := c.lookup(group, false)
	if err != nil {
		return AcquiredRange{}, false, err
	}
	ge.mu.Lock()
	pe := ge.parts[t]
	ge.mu.Unlock()
	if pe == nil {
		return AcquiredRange{}, false, nil
	}
	_, logEnd, err := c.cfg.Offsets(t)
	if err != nil {
		return AcquiredRange{}, false, fmt.Errorf("share: offsets of %s: %w", t, err)
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	if pe.gone {
		return AcquiredRange{}, false, nil
	}
	r, deadline, ok := pe.p.acquireTail(c.clock.Now(), member, last, through, logEnd)
	if ok {
		c.armLock(pe, deadline)
	}
	return r, ok, nil
}

// acquireTail acquires for member the records from last+1 up to through
// and below logEnd past the share-partition's end, if last is its last
// in-flight record and member holds it, its lock not expired at now.
func (p *partition) acquireTail(now time.Time, member string, last, through, logEnd int64) (AcquiredRange, time.Time, bool) {
	if last < p.start || last+1 != p.end() || through <= last || logEnd <= last+1 {
		return AcquiredRange{}, time.Time{}, false
	}
	end := logEnd
	if through < logEnd-1 {
		end = through + 1 // through+1 would overflow at math.MaxInt64
	}
	if r := p.recs[last-p.start]; r.state != Acquired || r.member != member || !r.deadline.After(now) {
		return AcquiredRange{}, time.Time{}, false // an expired lock is no longer the member's
	}
	deadline := now.Add(p.cfg.LockDuration)
	off := last + 1
	for ; off < end && len(p.recs) < p.cfg.MaxInFlight; off++ {
		p.recs = append(p.recs, inflight{state: Acquired, count: 1, member: member, deadline: deadline})
	}
	if off == last+1 {
		return AcquiredRange{}, time.Time{}, false
	}
	if p.minDeadline.IsZero() || deadline.Before(p.minDeadline) {
		p.minDeadline = deadline
	}
	return AcquiredRange{First: last + 1, Last: off - 1, DeliveryCount: 1}, deadline, true
}
