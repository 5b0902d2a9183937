package log

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// The cases of Kafka's ProducerStateManagerTest about transactions: producer
// 1, one-record batches appended at the given offsets.

const txPID int64 = 1

func txnBatch(pid int64, epoch int16, seq int32, transactional bool) ProducerBatch {
	return ProducerBatch{ProducerID: pid, Epoch: epoch, BaseSequence: seq, LastOffsetDelta: 0, MaxTimestamp: 1000, Transactional: transactional}
}

// appendAt checks and appends b at offset, as a partition would.
func appendAt(s *ProducerState, b ProducerBatch, offset int64) error {
	c, err := s.Check(b)
	if err != nil || c.Duplicate {
		return err
	}
	s.Update(b, offset)
	return nil
}

func marker(pid int64, epoch int16, commit bool, coordEpoch int32) TxnMarker {
	return TxnMarker{ProducerID: pid, Epoch: epoch, CoordinatorEpoch: coordEpoch, Commit: commit, Timestamp: 2000}
}

// markerAt checks and appends m at offset.
func markerAt(s *ProducerState, m TxnMarker, offset int64) (CompletedTxn, bool, error) {
	if err := s.CheckMarker(m); err != nil {
		return CompletedTxn{}, false, err
	}
	c, ok := s.UpdateMarker(m, offset)
	return c, ok, nil
}

func firstUnstable(t *testing.T, s *ProducerState) int64 {
	t.Helper()
	off, ok := s.FirstUnstableOffset()
	if !ok {
		return -1
	}
	return off
}

func TestTxnMarkerWithNoProducerState(t *testing.T) {
	// testAppendTxnMarkerWithNoProducerState
	s := NewProducerState(0)
	_, ok, err := markerAt(s, marker(txPID, 2, true, 0), 27)
	require.NoError(t, err)
	require.False(t, ok, "no transaction to end")
	p, found := s.Producer(txPID)
	require.True(t, found)
	require.Equal(t, int16(2), p.Epoch)
	require.Equal(t, int32(-1), p.LastSequence)
	require.ErrorIs(t, appendAt(s, txnBatch(txPID, 0, 0, false), 28), ErrProducerFenced)
	require.ErrorIs(t, appendAt(s, txnBatch(txPID, 2, 17, false), 28), ErrOutOfOrderSequence)
	require.NoError(t, appendAt(s, txnBatch(txPID, 2, 0, false), 28))
	p, _ = s.Producer(txPID)
	require.Equal(t, int32(0), p.LastSequence)
	require.Equal(t, int64(29), s.EndOffset())
}

func TestTxnMarkerBumpsProducerEpoch(t *testing.T) {
	// testControlRecordBumpsProducerEpoch,
	// testOutOfSequenceAfterControlRecordEpochBump,
	// testProducerStateAfterFencingAbortMarker
	s := NewProducerState(0)
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 0, true), 0))
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 1, true), 1))
	c, ok, err := markerAt(s, marker(txPID, 1, false, 0), 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, CompletedTxn{ProducerID: txPID, FirstOffset: 0, LastOffset: 2, Aborted: true, LastStableOffset: 3}, c)
	p, _ := s.Producer(txPID)
	require.Equal(t, int16(1), p.Epoch)
	require.Equal(t, int32(-1), p.LastSequence)
	require.Empty(t, p.Batches)
	require.Equal(t, int64(-1), p.CurrentTxnFirstOffset)
	require.ErrorIs(t, appendAt(s, txnBatch(txPID, 1, 2, true), 3), ErrOutOfOrderSequence)
	require.ErrorIs(t, appendAt(s, txnBatch(txPID, 2, 2, true), 3), ErrOutOfOrderSequence)
	require.NoError(t, appendAt(s, txnBatch(txPID, 1, 0, true), 3))
	require.Equal(t, 0, s.Expire(time.UnixMilli(2000), time.Hour), "kept: it holds the fencing epoch, and is in a transaction")
}

func TestTxnNonTransactionalAppendWithOngoingTransaction(t *testing.T) {
	// testNonTransactionalAppendWithOngoingTransaction
	s := NewProducerState(0)
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 0, true), 0))
	require.ErrorIs(t, appendAt(s, txnBatch(txPID, 0, 1, false), 1), ErrInvalidTxnState)
	// A duplicate of the transactional batch is still a duplicate.
	c, err := s.Check(txnBatch(txPID, 0, 0, false))
	require.NoError(t, err)
	require.True(t, c.Duplicate)
}

