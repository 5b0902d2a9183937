package share

import (
	"fmt"
	"time"
)

// The state of one share-partition (Kafka's SharePartition): which records
// of a topic partition a share group has delivered, to whom, how often, and
// what became of them. It is a value without IO or clock: time comes in
// with each call, and what must be made durable is collected as state
// batches (takeChanges) for the driver to write to __share_group_state.
//
// The records from the share-partition start offset (start) up to its end
// (start + len(recs)) are in flight, each in one of Kafka's four states;
// records past the end have not been delivered yet. A record is acquired
// by one member at a time, under a lock that expires LockDuration after
// the acquisition (or the last renewal); its delivery count grows with
// every acquisition. An acknowledgement moves an acquired record to
// Acknowledged (accept), back to Available (release) or to Archived
// (reject, or gap: an offset with no record); a release or an expired lock
// of a record delivered DeliveryCountLimit times archives it instead, so a
// poison record stops being redelivered. The start offset moves past the
// records that are Acknowledged or Archived; the records before it are
// done with.

// RecordState is a record's delivery state, numbered as Kafka numbers it
// (the DeliveryState of ShareSnapshot and ShareUpdate records).
type RecordState int8

// The record states.
const (
	Available    RecordState = 0 // may be acquired
	Acquired     RecordState = 1 // delivered to a member, locked
	Acknowledged RecordState = 2 // accepted: done
	Archived     RecordState = 4 // rejected, a gap, or its delivery count exhausted: done
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return fmt.Sprintf("RecordState(%d)", int8(s))
}

// AckType is an acknowledgement's type, numbered as Kafka's
// AcknowledgeType in ShareFetch and ShareAcknowledge.
type AckType int8

// The acknowledgement types.
const (
	AckGap     AckType = 0 // the offset holds no record (compacted, a control batch): archived
	AckAccept  AckType = 1 // processed: acknowledged
	AckRelease AckType = 2 // give it back: available again, to any member
	AckReject  AckType = 3 // unprocessable: archived
	AckRenew   AckType = 4 // keep it: its lock starts anew (KIP-1222)
)

// AcquiredRange is a run of offsets acquired together with one delivery
// count (Kafka's AcquiredRecords of a ShareFetch answer).
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// AckBatch acknowledges the offsets First to Last: Types holds one type
// for all of them, or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// StateBatch is a run of offsets in one state with one delivery count, as
// ShareSnapshot and ShareUpdate records hold them.
type StateBatch struct {
	First, Last   int64
	State         RecordState
	DeliveryCount int16
}

// inflight is one in-flight record.
type inflight struct {
	state    RecordState
	count    int16     // deliveries so far
	member   string    // the acquiring member, while Acquired
	deadline time.Time // of its lock, while Acquired
}

// partition is a share-partition's state.
type partition struct {
	cfg   PartitionConfig
	start int64      // the share-partition start offset (SPSO)
	recs  []inflight // recs[i] is offset start+i
	// avail: no record before recs[avail] is Available (a hint for
	// acquire, which starts there).
	avail int
	// minDeadline is at most the earliest lock deadline of an acquired
	// record (zero: no record is acquired).
	minDeadline time.Time
	changed     []StateBatch // durable changes not yet taken

	// What rollback restores: the state before the last acknowledge.
	undo struct {
		start       int64
		recs        []inflight
		avail       int
		minDeadline time.Time
		changed     int
		saved       []savedRecord
	}
}

type savedRecord struct {
	i int
	r inflight
}

func newPartition(cfg PartitionConfig, start int64) *partition {
	return &partition{cfg: cfg.withDefaults(), start: start}
}

// end is the offset after the last in-flight record.
func (p *partition) end() int64 { return p.start + int64(len(p.recs)) }

// acquire acquires for member at most max records: the Available in-flight
// records first, in offset order, then records past the end, up to
// logEnd (the offset up to which the log may be read) and as long as the
// in-flight records number fewer than MaxInFlight. It returns the
// acquired offsets, in order, and the deadline of their lock.
func (p *partition) acquire(now time.Time, member string, max int, logEnd int64) ([]AcquiredRange, time.Time) {
	p.expire(now)
	deadline := now.Add(p.cfg.LockDuration)
	var out []AcquiredRange
	n := 0
	i := p.avail
	for ; i < len(p.recs) && n < max; i++ {
		r := &p.recs[i]
		if r.state != Available {
			continue
		}
		r.state, r.member, r.deadline = Acquired, member, deadline
		r.count++
		n++
		out = appendRange(out, p.start+int64(i), r.count)
	}
	p.avail = i // every Available record before i was just acquired
	grew := false
	for end := p.end(); end < logEnd && n < max && len(p.recs) < p.cfg.MaxInFlight; end++ {
		p.recs = append(p.recs, inflight{state: Acquired, count: 1, member: member, deadline: deadline})
		n++
		out = appendRange(out, end, 1)
		grew = true
	}
	if grew {
		p.avail = len(p.recs) // the new records are acquired: none Available
	}
	if n > 0 && (p.minDeadline.IsZero() || deadline.Before(p.minDeadline)) {
		p.minDeadline = deadline
	}
	return out, deadline
}

