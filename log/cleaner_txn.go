package log

import (
	"cmp"
	"slices"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
)

// Transactions in the log cleaner, Kafka's LogCleaner rules:
//
//   - nothing at or past the last stable offset is cleaned: the cleanable
//     part ends before the first segment that holds an offset at or past
//     it, so no batch of a transaction still open (or whose marker is not
//     replicated) is ever rewritten;
//   - the batches of an aborted transaction are removed (their records are
//     not mapped either: an aborted record never supersedes a committed
//     one); an emptied batch is kept, as any other, when it is its
//     producer's last;
//   - a marker stays while a batch of its transaction is still in the log
//     (for an ABORT, with its .txnindex entry, rewritten into the cleaned
//     segment); once none is, the pass that finds it so gives it a delete
//     horizon (KIP-534, delete.retention.ms from then), and the first pass
//     after the horizon removes it, unless it is its producer's last batch
//     (its epoch fences zombies);
//   - a marker's record is never compared with the offset map: control
//     keys are not record keys.
//
// cleanTxns follows the transactions through one pass's batches, in
// offset order from the log start, as Kafka's CleanedTransactionMetadata.

// cleanTxns is the transaction state of a cleaning pass.
type cleanTxns struct {
	// pending are the aborted transactions (.txnindex entries) not reached
	// yet, by first offset; seen dedupes them (an entry overlaps several
	// segments' ranges).
	pending []index.AbortedTxn
	seen    map[index.AbortedTxn]bool
	// aborted: producers whose aborted transaction the batches are in, and
	// whether a batch of it was seen this pass.
	aborted map[int64]*abortedInPass
	// committed: producers with a transactional batch seen since their
	// last marker that is not aborted (Kafka's ongoingCommittedTxns).
	committed map[int64]bool
}

type abortedInPass struct {
	entry    index.AbortedTxn
	observed bool
}

func newCleanTxns() *cleanTxns {
	return &cleanTxns{seen: map[index.AbortedTxn]bool{}, aborted: map[int64]*abortedInPass{}, committed: map[int64]bool{}}
}

// add adds aborted transactions, as collected for the next range.
func (t *cleanTxns) add(txns []index.AbortedTxn) {
	for _, a := range txns {
		if !t.seen[a] {
			t.seen[a] = true
			t.pending = append(t.pending, a)
		}
	}
	slices.SortStableFunc(t.pending, func(a, b index.AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
}

// upTo enters the aborted transactions that begin at or before offset.
func (t *cleanTxns) upTo(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if t.aborted[a.ProducerID] == nil {
			t.aborted[a.ProducerID] = &abortedInPass{entry: a}
		}
	}
}

// onBatch follows a data batch and reports whether it is aborted: to be
// removed (Kafka's onBatchRead).
func (t *cleanTxns) onBatch(h batch.Header) bool {
	t.upTo(h.LastOffset())
	if !h.Transactional() || h.ProducerID < 0 {
		return false
	}
	if a := t.aborted[h.ProducerID]; a != nil {
		a.observed = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onControl follows a control batch b and reports whether it may go (no
// batch of its transaction was seen: its data is gone), and, for an ABORT
// marker that stays, the .txnindex entry the cleaned segment must hold
// (Kafka's onControlBatchRead). A control batch that is not a marker
// stays.
func (t *cleanTxns) onControl(h batch.Header, b []byte) (discardable bool, entry *index.AbortedTxn) {
	t.upTo(h.LastOffset())
	m, _, err := batch.ParseMarker(b)
	if err != nil {
		return false, nil
	}
	if m.Commit {
		had := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !had, nil
	}
	a := t.aborted[h.ProducerID]
	delete(t.aborted, h.ProducerID)
	if a != nil && a.observed {
		e := a.entry
		return false, &e
	}
	return true, nil
}