func TestTxnFirstUnstableOffset(t *testing.T) {
	// testFirstUnstableOffset
	s := NewProducerState(0)
	require.Equal(t, int64(-1), firstUnstable(t, s))
	require.NoError(t, appendAt(s, txnBatch(txPID, 5, 0, true), 99))
	require.Equal(t, int64(99), firstUnstable(t, s))
	require.NoError(t, appendAt(s, txnBatch(2, 5, 0, true), 105))
	require.Equal(t, int64(99), firstUnstable(t, s))
	require.Equal(t, []OngoingTxn{{txPID, 99}, {2, 105}}, s.OngoingTxns())
	_, ok, err := markerAt(s, marker(txPID, 5, true, 0), 109)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []OngoingTxn{{2, 105}}, s.OngoingTxns())
	require.Equal(t, int64(99), firstUnstable(t, s), "the commit is not replicated yet")
	s.OnHighWatermark(100)
	require.Equal(t, int64(99), firstUnstable(t, s))
	require.Equal(t, int64(99), s.LastStableOffset(100))
	s.OnHighWatermark(110)
	require.Equal(t, int64(105), firstUnstable(t, s))
	require.Equal(t, int64(105), s.LastStableOffset(110))
	_, ok, err = markerAt(s, marker(2, 5, false, 0), 112)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, s.OngoingTxns())
	require.Equal(t, int64(105), firstUnstable(t, s))
	s.OnHighWatermark(113)
	require.Equal(t, int64(-1), firstUnstable(t, s))
	require.Equal(t, int64(113), s.LastStableOffset(113))
}

func TestTxnLastStableOffsetCompletedTxn(t *testing.T) {
	// testLastStableOffsetCompletedTxn: the LSO an ended transaction's
	// .txnindex entry records.
	s := NewProducerState(990000)
	start1, start2, start3 := int64(992342), int64(992342+25), int64(992342+57)
	require.NoError(t, appendAt(s, txnBatch(1, 0, 0, true), start1))
	require.NoError(t, appendAt(s, txnBatch(2, 0, 0, true), start2))
	require.NoError(t, appendAt(s, txnBatch(3, 0, 0, true), start3))
	last1 := start3 + 15
	c, _, err := markerAt(s, marker(1, 0, true, 0), last1)
	require.NoError(t, err)
	require.Equal(t, start2, c.LastStableOffset)
	s.OnHighWatermark(last1 + 1)
	require.Equal(t, start2, firstUnstable(t, s))
	last3 := last1 + 20
	c, _, err = markerAt(s, marker(3, 0, false, 0), last3)
	require.NoError(t, err)
	require.Equal(t, start2, c.LastStableOffset)
	require.Equal(t, CompletedTxn{ProducerID: 3, FirstOffset: start3, LastOffset: last3, Aborted: true, LastStableOffset: start2}, c)
	require.Equal(t, c.AbortedTxn().LastStableOffset, start2)
	s.OnHighWatermark(last3 + 1)
	require.Equal(t, start2, firstUnstable(t, s))
	last2 := last3 + 78
	c, _, err = markerAt(s, marker(2, 0, true, 0), last2)
	require.NoError(t, err)
	require.Equal(t, last2+1, c.LastStableOffset)
	s.OnHighWatermark(last2 + 1)
	require.Equal(t, int64(-1), firstUnstable(t, s))
}

func TestTxnSkipEmptyTransactions(t *testing.T) {
	// testSkipEmptyTransactions: markers without a transaction end nothing.
	s := NewProducerState(0)
	seq := int32(0)
	data := func(from, to int64) {
		for off := from; off <= to; off++ {
			require.NoError(t, appendAt(s, txnBatch(txPID, 0, seq, true), off))
			seq++
		}
	}
	data(16, 20)
	s.OnHighWatermark(21)
	require.Equal(t, int64(16), firstUnstable(t, s))
	c, ok, err := markerAt(s, marker(txPID, 0, true, 0), 21)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, CompletedTxn{ProducerID: txPID, FirstOffset: 16, LastOffset: 21, LastStableOffset: 22}, c)
	_, ok, _ = markerAt(s, marker(txPID, 0, true, 0), 22)
	require.False(t, ok)
	_, ok, _ = markerAt(s, marker(txPID, 0, false, 0), 23)
	require.False(t, ok)
	data(24, 27)
	_, ok, _ = markerAt(s, marker(txPID, 0, false, 0), 28)
	require.True(t, ok)
	_, ok, _ = markerAt(s, marker(txPID, 0, false, 0), 29)
	require.False(t, ok)
	data(30, 31)
	s.OnHighWatermark(32)
	require.Equal(t, int64(30), firstUnstable(t, s))
}

