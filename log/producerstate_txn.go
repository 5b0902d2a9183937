package log

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
)

// Transactions in the producer state (KIP-98), as Kafka's
// ProducerStateManager keeps them. A producer's first transactional batch
// opens its transaction at that batch's first offset; the COMMIT or ABORT
// marker its coordinator has the partition append ends it:
//
//	err := ps.CheckMarker(m)           // before appending the marker
//	append the marker's control batch at offset O
//	c, ok := ps.UpdateMarker(m, O)     // ok: a transaction ended
//	if ok && c.Aborted { append c.AbortedTxn() to the segment's .txnindex }
//
// The last stable offset (LSO) is the first offset a READ_COMMITTED reader
// may not read yet: the first offset of the oldest transaction still open,
// or ended by a marker not yet replicated (below the high watermark), and
// at most the high watermark. OnHighWatermark forgets the completed
// transactions whose marker the high watermark has passed.
//
// Snapshots keep each open transaction (the current_txn_first_offset of
// Kafka's snapshot entry) and the coordinator epoch, so that a restart
// knows the transactions its log holds open; a producer with an open
// transaction is never expired nor evicted.

var (
	// ErrInvalidTxnState: a producer with an open transaction writes a
	// batch outside it (Kafka's INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("log: invalid transaction state")
	// ErrTransactionCoordinatorFenced: a transaction marker from a
	// coordinator epoch older than the one of the producer's last marker: a
	// coordinator that lost its partition (Kafka's
	// TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("log: transaction coordinator fenced")
)

// OngoingTxn is an open transaction of the partition.
type OngoingTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// CompletedTxn is a transaction a marker ended.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the marker's offset
	Aborted     bool
	// LastStableOffset is the LSO once the transaction ended, if every
	// marker were replicated: the first offset of the oldest transaction
	// still open, or LastOffset+1 (Kafka's lastStableOffset(completedTxn)).
	LastStableOffset int64
}

// AbortedTxn is the .txnindex entry of an aborted transaction.
func (c CompletedTxn) AbortedTxn() index.AbortedTxn {
	return index.AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset}
}

// TxnMarker is what the producer state needs of a transaction marker.
type TxnMarker struct {
	ProducerID       int64
	Epoch            int16
	CoordinatorEpoch int32
	Commit           bool
	Timestamp        int64 // ms
}

// TxnMarkerOf returns the producer fields of a marker batch.
func TxnMarkerOf(m batch.Marker) TxnMarker {
	return TxnMarker{ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Commit, Timestamp: m.Timestamp}
}

// openTxn records producer id's transaction, open from firstOffset.
func (s *ProducerState) openTxn(id, firstOffset int64) {
	if s.txn == nil {
		s.txn = map[int64]txnFields{}
	}
	t := s.txnOf(id)
	t.txnFirstOffset = firstOffset
	s.txn[id] = t
	// Transactions open in offset order, but a snapshot's come in
	// producer order: keep the slice sorted.
	i, _ := slices.BinarySearchFunc(s.ongoing, firstOffset, func(o OngoingTxn, off int64) int {
		return cmp.Compare(o.FirstOffset, off)
	})
	s.ongoing = slices.Insert(s.ongoing, i, OngoingTxn{ProducerID: id, FirstOffset: firstOffset})
}

// CheckMarker decides whether marker m may be appended, as Kafka's
// appendEndTxnMarker checks it; it changes nothing. An epoch older than the
// producer's is ErrProducerFenced (a newer one is fine: from transaction
// version 2 the coordinator bumps the epoch with every marker); a
// coordinator epoch older than the producer's last marker's is
// ErrTransactionCoordinatorFenced. A marker for a producer without an open
// transaction is accepted and ends nothing (a retried marker, or an abort
// of a transaction that never wrote here).
func (s *ProducerState) CheckMarker(m TxnMarker) error {
	if m.ProducerID < 0 || m.Epoch < 0 {
		return fmt.Errorf("%w: marker of producer %d epoch %d", ErrInvalidSequence, m.ProducerID, m.Epoch)
	}
	if e, ok := s.producers[m.ProducerID]; ok && e.epoch != noProducerEpoch && m.Epoch < e.epoch {
		return fmt.Errorf("%w: marker of producer %d epoch %d, latest epoch %d", ErrProducerFenced, m.ProducerID, m.Epoch, e.epoch)
	}
	if t, ok := s.txn[m.ProducerID]; ok && m.CoordinatorEpoch < t.coordinatorEpoch {
		return fmt.Errorf("%w: marker of producer %d from coordinator epoch %d, last %d", ErrTransactionCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, t.coordinatorEpoch)
	}
	return nil
}

