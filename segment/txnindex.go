package segment

import (
	"fmt"

	"github.com/strata-log/strata/index"
)

// The segment's transaction index (.txnindex, index.TxnIndex): one entry
// per transaction aborted by an ABORT marker in the segment. Unlike the
// offset and time indexes it is not derived from the segment alone (an
// entry holds the transaction's first offset, maybe in an earlier segment,
// and the partition's last stable offset), so the partition writes it
// (AppendAbortedTxn) and, for a segment Recover rebuilt, fills it again
// from its replay of the producer state. Recover, TruncateTo, Delete and
// Unlink reset, cut and remove it with the other files.
//
// The file exists only once an entry was appended; it is opened on first
// use and stays open until the segment is closed (aborts are rare: few
// segments have one). Sync makes its new entries durable with the .log, so
// that the recovery point never passes an entry that a crash could lose;
// past the recovery point, recovery rebuilds it. A torn tail found when it
// is opened is cut off (index.TxnIndex.RecoverTail): no corrupt entry is
// ever returned.

// txnIndexLocked returns the open transaction index. Holds txnMu.
func (s *Segment) txnIndexLocked() (*index.TxnIndex, error) {
	if s.txn != nil {
		return s.txn, nil
	}
	if s.noReopen.Load() || s.closed.Load() {
		return nil, ErrClosed
	}
	x, err := index.OpenTxnIndex(s.fs, s.path(".txnindex"), s.base)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	if x.SanityCheck() != nil {
		if _, err := x.RecoverTail(); err != nil {
			x.Close()
			return nil, fmt.Errorf("segment: %w", err)
		}
		if x.SanityCheck() != nil {
			// RecoverTail keeps only entries that pass: unreachable.
			x.Close()
			return nil, fmt.Errorf("segment: %s: %w", s.path(".txnindex"), index.ErrCorruptIndex)
		}
	}
	s.txn = x
	return x, nil
}

// AppendAbortedTxn adds the entry of a transaction aborted by the ABORT
// marker at t.LastOffset, which is in this segment. The caller holds the
// writer lock. The entry is durable after the next Sync or Flush.
func (s *Segment) AppendAbortedTxn(t index.AbortedTxn) error {
	if t.LastOffset < s.base {
		return fmt.Errorf("segment: aborted transaction %+v: %w: its marker is before the segment at %d", t, index.ErrInvalidEntry, s.base)
	}
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	x, err := s.txnIndexLocked()
	if err != nil {
		return err
	}
	if err := x.Append(t); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	s.txnDirty.Store(true)
	return nil
}

// AbortedTxns returns the aborted transactions of the segment's
// .txnindex that overlap [from, to), and whether no later segment can hold
// one (index.TxnIndex.Collect). A segment without aborts returns none.
func (s *Segment) AbortedTxns(from, to int64) (txns []index.AbortedTxn, complete bool, err error) {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	x, err := s.txnIndexLocked()
	if err != nil {
		return nil, false, err
	}
	return x.Collect(from, to)
}

// syncTxnIndex makes the .txnindex entries appended since the last call
// durable.
func (s *Segment) syncTxnIndex() error {
	if !s.txnDirty.Swap(false) {
		return nil
	}
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	if s.txn == nil {
		return nil
	}
	if err := s.txn.Flush(); err != nil {
		s.txnDirty.Store(true)
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// resetTxnIndex drops every entry, for a rebuild (Recover). Holds the
// writer lock.
func (s *Segment) resetTxnIndex() error {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	x, err := s.txnIndexLocked()
	if err != nil {
		return err
	}
	if err := x.Reset(); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	s.txnDirty.Store(true)
	return nil
}

// truncateTxnIndex drops the entries whose marker is at or after offset,
// durably.
func (s *Segment) truncateTxnIndex(offset int64) error {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	x, err := s.txnIndexLocked()
	if err != nil {
		return err
	}
	if err := x.TruncateTo(offset); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if err := x.Flush(); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// closeTxnIndex closes the transaction index, if open.
func (s *Segment) closeTxnIndex() {
	s.txnMu.Lock()
	defer s.txnMu.Unlock()
	if s.txn != nil {
		s.txn.Close()
		s.txn = nil
	}
}