func TestTxnProducersWithOngoingTransactionsDontExpire(t *testing.T) {
	// testProducersWithOngoingTransactionsDontExpire; nor are they evicted.
	s := NewProducerState(0)
	require.NoError(t, appendAt(s, txnBatch(txPID, 5, 0, true), 99))
	require.Equal(t, 0, s.Expire(time.UnixMilli(1000).Add(DefaultProducerIDExpiration+time.Hour), 0))
	_, ok := s.Producer(txPID)
	require.True(t, ok)
	require.Equal(t, int64(99), firstUnstable(t, s))
	s.maxProducers = 10
	for i := range int64(50) {
		require.NoError(t, appendAt(s, txnBatch(100+i, 0, 0, false), 100+i))
	}
	_, ok = s.Producer(txPID)
	require.True(t, ok, "not evicted")
	// Once its transaction ends it expires as any other.
	_, _, err := markerAt(s, marker(txPID, 5, true, 0), 200)
	require.NoError(t, err)
	require.Positive(t, s.Expire(time.UnixMilli(2000).Add(DefaultProducerIDExpiration), 0))
	_, ok = s.Producer(txPID)
	require.False(t, ok)
}

func TestTxnMarkerFencing(t *testing.T) {
	// testOldEpochForControlRecord, testCoordinatorFencing
	s := NewProducerState(0)
	require.NoError(t, appendAt(s, txnBatch(txPID, 5, 0, true), 99))
	_, _, err := markerAt(s, marker(txPID, 3, true, 0), 100)
	require.ErrorIs(t, err, ErrProducerFenced)
	_, _, err = markerAt(s, marker(txPID, 5, true, 1), 100)
	require.NoError(t, err)
	p, _ := s.Producer(txPID)
	require.Equal(t, int32(1), p.CoordinatorEpoch)
	_, _, err = markerAt(s, marker(txPID, 5, true, 1), 101)
	require.NoError(t, err, "the same coordinator epoch")
	_, _, err = markerAt(s, marker(txPID, 5, true, 2), 102)
	require.NoError(t, err, "a newer one")
	_, _, err = markerAt(s, marker(txPID, 5, true, 1), 103)
	require.ErrorIs(t, err, ErrTransactionCoordinatorFenced)
	require.ErrorIs(t, s.CheckMarker(TxnMarker{ProducerID: -1}), ErrInvalidSequence)
}

func TestTxnSnapshotRecovery(t *testing.T) {
	// testRecoverFromSnapshotUnfinishedTransaction,
	// testRecoverFromSnapshotFinishedTransaction,
	// testRecoverFromSnapshotEmptyTransaction, testCoordinatorFencedAfterReload
	reload := func(s *ProducerState) *ProducerState {
		got, err := decodeProducerSnapshot(encodeProducerSnapshot(s), s.EndOffset())
		require.NoError(t, err)
		return got
	}
	s := NewProducerState(0)
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 0, true), 0))
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 1, true), 1))
	r := reload(s)
	p, _ := r.Producer(txPID)
	require.Equal(t, int64(0), p.CurrentTxnFirstOffset)
	require.Equal(t, []OngoingTxn{{txPID, 0}}, r.OngoingTxns())
	require.Equal(t, int64(0), firstUnstable(t, r))
	require.NoError(t, appendAt(r, txnBatch(txPID, 0, 2, true), 2))
	require.ErrorIs(t, appendAt(r, txnBatch(txPID, 0, 3, false), 3), ErrInvalidTxnState)
	c, ok, err := markerAt(r, marker(txPID, 0, false, 0), 3)
	require.NoError(t, err)
	require.True(t, ok, "the reloaded transaction ends")
	require.Equal(t, int64(0), c.FirstOffset)

	_, _, err = markerAt(s, marker(txPID, 0, false, 1), 2)
	require.NoError(t, err)
	r = reload(s)
	p, _ = r.Producer(txPID)
	require.Equal(t, int64(-1), p.CurrentTxnFirstOffset)
	require.Equal(t, int32(1), p.CoordinatorEpoch)
	require.Empty(t, r.OngoingTxns())
	require.ErrorIs(t, r.CheckMarker(marker(txPID, 0, true, 0)), ErrTransactionCoordinatorFenced)

	e := NewProducerState(0)
	_, _, err = markerAt(e, TxnMarker{ProducerID: txPID, Epoch: 0, Timestamp: 777}, 0)
	require.NoError(t, err)
	r = reload(e)
	p, _ = r.Producer(txPID)
	require.Equal(t, int64(777), p.LastTimestamp)
	require.Equal(t, int64(-1), p.CurrentTxnFirstOffset)
}

