package txn

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/tp"
	"github.com/stretchr/testify/require"
)

// The fixture of Kafka's TransactionCoordinatorTest: one transactional id,
// producer 10 at epoch 1, a 1000 ms timeout, the partition topic1-0, and
// time at 1000 ms.
const (
	tid              = "txn"
	pid        int64 = 10
	pepoch     int16 = 1
	timeoutMs  int32 = 1000
	nowMs      int64 = 1000
	maxTimeout int32 = 900000
)

var (
	topic1   = tp.TopicPartition{Topic: "topic1", Partition: 0}
	topic2   = tp.TopicPartition{Topic: "topic2", Partition: 0}
	oneParts = []tp.TopicPartition{topic1}
)

// ids hands out producer ids from next on, counting allocations; err makes
// them fail.
type ids struct {
	next  int64
	calls int
	err   error
}

func (s *ids) alloc() (int64, error) {
	s.calls++
	if s.err != nil {
		return 0, s.err
	}
	s.next++
	return s.next - 1, nil
}

func newTestMachine(tv int16) (*machine, *ids) {
	s := &ids{next: 100}
	return newMachine(machineConfig{maxTimeoutMs: maxTimeout, transactionVersion: tv}, s.alloc), s
}

// md is metadata as Kafka's tests build it: producer id, prev id, epoch,
// last epoch, state, partitions, start and last update at nowMs.
func md(producerID int64, epoch, last int16, state State, tv int16, parts ...tp.TopicPartition) Metadata {
	m := Metadata{
		ProducerID: producerID, PrevProducerID: producerID, NextProducerID: NoProducerID,
		ProducerEpoch: epoch, LastProducerEpoch: last, TimeoutMs: timeoutMs, State: state,
		Partitions: parts, StartMs: nowMs, LastUpdateMs: nowMs, ClientTransactionVersion: tv,
	}
	if state == Empty {
		m.StartMs = -1
	}
	return m
}

func (m *machine) put(id string, meta Metadata) *entry {
	e := &entry{meta: meta}
	m.txns[id] = e
	return e
}

// replyOf returns the one reply among effs (for waiter 1).
func replyOf(t *testing.T, effs []effect) Result {
	t.Helper()
	var got []Result
	for _, e := range effs {
		if r, ok := e.(effReply); ok {
			require.Equal(t, uint64(1), r.waiter)
			got = append(got, r.res)
		}
	}
	require.Len(t, got, 1, "replies in %#v", effs)
	return got[0]
}

func noReply(t *testing.T, effs []effect) {
	t.Helper()
	for _, e := range effs {
		_, ok := e.(effReply)
		require.False(t, ok, "unexpected reply in %#v", effs)
	}
}

// appendOf returns the one record effs write, nil if none.
func appendOf(t *testing.T, effs []effect) *Metadata {
	t.Helper()
	var got []Metadata
	for _, e := range effs {
		if a, ok := e.(effAppend); ok {
			require.Equal(t, tid, a.id)
			got = append(got, a.meta)
		}
	}
	require.LessOrEqual(t, len(got), 1, "appends in %#v", effs)
	if len(got) == 0 {
		return nil
	}
	return &got[0]
}

func markersOf(effs []effect) *effMarkers {
	for _, e := range effs {
		if m, ok := e.(effMarkers); ok {
			return &m
		}
	}
	return nil
}

// requireResult checks a reply: an error (matched with errors.Is, and no
// producer id and epoch), or success with that id and epoch.
func requireResult(t *testing.T, res Result, wantErr error, wantID int64, wantEpoch int16) {
	t.Helper()
	if wantErr != nil {
		require.True(t, errors.Is(res.Err, wantErr), "got %v, want %v", res.Err, wantErr)
		require.Equal(t, NoProducerID, res.ProducerID)
		require.Equal(t, NoProducerEpoch, res.ProducerEpoch)
		return
	}
	require.NoError(t, res.Err)
	require.Equal(t, wantID, res.ProducerID)
	require.Equal(t, wantEpoch, res.ProducerEpoch)
}