// mayAcquire reports whether acquire could find records to acquire (it
// may still find none): an Available in-flight record, or room for
// records past the end.
func (p *partition) mayAcquire() bool {
	return p.avail < len(p.recs) || len(p.recs) < p.cfg.MaxInFlight
}

func appendRange(out []AcquiredRange, off int64, count int16) []AcquiredRange {
	if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].DeliveryCount == count {
		out[k].Last = off
		return out
	}
	return append(out, AcquiredRange{First: off, Last: off, DeliveryCount: count})
}

// acknowledge applies a member's acknowledgements, all or none: each
// offset must be acquired by member and its lock not expired at now
// (ErrInvalidRecordState otherwise), each batch well formed
// (ErrInvalidRequest). It returns the new lock deadline if a record was
// renewed (zero otherwise).
func (p *partition) acknowledge(now time.Time, member string, batches []AckBatch) (renewed time.Time, err error) {
	p.expire(now)
	prev := int64(-1)
	for _, b := range batches {
		if err := b.validate(prev); err != nil {
			return time.Time{}, err
		}
		prev = b.Last
		if b.First < p.start || b.Last >= p.end() {
			return time.Time{}, fmt.Errorf("%w: offsets %d-%d are not in flight (%d-%d)", ErrInvalidRecordState, b.First, b.Last, p.start, p.end()-1)
		}
		for off := b.First; off <= b.Last; off++ {
			r := &p.recs[off-p.start]
			if r.state != Acquired || r.member != member {
				return time.Time{}, fmt.Errorf("%w: offset %d is %v, not acquired by member %q", ErrInvalidRecordState, off, r.state, member)
			}
		}
	}
	u := &p.undo
	u.start, u.recs, u.avail, u.minDeadline, u.changed, u.saved = p.start, p.recs, p.avail, p.minDeadline, len(p.changed), u.saved[:0]
	deadline := now.Add(p.cfg.LockDuration)
	for _, b := range batches {
		for off := b.First; off <= b.Last; off++ {
			u.saved = append(u.saved, savedRecord{int(off - p.start), p.recs[off-p.start]})
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			i := int(off - p.start)
			r := &p.recs[i]
			switch t {
			case AckAccept:
				p.finish(i, Acknowledged)
			case AckGap, AckReject:
				p.finish(i, Archived)
			case AckRelease:
				p.release(i)
			case AckRenew:
				r.deadline = deadline
				renewed = deadline
			}
		}
	}
	p.advance()
	return renewed, nil
}

// rollback undoes the last successful acknowledge, whose changes could
// not be made durable. Nothing may have changed the partition since.
func (p *partition) rollback() {
	u := &p.undo
	p.start, p.recs, p.avail, p.minDeadline = u.start, u.recs, u.avail, u.minDeadline
	p.changed = p.changed[:u.changed]
	for _, s := range u.saved {
		p.recs[s.i] = s.r
	}
}

// validate checks a batch that follows one ending at prev.
func (b AckBatch) validate(prev int64) error {
	switch {
	case b.First < 0 || b.Last < b.First:
		return fmt.Errorf("%w: acknowledgement batch %d-%d", ErrInvalidRequest, b.First, b.Last)
	case b.First <= prev:
		return fmt.Errorf("%w: acknowledgement batch %d-%d overlaps or precedes the one before, ending at %d", ErrInvalidRequest, b.First, b.Last, prev)
	case len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1:
		return fmt.Errorf("%w: %d acknowledgement types for offsets %d-%d", ErrInvalidRequest, len(b.Types), b.First, b.Last)
	}
	for _, t := range b.Types {
		if t < AckGap || t > AckRenew {
			return fmt.Errorf("%w: acknowledgement type %d", ErrInvalidRequest, t)
		}
	}
	return nil
}

// finish moves recs[i] to a final state.
func (p *partition) finish(i int, s RecordState) {
	r := &p.recs[i]
	r.state, r.member, r.deadline = s, "", time.Time{}
	p.record(p.start+int64(i), s, r.count)
}

// release gives recs[i] back: Available, or Archived once delivered
// DeliveryCountLimit times.
func (p *partition) release(i int) {
	r := &p.recs[i]
	if int(r.count) >= p.cfg.DeliveryCountLimit {
		p.finish(i, Archived)
		return
	}
	r.state, r.member, r.deadline = Available, "", time.Time{}
	p.avail = min(p.avail, i)
	p.record(p.start+int64(i), Available, r.count)
}