func TestTxnFirstUnstableOffsetAfterTruncation(t *testing.T) {
	// testFirstUnstableOffsetAfterTruncation, through the snapshot files.
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("p", 0o755))
	s := NewProducerState(0)
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 0, true), 99))
	require.Equal(t, int64(99), firstUnstable(t, s))
	_, err := WriteProducerSnapshot(mem, "p", s)
	require.NoError(t, err)
	_, _, err = markerAt(s, marker(txPID, 0, true, 0), 105)
	require.NoError(t, err)
	s.OnHighWatermark(106)
	require.Equal(t, int64(-1), firstUnstable(t, s))
	_, err = WriteProducerSnapshot(mem, "p", s)
	require.NoError(t, err)
	require.NoError(t, appendAt(s, txnBatch(txPID, 0, 1, false), 106))

	r, err := loadProducerStateDir(mem, "p", 0, 106)
	require.NoError(t, err)
	require.Equal(t, int64(-1), firstUnstable(t, r))
	r, err = loadProducerStateDir(mem, "p", 0, 100)
	require.NoError(t, err)
	require.Equal(t, int64(99), firstUnstable(t, r))
}

// txnLog builds a log of transactional and plain batches and markers, as
// bytes, and the state a partition appending them would hold.
func txnLog(t testing.TB) ([]byte, *ProducerState, []CompletedTxn) {
	s := NewProducerState(0)
	var data []byte
	var done []CompletedTxn
	next := int64(0)
	add := func(pid int64, epoch int16, seq int32, n int, transactional bool) {
		var bd batch.Builder
		bd.Reset(1000)
		for range n {
			bd.Append(1000, nil, []byte("v"), nil)
		}
		if pid >= 0 {
			bd.SetProducer(pid, epoch, seq)
		}
		b := slices.Clone(bd.Bytes())
		if transactional {
			b[22] |= 0x10 // attributes, low byte: transactional
			batch.SetCRC(b)
		}
		batch.SetBaseOffset(b, next)
		h, err := batch.Validate(b)
		require.NoError(t, err)
		require.NoError(t, appendAt(s, ProducerBatchOf(h), next))
		data = append(data, b...)
		next = h.NextOffset()
	}
	mark := func(pid int64, epoch int16, commit bool) {
		b := batch.AppendMarker(nil, batch.Marker{Commit: commit, CoordinatorEpoch: 3, ProducerID: pid, ProducerEpoch: epoch, Timestamp: 1500})
		batch.SetBaseOffset(b, next)
		m, _, err := batch.ParseMarker(b)
		require.NoError(t, err)
		c, ok, err := markerAt(s, TxnMarkerOf(m), next)
		require.NoError(t, err)
		if ok {
			done = append(done, c)
		}
		data = append(data, b...)
		next++
	}
	add(1, 0, 0, 3, true)
	add(2, 0, 0, 2, true)
	add(-1, 0, 0, 2, false)
	add(1, 0, 3, 1, true)
	mark(2, 0, false)
	add(3, 4, 0, 1, false)
	mark(1, 0, true)
	add(2, 0, 2, 2, true)
	mark(1, 1, false) // a marker without a transaction: bumps the epoch
	add(4, 0, 0, 1, true)
	mark(4, 1, false) // TV2: an abort at the bumped epoch
	return data, s, done
}

