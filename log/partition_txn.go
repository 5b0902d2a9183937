package log

import (
	"fmt"
	"math"
	"slices"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
)

// Transactions in the partition (KIP-98), as Kafka's UnifiedLog keeps them:
//
//   - a transactional batch (attribute bit 4) goes through AppendBatch and
//     the idempotent producer's checks; its producer's first one opens the
//     producer's transaction at its first offset, and while it is open a
//     non-transactional batch of that producer is ErrInvalidTxnState.
//   - the transaction coordinator ends it with a COMMIT or ABORT marker,
//     appended by AppendMarker (Kafka's WriteTxnMarkers). A client's
//     control batch is refused (ErrTransactionsUnsupported), as Kafka does.
//   - an ABORT marker adds an entry to the .txnindex of the segment it is
//     in (segment.Segment.AppendAbortedTxn): the transaction's first
//     offset, the marker's offset and the LSO once it ended.
//   - LastStableOffset is the first offset a READ_COMMITTED reader may not
//     read yet.
//   - a follower replays the leader's markers the same way
//     (AppendAsFollower); open replays them from the newest snapshot
//     (loadProducerState) and rebuilds the .txnindex of every segment it
//     recovered from its .log.

// unstableTxn is a transaction that holds the LSO back: open (marker
// math.MaxInt64), or ended by a marker at offset marker that the high
// watermark has not passed yet.
type unstableTxn struct {
	first, marker int64
}

// publishTxnsLocked tells the producer state where the high watermark is
// and publishes the transactions that hold the LSO back, for
// LastStableOffset to read without the lock. Holds mu.
func (p *Partition) publishTxnsLocked() {
	ps := p.ps
	if len(ps.ongoing) == 0 && len(ps.unreplicated) == 0 {
		if p.unstable.Load() != nil {
			p.unstable.Store(nil)
		}
		return
	}
	ps.OnHighWatermark(p.hw.Load())
	u := make([]unstableTxn, 0, len(ps.ongoing)+len(ps.unreplicated))
	for _, o := range ps.ongoing {
		u = append(u, unstableTxn{first: o.FirstOffset, marker: math.MaxInt64})
	}
	for _, c := range ps.unreplicated {
		u = append(u, unstableTxn{first: c.FirstOffset, marker: c.LastOffset})
	}
	p.unstable.Store(&u)
}

// LastStableOffset is the partition's last stable offset (LSO): the first
// offset of the oldest transaction still open or whose marker is not yet
// below the high watermark, or the high watermark if there is none; always
// in [StartOffset, HighWatermark]. A READ_COMMITTED reader reads below it
// (Kafka's ListOffsets and Fetch answer it). Without transactions it is
// the high watermark.
func (p *Partition) LastStableOffset() int64 {
	hw := p.hw.Load()
	lso := hw
	if u := p.unstable.Load(); u != nil {
		for _, t := range *u {
			if t.marker >= hw && t.first < lso {
				lso = t.first
			}
		}
	}
	return max(lso, min(p.start.Load(), hw))
}

