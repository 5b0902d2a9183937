package grouptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/strata-log/strata/group"
)

// ErrProducerFenced is TxnLog's answer to a transactional batch or marker
// of an epoch older than the producer's latest, as a partition refuses it.
var ErrProducerFenced = errors.New("grouptest: producer fenced")

// TxnLog is an in-memory partition of __consumer_offsets that holds
// transactional offset commits: a group.TxnOffsetsLog and
// group.TxnReplayer for group.Open. Like a partition, it refuses a
// producer's batch or marker of an epoch older than the newest it has
// seen of that producer (ErrProducerFenced). Reopening a Coordinator over
// the same TxnLog is a restart or a coordinator move.
type TxnLog struct {
	mu      sync.Mutex
	fail    error
	batches []txnBatch
	epochs  map[int64]int16
}

type txnBatch struct {
	records         []group.Record
	producerID      int64
	epoch           int16
	transactional   bool
	control, commit bool
}

var (
	_ group.TxnOffsetsLog = (*TxnLog)(nil)
	_ group.TxnReplayer   = (*TxnLog)(nil)
)

// Append implements group.OffsetsLog: a plain batch.
func (l *TxnLog) Append(records []group.Record) error {
	return l.add(txnBatch{records: records, producerID: -1, epoch: -1})
}

// AppendTxn implements group.TxnOffsetsLog.
func (l *TxnLog) AppendTxn(producerID int64, producerEpoch int16, records []group.Record) error {
	return l.add(txnBatch{records: records, producerID: producerID, epoch: producerEpoch, transactional: true})
}

// AppendMarker implements group.TxnOffsetsLog.
func (l *TxnLog) AppendMarker(producerID int64, producerEpoch int16, commit bool) error {
	return l.add(txnBatch{producerID: producerID, epoch: producerEpoch, control: true, commit: commit})
}

func (l *TxnLog) add(b txnBatch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	if b.producerID >= 0 {
		if last, ok := l.epochs[b.producerID]; ok && b.epoch < last {
			return fmt.Errorf("%w: producer %d epoch %d, latest %d", ErrProducerFenced, b.producerID, b.epoch, last)
		}
		if l.epochs == nil {
			l.epochs = map[int64]int16{}
		}
		l.epochs[b.producerID] = b.epoch
	}
	recs := make([]group.Record, len(b.records))
	for i, r := range b.records {
		recs[i] = group.Record{Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)}
	}
	b.records = recs
	l.batches = append(l.batches, b)
	return nil
}

// Replay implements group.OffsetsLog: every record but the markers.
func (l *TxnLog) Replay(ctx context.Context, fn func(key, value []byte) error) error {
	return l.ReplayTxn(ctx, func(r group.LogRecord) error {
		if r.Control {
			return nil
		}
		return fn(r.Key, r.Value)
	})
}

// ReplayTxn implements group.TxnReplayer.
func (l *TxnLog) ReplayTxn(ctx context.Context, fn func(r group.LogRecord) error) error {
	l.mu.Lock()
	batches := slices.Clone(l.batches)
	l.mu.Unlock()
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.control {
			if err := fn(group.LogRecord{ProducerID: b.producerID, ProducerEpoch: b.epoch, Control: true, Commit: b.commit}); err != nil {
				return err
			}
			continue
		}
		for _, r := range b.records {
			if err := fn(group.LogRecord{Key: r.Key, Value: r.Value, ProducerID: b.producerID, ProducerEpoch: b.epoch, Transactional: b.transactional}); err != nil {
				return err
			}
		}
	}
	return nil
}

// FailWith makes every later append fail with err (nil: succeed again).
func (l *TxnLog) FailWith(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// Markers returns how many markers were appended.
func (l *TxnLog) Markers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, b := range l.batches {
		if b.control {
			n++
		}
	}
	return n
}