func TestTxnReplayBatches(t *testing.T) {
	data, want, wantDone := txnLog(t)
	for _, cut := range []int{0, 1, 2, 5} {
		// Replay from a state that already reflects a prefix.
		r := NewProducerState(0)
		var done []CompletedTxn
		pos := 0
		for i := 0; i < cut; i++ {
			size, err := batch.PeekSize(data[pos:])
			require.NoError(t, err)
			h, err := batch.ParseHeader(data[pos:])
			require.NoError(t, err)
			c, ok, err := r.ReplayBatch(data[pos:pos+size], h)
			require.NoError(t, err)
			if ok {
				done = append(done, c)
			}
			pos += size
		}
		n, err := r.ReplayBatchesTxn(data, func(c CompletedTxn) { done = append(done, c) })
		require.NoError(t, err)
		require.Equal(t, len(data), n)
		require.Equal(t, want.Producers(), r.Producers())
		require.Equal(t, want.OngoingTxns(), r.OngoingTxns())
		require.Equal(t, want.EndOffset(), r.EndOffset())
		require.Equal(t, wantDone, done, "cut %d", cut)
	}
	require.Equal(t, []OngoingTxn{{2, 11}}, want.OngoingTxns())
	require.Len(t, wantDone, 3)
	// A marker that does not parse is corrupt.
	bad := batch.AppendMarker(nil, batch.Marker{Commit: true, ProducerID: 1})
	bad[len(bad)-7] = 0xff // value version -1 (the value is the 6 bytes before the header count), CRC fixed
	bad[len(bad)-6] = 0xff
	batch.SetCRC(bad)
	_, err := NewProducerState(0).ReplayBatches(bad)
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestTxnRandomModel appends transactional and plain batches of a few
// producers, markers and high watermark moves at random, and checks the
// first unstable offset against a model kept as a list of transactions;
// a snapshot taken and read back at random keeps every open transaction.
// Replay with STRATA_SEED=n.
func TestTxnRandomModel(t *testing.T) {
	seed := rand.Uint64()
	if v := os.Getenv("STRATA_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	type modelTxn struct {
		pid         int64
		first, last int64 // last -1 while open
	}
	s := NewProducerState(0)
	var model []modelTxn
	seq := map[int64]int32{}
	next, hw := int64(0), int64(0)
	for step := range 3000 {
		pid := int64(1 + rng.IntN(4))
		open := -1
		for i, m := range model {
			if m.pid == pid && m.last < 0 {
				open = i
			}
		}
		switch r := rng.IntN(10); {
		case r < 5:
			transactional := open >= 0 || rng.IntN(2) == 0
			require.NoError(t, appendAt(s, txnBatch(pid, 0, seq[pid], transactional), next), "step %d", step)
			seq[pid]++
			if transactional && open < 0 {
				model = append(model, modelTxn{pid, next, -1})
			}
			next++
		case r < 7:
			c, ok, err := markerAt(s, marker(pid, 0, rng.IntN(2) == 0, 0), next)
			require.NoError(t, err)
			require.Equal(t, open >= 0, ok)
			if ok {
				require.Equal(t, model[open].first, c.FirstOffset)
				model[open].last = next
			}
			next++
		case r < 9:
			hw = min(next, hw+int64(rng.IntN(10)))
			s.OnHighWatermark(hw)
		default:
			r, err := decodeProducerSnapshot(encodeProducerSnapshot(s), s.EndOffset())
			require.NoError(t, err)
			require.Equal(t, s.OngoingTxns(), r.OngoingTxns())
			// A marker's timestamp is kept only for a producer without
			// batches (see encodeProducerSnapshot): expiration may count
			// from the last batch after a restart.
			sp, rp := s.Producers(), r.Producers()
			for i := range sp {
				require.LessOrEqual(t, rp[i].LastTimestamp, sp[i].LastTimestamp)
				sp[i].LastTimestamp, rp[i].LastTimestamp = 0, 0
			}
			require.Equal(t, sp, rp)
		}
		want := int64(-1)
		for _, m := range model {
			if (m.last < 0 || m.last >= hw) && (want < 0 || m.first < want) {
				want = m.first
			}
		}
		require.Equal(t, want, firstUnstable(t, s), "step %d", step)
		lso := hw
		if want >= 0 && want < hw {
			lso = want
		}
		require.Equal(t, lso, s.LastStableOffset(hw))
		var ongoing []OngoingTxn
		for _, m := range model {
			if m.last < 0 {
				ongoing = append(ongoing, OngoingTxn{m.pid, m.first})
			}
		}
		require.Equal(t, ongoing, s.OngoingTxns(), "step %d", step)
	}
}

// TestTxnRecoveryModel writes a log of transactional batches and markers
// as a partition would — producer state checked and updated, each aborted
// transaction appended to a .txnindex, snapshots now and then — and at
// random points crashes the file system (the log itself kept: its recovery
// is the segment's), then recovers as a partition must: the newest usable
// snapshot, a replay of the log after it with ReplayBatchesTxn, the
// .txnindex cut back to the snapshot and rebuilt from the replay. The
// recovered state has the same open transactions and LSO, and the index
// the same entries, as before the crash. Replay with STRATA_SEED=n.
func TestTxnRecoveryModel(t *testing.T) {
	seed := rand.Uint64()
	if v := os.Getenv("STRATA_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	const dir, idxName = "p", "p/00000000000000000000.txnindex"
	for round := range 10 {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll(dir, 0o755))
		idx, err := index.OpenTxnIndex(mem, idxName, 0)
		require.NoError(t, err)
		s := NewProducerState(0)
		var data []byte
		var aborted []index.AbortedTxn
		seq := map[int64]int32{}
		next := int64(0)
		for step := range 200 {
			pid := int64(1 + rng.IntN(3))
			switch r := rng.IntN(10); {
			case r < 5:
				b := txnBatchBytes(t, pid, seq[pid], next)
				h, err := batch.ParseHeader(b)
				require.NoError(t, err)
				pb := ProducerBatchOf(h)
				if _, err := s.Check(pb); err != nil {
					continue // a non-transactional write inside a transaction
				}
				s.Update(pb, next)
				seq[pid]++
				data = append(data, b...)
				next++
			case r < 8:
				b := batch.AppendMarker(nil, batch.Marker{Commit: rng.IntN(2) == 0, ProducerID: pid, Timestamp: 5})
				batch.SetBaseOffset(b, next)
				m, _, err := batch.ParseMarker(b)
				require.NoError(t, err)
				require.NoError(t, s.CheckMarker(TxnMarkerOf(m)))
				c, ok := s.UpdateMarker(TxnMarkerOf(m), next)
				if ok && c.Aborted {
					require.NoError(t, idx.Append(c.AbortedTxn()))
					aborted = append(aborted, c.AbortedTxn())
				}
				data = append(data, b...)
				next++
			case r < 9:
				require.NoError(t, idx.Flush())
				_, err := WriteProducerSnapshot(mem, dir, s)
				require.NoError(t, err)
			default:
				crashed := mem.CrashCloneWithTornWrites(rng)
				rs, err := loadProducerStateDir(crashed, dir, 0, next)
				require.NoError(t, err)
				from := rs.EndOffset()
				ridx, err := index.OpenTxnIndex(crashed, idxName, 0)
				require.NoError(t, err)
				require.NoError(t, ridx.TruncateTo(from))
				_, err = ridx.RecoverTail()
				require.NoError(t, err)
				_, err = rs.ReplayBatchesTxn(data, func(c CompletedTxn) {
					if c.Aborted {
						require.NoError(t, ridx.Append(c.AbortedTxn()))
					}
				})
				require.NoError(t, err)
				require.Equal(t, s.OngoingTxns(), rs.OngoingTxns(), "round %d step %d", round, step)
				// Every record is replicated here: the high watermark is
				// the end of the log, for both.
				s.OnHighWatermark(next)
				rs.OnHighWatermark(next)
				require.Equal(t, s.LastStableOffset(next), rs.LastStableOffset(next), "round %d step %d", round, step)
				got, err := ridx.All()
				require.NoError(t, err)
				require.Equal(t, aborted, got, "round %d step %d", round, step)
				require.NoError(t, ridx.Close())
			}
		}
		require.NoError(t, idx.Close())
	}
}

// txnBatchBytes is a one-record transactional batch of producer pid (plain
// for producer 3, whose batches are never transactional) at offset.
func txnBatchBytes(t *testing.T, pid int64, seq int32, offset int64) []byte {
	var bd batch.Builder
	bd.Reset(1)
	bd.Append(1, nil, []byte("v"), nil)
	bd.SetProducer(pid, 0, seq)
	b := slices.Clone(bd.Bytes())
	if pid != 3 {
		b[22] |= 0x10
		batch.SetCRC(b)
	}
	batch.SetBaseOffset(b, offset)
	return b
}
