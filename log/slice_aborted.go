package log

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
)

// Reading committed records (KIP-98's READ_COMMITTED), as Kafka does it:
//
//   - the broker reads below the last stable offset (FetchTxnCommitted), so
//     no record of a transaction still open is returned, and answers the
//     aborted transactions that overlap what it read, from the .txnindex of
//     the segments (Partition.AbortedTransactions: Kafka's
//     collectAbortedTransactions);
//   - the reader drops the batches of those transactions (abortFilter, as
//     Kafka's consumers do): going through the batches in offset order, a
//     producer's aborted transaction is entered at the first batch at or
//     after its first offset, its transactional batches are skipped until
//     its ABORT marker, and control batches are never records.
//
// The bytes of a fetch stay the bytes of the segments (sendfile on the
// Kafka path): the filtering is the reader's.

// IsolationLevel says which records a consumer reads (Kafka's
// isolation.level).
type IsolationLevel int8

const (
	// ReadUncommitted reads every record below the high watermark,
	// records of transactions still open or aborted included (Kafka's
	// default). The zero value.
	ReadUncommitted IsolationLevel = iota
	// ReadCommitted reads below the last stable offset and skips the
	// records of aborted transactions.
	ReadCommitted
)

func (l IsolationLevel) String() string {
	switch l {
	case ReadUncommitted:
		return "read_uncommitted"
	case ReadCommitted:
		return "read_committed"
	}
	return fmt.Sprintf("IsolationLevel(%d)", int8(l))
}

// fetchIsolation is the fetch isolation of a consumer at level l.
func (l IsolationLevel) fetchIsolation() FetchIsolation {
	if l == ReadCommitted {
		return FetchTxnCommitted
	}
	return FetchHighWatermark
}

// LatestStableOffset asks ListOffset for the last stable offset: where a
// READ_COMMITTED consumer starts at "latest". It is not a Kafka timestamp:
// a Kafka ListOffsets asks for it as latest (-1) with isolation level
// read_committed.
const LatestStableOffset int64 = -100

// AbortedTransaction is one aborted transaction of a fetch's range: a
// READ_COMMITTED reader skips producer ProducerID's transactional batches
// from FirstOffset up to its ABORT marker (Kafka's FetchResponse
// AbortedTransaction).
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

// AbortedTransactions returns the aborted transactions that overlap
// [from, to), the transactions whose ABORT marker is at or after from and
// whose first offset is below to, read from the .txnindex of the segments
// from the one holding from on, until an entry shows that no later segment
// holds one (Kafka's collectAbortedTransactions). It appends to dst.
func (p *Partition) AbortedTransactions(dst []AbortedTransaction, from, to int64) ([]AbortedTransaction, error) {
	n := len(dst)
	err := p.abortedTxnEntries(from, to, func(t index.AbortedTxn) {
		dst = append(dst, AbortedTransaction{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset})
	}, func() { dst = dst[:n] })
	if err != nil {
		return dst[:n], err
	}
	return dst, nil
}

var errSegmentGone = errors.New("segment gone")

// abortedTxnEntries calls fn with the .txnindex entries that overlap
// [from, to), as AbortedTransactions finds them; restart, called before it
// looks again when the segments were replaced under it, undoes what fn got.
func (p *Partition) abortedTxnEntries(from, to int64, fn func(index.AbortedTxn), restart func()) error {
	for retry := 0; ; retry++ {
		if p.closed.Load() {
			return p.closedErr()
		}
		err := p.collectAborted(from, to, fn)
		if errors.Is(err, errSegmentGone) && retry < 100 {
			// The cleaner or retention replaced segments under us: again,
			// in the new list.
			restart()
			continue
		}
		if err != nil {
			return fmt.Errorf("log: aborted transactions of %s in [%d, %d): %w", p, from, to, err)
		}
		return nil
	}
}

func (p *Partition) collectAborted(from, to int64, fn func(index.AbortedTxn)) error {
	segs := *p.segs.Load()
	for _, s := range segs {
		if s.NextOffset() <= from && s != segs[len(segs)-1] {
			continue
		}
		if !s.Acquire() {
			return errSegmentGone
		}
		txns, complete, err := s.AbortedTxns(from, to)
		s.Release()
		if errors.Is(err, segment.ErrClosed) || errors.Is(err, fs.ErrNotExist) {
			// Retired, or its index renamed by the cleaner's install.
			return errSegmentGone
		}
		if err != nil {
			return err
		}
		for _, t := range txns {
			fn(t)
		}
		if complete {
			break
		}
	}
	return nil
}

// abortFilter drops the batches of aborted transactions from the batches
// of one read, given the read's aborted transactions, as Kafka's consumers
// do. Call skip with every batch in offset order.
type abortFilter struct {
	txns   []AbortedTransaction // by first offset; those not reached yet
	active []int64              // producers whose aborted transaction the batches are in
	it     batch.Iter           // reads a marker's record without allocating
	rec    batch.Record
}

// reset starts the filter for a read whose aborted transactions are txns,
// which it sorts (they are the filter's from then on).
func (f *abortFilter) reset(txns []AbortedTransaction) {
	slices.SortFunc(txns, func(a, b AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	f.txns, f.active = txns, f.active[:0]
}

// skip reports whether the batch b, with header h, holds no record for a
// READ_COMMITTED reader: a control batch, or a transactional batch of an
// aborted transaction. An ABORT marker ends its producer's aborted
// transaction.
func (f *abortFilter) skip(h batch.Header, b []byte) bool {
	if h.ProducerID >= 0 {
		for len(f.txns) > 0 && f.txns[0].FirstOffset <= h.LastOffset() {
			if !slices.Contains(f.active, f.txns[0].ProducerID) {
				f.active = append(f.active, f.txns[0].ProducerID)
			}
			f.txns = f.txns[1:]
		}
	}
	if h.Control() {
		if i := slices.Index(f.active, h.ProducerID); i >= 0 && f.isAbort(h, b) {
			f.active = slices.Delete(f.active, i, i+1)
		}
		return true
	}
	return h.Transactional() && slices.Contains(f.active, h.ProducerID)
}

// isAbort reports whether the control batch b is an ABORT marker.
func (f *abortFilter) isAbort(h batch.Header, b []byte) bool {
	if h.Compression() != batch.CompressionNone {
		m, _, err := batch.ParseMarker(b) // never written by Kafka; checked all the same
		return err == nil && !m.Commit
	}
	if f.it.Reset(b, h) != nil {
		return false
	}
	if ok, err := f.it.Next(&f.rec); !ok || err != nil {
		return false
	}
	t, err := batch.ParseControlKey(f.rec.Key)
	return err == nil && t == batch.ControlAbort
}