// expire releases the records whose lock expired at or before now, and
// reports how many.
func (p *partition) expire(now time.Time) int {
	if p.minDeadline.IsZero() || now.Before(p.minDeadline) {
		return 0
	}
	n := 0
	var next time.Time
	for i := range p.recs {
		r := &p.recs[i]
		if r.state != Acquired {
			continue
		}
		if !r.deadline.After(now) {
			p.release(i)
			n++
		} else if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	p.minDeadline = next
	if n > 0 {
		p.advance()
	}
	return n
}

// unacquire gives back the records from offset from on that member
// acquired and that were never delivered (a fetch could not return
// them): Available again, their delivery count as before the acquisition.
func (p *partition) unacquire(member string, from int64) int {
	n := 0
	for i := max(int(from-p.start), 0); i < len(p.recs); i++ {
		r := &p.recs[i]
		if r.state != Acquired || r.member != member {
			continue
		}
		r.state, r.member, r.deadline = Available, "", time.Time{}
		r.count--
		p.avail = min(p.avail, i)
		n++
	}
	return n
}

// releaseMember releases the records member holds (it left, or its share
// session ended) and reports how many.
func (p *partition) releaseMember(member string) int {
	n := 0
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			p.release(i)
			n++
		}
	}
	if n > 0 {
		p.advance()
	}
	return n
}

// advance moves the start offset past the finished records at the head.
func (p *partition) advance() {
	k := 0
	for k < len(p.recs) && (p.recs[k].state == Acknowledged || p.recs[k].state == Archived) {
		k++
	}
	p.drop(k)
}

// drop removes the first k in-flight records.
func (p *partition) drop(k int) {
	if k == 0 {
		return
	}
	// Not cleared: a rollback restores the slice as it was. An append
	// that outgrows the array copies the live records only.
	p.recs = p.recs[k:]
	p.start += int64(k)
	p.avail = max(p.avail-k, 0)
}

// logStartMoved: the log's start offset moved to logStart (retention,
// DeleteRecords); the records before it are gone, and the share-partition
// starts there if it started before. It reports whether the start moved.
func (p *partition) logStartMoved(logStart int64) bool {
	if logStart <= p.start {
		return false
	}
	k := min(logStart-p.start, int64(len(p.recs)))
	p.drop(int(k))
	p.start = logStart
	return true
}

// resetTo starts the share-partition anew at offset, with nothing in
// flight (AlterShareGroupOffsets, of a group without members).
func (p *partition) resetTo(offset int64) {
	p.drop(len(p.recs))
	p.start, p.avail, p.minDeadline = offset, 0, time.Time{}
}

// record notes a durable change.
func (p *partition) record(off int64, s RecordState, count int16) {
	if k := len(p.changed) - 1; k >= 0 {
		c := &p.changed[k]
		if c.Last == off-1 && c.State == s && c.DeliveryCount == count {
			c.Last = off
			return
		}
	}
	p.changed = append(p.changed, StateBatch{First: off, Last: off, State: s, DeliveryCount: count})
}

// takeChanges returns the durable changes since the last call, leaving
// none.
func (p *partition) takeChanges() []StateBatch {
	c := p.changed
	p.changed = nil
	return c
}

// snapshot returns the in-flight records as state batches: an acquired
// record as Available with its delivery count (its lock does not outlive
// the coordinator).
func (p *partition) snapshot() []StateBatch {
	var out []StateBatch
	for i, r := range p.recs {
		s := r.state
		if s == Acquired {
			s = Available
		}
		off := p.start + int64(i)
		if k := len(out) - 1; k >= 0 && out[k].Last == off-1 && out[k].State == s && out[k].DeliveryCount == r.count {
			out[k].Last = off
			continue
		}
		out = append(out, StateBatch{First: off, Last: off, State: s, DeliveryCount: r.count})
	}
	return out
}

// maxWindow bounds the in-flight records a persisted state may make (a
// corrupt record must not make the coordinator allocate without end):
// offsets past it are ignored.
const maxWindow = 1 << 20

// apply applies a persisted state: a start offset (negative: unchanged)
// and state batches, as read back from a ShareSnapshot (after resetTo) or
// ShareUpdate record. Offsets before the start are ignored; offsets
// between the end and a batch become Available, never delivered.
func (p *partition) apply(start int64, batches []StateBatch) {
	if start >= 0 {
		if start < p.start {
			p.resetTo(start)
		} else {
			p.logStartMoved(start)
		}
	}
	for _, b := range batches {
		s := b.State
		if s == Acquired {
			s = Available
		}
		for off := max(b.First, p.start); off <= b.Last && off-p.start < maxWindow; off++ {
			for off >= p.end() {
				p.recs = append(p.recs, inflight{})
			}
			p.recs[off-p.start] = inflight{state: s, count: b.DeliveryCount}
		}
	}
	p.avail = 0
	p.advance()
}

// initialStart is where a share-partition with no state starts:
// share.auto.offset.reset over a log from logStart to logEnd.
func initialStart(r OffsetReset, logStart, logEnd int64) int64 {
	if r == ResetEarliest {
		return logStart
	}
	return logEnd
}
