package grouptest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/group"
)

// Store is an in-memory group.OffsetStore. Like the broker's, it encodes
// each commit as __consumer_offsets records (group.EncodeOffsetRecord), one
// batch per Store call; Initial replays them as a broker does at open.
type Store struct {
	clock group.Clock // stamps the commit time; nil → zero time

	mu      sync.Mutex
	fail    error
	batches [][]Record
}

// Record is one __consumer_offsets record.
type Record struct{ Key, Value []byte }

// NewStore returns an empty Store whose records carry clock's time (clock
// may be nil).
func NewStore(clock group.Clock) *Store { return &Store{clock: clock} }

// Store implements group.OffsetStore: it appends one batch of records (a
// tombstone for a negative offset), or returns the error set by FailWith
// and stores nothing.
func (s *Store) Store(g string, offsets map[group.TopicPartition]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	batch := make([]Record, 0, len(offsets))
	var now time.Time
	if s.clock != nil {
		now = s.clock.Now()
	}
	for _, tp := range slices.SortedFunc(maps.Keys(offsets), func(a, b group.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	}) {
		k, v := group.EncodeOffsetRecord(g, tp, max(offsets[tp], 0), now)
		if offsets[tp] < 0 {
			v = nil // a tombstone, as the broker writes it
		}
		batch = append(batch, Record{Key: k, Value: v})
	}
	s.batches = append(s.batches, batch)
	return nil
}

// FailWith makes every later Store call fail with err (nil: succeed again).
func (s *Store) FailWith(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Batches returns the number of successful Store calls.
func (s *Store) Batches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.batches)
}

// Records returns every record stored, in order.
func (s *Store) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, b := range s.batches {
		out = append(out, b...)
	}
	return out
}

// Initial decodes the records in order, the last commit of a partition
// winning and a tombstone deleting it, into a Config.Initial.
func (s *Store) Initial() (map[string]map[group.TopicPartition]int64, error) {
	out := make(map[string]map[group.TopicPartition]int64)
	for i, r := range s.Records() {
		g, tp, off, err := group.DecodeOffsetRecord(r.Key, r.Value)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if off < 0 {
			delete(out[g], tp)
			continue
		}
		if out[g] == nil {
			out[g] = make(map[group.TopicPartition]int64)
		}
		out[g][tp] = off
	}
	return out, nil
}