// AppendMarker appends the transaction marker m (COMMIT or ABORT) that ends
// producer m.ProducerID's transaction in this partition, as a partition
// leader does for its transaction coordinator's WriteTxnMarkers, and
// returns its offset. The marker's producer epoch may not be older than the
// producer's (ErrProducerFenced), nor its coordinator epoch older than the
// one of the producer's last marker (ErrTransactionCoordinatorFenced);
// either changes nothing. A marker for a producer without an open
// transaction here is appended and ends nothing (a retried marker). An
// ABORT that ends a transaction adds its entry to the .txnindex. With
// FlushMessages set, it returns once the marker is fsynced.
func (p *Partition) AppendMarker(m batch.Marker) (offset int64, err error) {
	b := batch.AppendMarker(make([]byte, 0, batch.MarkerSize), m)
	h, err := batch.ParseHeader(b)
	if err != nil {
		return 0, fmt.Errorf("log: append marker to %s: %w", p, err)
	}
	tm := TxnMarkerOf(m)
	p.mu.Lock()
	if err := p.writable(); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	if err := p.ps.CheckMarker(tm); err != nil {
		p.mu.Unlock()
		return 0, fmt.Errorf("log: append marker to %s: %w", p, err)
	}
	offset = p.leo.Load()
	batch.SetBaseOffset(b, offset)
	h.BaseOffset = offset
	epoch := p.epoch.Load()
	batch.SetPartitionLeaderEpoch(b, epoch)
	h.PartitionLeaderEpoch = epoch
	if err := p.writeLocked(b, h, nil, false); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	c, ended := p.ps.UpdateMarker(tm, offset)
	if err := p.indexAbortLocked(p.active, c, ended); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	p.publishTxnsLocked()
	p.mu.Unlock()

	if p.appended != nil {
		p.appended(p)
	}
	if fm := p.config().FlushMessages; fm > 0 && offset+1-p.recoveryPoint.Load() >= fm {
		if err := p.syncTo(offset+1, false); err != nil {
			return 0, err
		}
	}
	return offset, nil
}

// indexAbortLocked adds the .txnindex entry of transaction c to s, the
// segment holding its marker, if a marker ended it (ended) with an abort.
// A failure makes the partition read-only: the marker is in the log, its
// entry must be too. Holds mu.
func (p *Partition) indexAbortLocked(s *segment.Segment, c CompletedTxn, ended bool) error {
	if !ended || !c.Aborted {
		return nil
	}
	if err := s.AppendAbortedTxn(c.AbortedTxn()); err != nil {
		err = fmt.Errorf("log: %s: index aborted transaction: %w", p, err)
		p.fail(err)
		return err
	}
	return nil
}

// replaySegment replays the batches of s below end into ps, reading its
// markers; with rebuild, the transactions they abort are appended to s's
// .txnindex (s was recovered: Recover emptied it).
func (p *Partition) replaySegment(ps *ProducerState, s *segment.Segment, end int64, rebuild bool) error {
	var rerr error
	err := s.BatchHeadersControl(func(h batch.Header, control []byte) bool {
		if h.BaseOffset >= end {
			return false
		}
		if control == nil {
			ps.Replay(h)
			return true
		}
		c, ended, err := ps.ReplayBatch(control, h)
		if err != nil {
			rerr = err
			return false
		}
		if rebuild && ended && c.Aborted {
			if err := s.AppendAbortedTxn(c.AbortedTxn()); err != nil {
				rerr = err
				return false
			}
		}
		return true
	})
	if err == nil {
		err = rerr
	}
	return err
}

// rebuildTxnIndexes fills the .txnindex of the segments of rebuild below
// from, the offset of the snapshot the producer state is loaded from: the
// replay from there does not see their markers. It replays the log from
// the newest usable snapshot at or below the first of them (or, without
// one, from the log start) up to from, into a state it then drops. The
// snapshots are only read: the one at from stays the state's source.
func (p *Partition) rebuildTxnIndexes(from int64, rebuild map[*segment.Segment]bool) error {
	first := int64(math.MaxInt64)
	for s := range rebuild {
		first = min(first, s.BaseOffset())
	}
	if first >= from {
		return nil
	}
	offs, err := listProducerSnapshots(p.fs, p.dir)
	if err != nil {
		return fmt.Errorf("log: %s: rebuild transaction indexes: %w", p, err)
	}
	ps := NewProducerState(p.start.Load())
	for _, off := range slices.Backward(offs) {
		if off > first {
			continue
		}
		s, err := ReadProducerSnapshot(p.fs, producerSnapshotName(p.dir, off))
		if err != nil {
			continue // corrupt or unreadable: an older one, or the log start
		}
		s.endOffset = max(s.endOffset, p.start.Load())
		ps = s
		break
	}
	return p.replaySegments(ps, ps.EndOffset(), from, rebuild)
}
