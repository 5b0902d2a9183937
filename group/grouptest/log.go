package grouptest

import (
	"context"
	"slices"
	"sync"

	"github.com/strata-log/strata/group"
)

// Log is an in-memory partition of __consumer_offsets: a group.OffsetsLog
// for group.Open, whose appends can be made to fail. Reopening a
// Coordinator over the same Log is what a broker's restart, or a new
// coordinator of the partition, does.
type Log struct {
	mu      sync.Mutex
	fail    error
	batches [][]group.Record
}

var _ group.OffsetsLog = (*Log)(nil)

// Append implements group.OffsetsLog: it keeps a copy of records as one
// batch, or returns the error set by FailWith and keeps nothing.
func (l *Log) Append(records []group.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	b := make([]group.Record, len(records))
	for i, r := range records {
		b[i] = group.Record{Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)}
	}
	l.batches = append(l.batches, b)
	return nil
}

// Replay implements group.OffsetsLog: every record, in order; ctx's error
// once it is done.
func (l *Log) Replay(ctx context.Context, fn func(key, value []byte) error) error {
	for _, r := range l.Records() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}

// FailWith makes every later Append fail with err (nil: succeed again).
func (l *Log) FailWith(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

// Batches returns the number of successful Append calls.
func (l *Log) Batches() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.batches)
}

// Records returns every record appended, in order.
func (l *Log) Records() []group.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []group.Record
	for _, b := range l.batches {
		out = append(out, b...)
	}
	return out
}