// UpdateMarker records marker m, appended at offset, and moves EndOffset
// past it. It returns the transaction it ended, if the producer had one
// open; an aborted one goes to the segment's .txnindex (c.AbortedTxn()). It
// does not check m: call CheckMarker first, except when replaying the log.
func (s *ProducerState) UpdateMarker(m TxnMarker, offset int64) (CompletedTxn, bool) {
	s.endOffset = max(s.endOffset, offset+1)
	e := s.producers[m.ProducerID]
	if e == nil {
		if len(s.producers) >= s.maxProducers {
			s.evictProducers()
		}
		e = &producerEntry{epoch: m.Epoch}
		s.producers[m.ProducerID] = e
	}
	if e.epoch != m.Epoch {
		// A bumped epoch (transaction version 2): the next batch starts a
		// new sequence at 0.
		e.epoch, e.n = m.Epoch, 0
	}
	s.updates++
	e.touched = s.updates
	e.lastTimestamp = m.Timestamp
	t := s.txnOf(m.ProducerID)
	if s.txn == nil {
		s.txn = map[int64]txnFields{}
	}
	s.txn[m.ProducerID] = txnFields{coordinatorEpoch: m.CoordinatorEpoch, txnFirstOffset: -1}
	if t.txnFirstOffset < 0 {
		return CompletedTxn{}, false
	}
	if i := slices.IndexFunc(s.ongoing, func(o OngoingTxn) bool { return o.ProducerID == m.ProducerID }); i >= 0 {
		s.ongoing = slices.Delete(s.ongoing, i, i+1)
	}
	c := CompletedTxn{ProducerID: m.ProducerID, FirstOffset: t.txnFirstOffset, LastOffset: offset, Aborted: !m.Commit, LastStableOffset: offset + 1}
	if len(s.ongoing) > 0 {
		c.LastStableOffset = s.ongoing[0].FirstOffset
	}
	s.unreplicated = append(s.unreplicated, c)
	return c, true
}

// OngoingTxns returns the open transactions, oldest first.
func (s *ProducerState) OngoingTxns() []OngoingTxn {
	if len(s.ongoing) == 0 {
		return nil
	}
	return slices.Clone(s.ongoing)
}

// FirstUnstableOffset is the first offset of the oldest transaction that is
// open or whose marker is not yet below the high watermark; false if none.
func (s *ProducerState) FirstUnstableOffset() (int64, bool) {
	first, ok := int64(0), false
	if len(s.ongoing) > 0 {
		first, ok = s.ongoing[0].FirstOffset, true
	}
	for _, c := range s.unreplicated {
		if !ok || c.FirstOffset < first {
			first, ok = c.FirstOffset, true
		}
	}
	return first, ok
}

// LastStableOffset is the LSO of a partition whose high watermark is hw:
// the first unstable offset, at most hw.
func (s *ProducerState) LastStableOffset(hw int64) int64 {
	if first, ok := s.FirstUnstableOffset(); ok && first < hw {
		return first
	}
	return hw
}

// OnHighWatermark forgets the completed transactions whose marker is below
// hw: replicated, they no longer hold the LSO back.
func (s *ProducerState) OnHighWatermark(hw int64) {
	s.unreplicated = slices.DeleteFunc(s.unreplicated, func(c CompletedTxn) bool { return c.LastOffset < hw })
}

// ReplayBatch applies a whole batch read from the log, as Replay does its
// header, reading the marker of a control batch: it returns the
// transaction the marker ended, if any (recovery rebuilds the .txnindex of
// the segment from the aborted ones). A control batch that is not a
// transaction marker only moves EndOffset; a marker that does not parse is
// ErrCorrupt.
func (s *ProducerState) ReplayBatch(b []byte, h batch.Header) (CompletedTxn, bool, error) {
	if h.NextOffset() <= s.endOffset {
		return CompletedTxn{}, false, nil
	}
	if !h.Control() {
		s.Replay(h)
		return CompletedTxn{}, false, nil
	}
	m, _, err := batch.ParseMarker(b)
	if errors.Is(err, batch.ErrNotMarker) {
		s.endOffset = max(s.endOffset, h.NextOffset())
		return CompletedTxn{}, false, nil
	}
	if err != nil {
		return CompletedTxn{}, false, fmt.Errorf("log: replay marker at offset %d: %w: %w", h.BaseOffset, ErrCorrupt, err)
	}
	c, ok := s.UpdateMarker(TxnMarkerOf(m), h.BaseOffset)
	return c, ok, nil
}
