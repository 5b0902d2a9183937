package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/strata-log/strata/tp"
)

// The one store of __consumer_offsets: a broker gives Open the partition
// of the topic its coordinator owns, as an OffsetsLog — how to append a
// batch of records and how to read the partition back — and the
// Coordinator does the rest: it encodes commits (with their leader epochs
// and metadata) and group metadata records, and replays them at open. A
// standalone log.Broker and a cluster member supply only the OffsetsLog.

// Record is one record of __consumer_offsets: its key and value, a nil
// value for a tombstone.
type Record struct {
	Key, Value []byte
}

// OffsetsLog is one partition of __consumer_offsets, as Open uses it.
type OffsetsLog interface {
	// Append appends records, in order, as one batch, and returns once
	// they are durable (fsynced on a standalone broker, acknowledged by
	// the in-sync replicas in a cluster). An error means nothing of the
	// batch is to be counted on: the commit fails. It may be called from
	// several goroutines at once (for different groups), with no lock of
	// the Coordinator held; it must not retain records.
	Append(records []Record) error
	// Replay calls fn with every record of the partition, in offset
	// order, from its start to its end, and returns the first error of
	// fn or of the read. fn does not retain key or value.
	Replay(ctx context.Context, fn func(key, value []byte) error) error
}

// Open replays l and returns a running Coordinator that starts with what
// it holds — the last commit of each (group, topic, partition), with its
// leader epoch and metadata, a tombstone removing it; the last metadata
// record of each group, which comes back Stable as for
// Config.InitialGroups — and makes its commits and group metadata durable
// by appending them to l, commit timestamps taken from cfg.Clock. A record
// that does not decode fails the open with ErrCorruptOffsetRecord and its
// offset-order position; a group metadata record of a key version Strata
// does not know is skipped, as Kafka skips it. cfg.Store, Initial and
// InitialGroups must be unset (ErrInvalidConfig): l is the store and the
// initial state.
func Open(ctx context.Context, cfg Config, l OffsetsLog) (*Coordinator, error) {
	if cfg.Store != nil || cfg.Initial != nil || cfg.InitialGroups != nil {
		return nil, fmt.Errorf("%w: Open takes the store and initial state from its OffsetsLog", ErrInvalidConfig)
	}
	if l == nil {
		return nil, fmt.Errorf("%w: nil OffsetsLog", ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := newReplay()
	n := 0
	var err error
	if tr, ok := l.(TxnReplayer); ok {
		err = tr.ReplayTxn(ctx, func(rec LogRecord) error {
			n++
			if err := r.addTxn(rec); err != nil {
				return fmt.Errorf("record %d: %w", n-1, err)
			}
			return nil
		})
	} else {
		err = l.Replay(ctx, func(key, value []byte) error {
			n++
			if err := r.add(key, value); err != nil {
				return fmt.Errorf("record %d: %w", n-1, err)
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("group: replay __consumer_offsets: %w", err)
	}
	cfg.InitialGroups = r.groups
	cfg.consumerGroups = r.consumer.groups
	cfg.Store = &logStore{l: l, clock: cfg.withDefaults().Clock}
	return newCoordinator(cfg, r.committed, r.txns)
}

// replay is the state read back from __consumer_offsets, record by
// record.
type replay struct {
	committed map[string]map[TopicPartition]CommittedOffset
	groups    map[string][]byte
	consumer  *consumerReplay       // the consumer-protocol groups
	txns      map[int64]*pendingTxn // transactional commits pending at the end
}

func newReplay() *replay {
	return &replay{committed: map[string]map[TopicPartition]CommittedOffset{}, groups: map[string][]byte{},
		consumer: newConsumerReplay(consumerConfig{}, tpIDs{}), txns: map[int64]*pendingTxn{}}
}

// add applies the next record of the partition.
func (r *replay) add(key, value []byte) error {
	g, tp, co, err := DecodeCommittedOffsetRecord(key, value)
	switch {
	case errors.Is(err, ErrNotOffsetRecord):
		g, err := DecodeGroupMetadataKey(key)
		if err != nil {
			// A consumer-protocol group's record, or another kind, skipped.
			if err := r.consumer.add(key, value); err != nil && !errors.Is(err, errNotConsumerRecord) {
				return err
			}
			return nil
		}
		if len(value) == 0 {
			delete(r.groups, g)
		} else {
			r.groups[g] = slices.Clone(value)
		}
		return nil
	case err != nil:
		return err
	}
	if co.Offset < 0 {
		if m := r.committed[g]; m != nil {
			delete(m, tp)
			if len(m) == 0 {
				delete(r.committed, g)
			}
		}
		return nil
	}
	if r.committed[g] == nil {
		r.committed[g] = map[TopicPartition]CommittedOffset{}
	}
	r.committed[g][tp] = co
	return nil
}

// logStore is the Coordinator's store over an OffsetsLog: every commit,
// with its leader epoch and metadata, and every group metadata record.
type logStore struct {
	l     OffsetsLog
	clock Clock
}

var (
	_ CommittedOffsetStore = (*logStore)(nil)
	_ GroupMetadataStore   = (*logStore)(nil)
)

func (s *logStore) Store(group string, offsets map[TopicPartition]int64) error {
	committed := make(map[TopicPartition]CommittedOffset, len(offsets))
	for tp, off := range offsets {
		committed[tp] = CommittedOffset{Offset: off, LeaderEpoch: -1}
	}
	return s.StoreCommitted(group, committed)
}

// StoreCommitted appends one record per partition, in partition order; a
// negative offset (Delete) is a tombstone.
func (s *logStore) StoreCommitted(group string, offsets map[TopicPartition]CommittedOffset) error {
	now := s.clock.Now()
	recs := make([]Record, 0, len(offsets))
	for _, tp := range sortedTPs(offsets) {
		co := offsets[tp]
		if co.Offset < 0 {
			co = CommittedOffset{LeaderEpoch: -1}
		}
		k, v := EncodeCommittedOffsetRecord(group, tp, co, now)
		if offsets[tp].Offset < 0 {
			v = nil
		}
		recs = append(recs, Record{Key: k, Value: v})
	}
	return s.l.Append(recs)
}

func (s *logStore) StoreGroup(group string, value []byte) error {
	return s.l.Append([]Record{{Key: EncodeGroupMetadataKey(group), Value: value}})
}

func sortedTPs[V any](m map[TopicPartition]V) []TopicPartition {
	return slices.SortedFunc(maps.Keys(m), tp.Compare)
}
