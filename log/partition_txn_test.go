package log

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// txnBatchBytes is producerBatchBytes with the transactional bit set.
func txnProduce(pid int64, epoch int16, seq int32, n int) []byte {
	b := producerBatchBytes(pid, epoch, seq, n, 0)
	b[22] |= 0x10 // attributes bit 4
	batch.SetCRC(b)
	return b
}

func markerOf(pid int64, epoch int16, coord int32, commit bool) batch.Marker {
	return batch.Marker{Commit: commit, CoordinatorEpoch: coord, ProducerID: pid, ProducerEpoch: epoch, Timestamp: time.Now().UnixMilli()}
}

// abortedTxns returns the entries of every segment's .txnindex, in order.
func abortedTxns(t *testing.T, p *Partition) []index.AbortedTxn {
	t.Helper()
	var all []index.AbortedTxn
	for _, s := range *p.segs.Load() {
		txns, _, err := s.AbortedTxns(0, math.MaxInt64)
		require.NoError(t, err)
		all = append(all, txns...)
	}
	return all
}

// txnModel replays p's log from its first batch into a fresh producer
// state: the aborted transactions the .txnindex must hold and the state
// the LSO must follow.
func txnModel(t *testing.T, p *Partition) (*ProducerState, []index.AbortedTxn) {
	t.Helper()
	ps := NewProducerState(p.StartOffset())
	raw := allBatches(t, p)
	var aborted []index.AbortedTxn
	n, err := ps.ReplayBatchesTxn(raw, func(c CompletedTxn) {
		if c.Aborted {
			aborted = append(aborted, c.AbortedTxn())
		}
	})
	require.NoError(t, err)
	require.Equal(t, len(raw), n)
	ps.OnHighWatermark(p.HighWatermark())
	return ps, aborted
}

// TestTxnAppendsAndMarkers: transactional batches open their producer's
// transaction and hold the LSO back; a COMMIT ends it without a .txnindex
// entry, an ABORT with Kafka's entry; fenced markers, a client's control
// batch, a transactional batch without producer id and a producer's
// non-transactional batch inside its transaction change nothing; a clean
// restart keeps the open transaction, the LSO and the entries.
func TestTxnAppendsAndMarkers(t *testing.T) {
	fs := vfs.NewMem()
	b, err := Open("/d", Config{FS: fs})
	require.NoError(t, err)
	p := createT(t, b, "t", small)

	require.EqualValues(t, 0, p.LastStableOffset())
	_, err = p.Append(Record{Value: []byte("plain")}) // offset 0
	require.NoError(t, err)
	require.EqualValues(t, 1, p.LastStableOffset())

	base, next, err := p.AppendBatch(txnProduce(7, 0, 0, 2)) // 1, 2
	require.NoError(t, err)
	require.EqualValues(t, 1, base)
	require.EqualValues(t, 3, next)
	require.EqualValues(t, 1, p.LastStableOffset(), "the open transaction holds the LSO")

	refused := []struct {
		name string
		fn   func() error
		err  error
	}{
		{"non-transactional batch inside the transaction", func() error { _, _, err := p.AppendBatch(producerBatchBytes(7, 0, 2, 1, 0)); return err }, ErrInvalidTxnState},
		{"transactional batch without producer id", func() error { _, _, err := p.AppendBatch(txnProduce(-1, -1, -1, 1)); return err }, ErrInvalidTxnState},
		{"client's control batch", func() error {
			m := batch.AppendMarker(nil, markerOf(7, 0, 0, true))
			_, _, err := p.AppendBatch(m)
			return err
		}, ErrTransactionsUnsupported},
		{"marker of an older producer epoch", func() error { _, err := p.AppendMarker(markerOf(7, -1+0, 0, false)); return err }, ErrInvalidSequence},
	}
	for _, tc := range refused {
		end, st := p.EndOffset(), p.producers()
		require.ErrorIs(t, tc.fn(), tc.err, tc.name)
		require.Equal(t, end, p.EndOffset(), tc.name)
		require.Equal(t, st.OngoingTxns(), p.producers().OngoingTxns(), tc.name)
	}

	_, _, err = p.AppendBatch(producerBatchBytes(8, 0, 0, 1, 0)) // 3: another producer
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnProduce(9, 0, 0, 1)) // 4
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnProduce(7, 0, 2, 1)) // 5: still 7's transaction
	require.NoError(t, err)
	require.EqualValues(t, 1, p.LastStableOffset())

	abort, err := p.AppendMarker(markerOf(7, 0, 3, false)) // 6
	require.NoError(t, err)
	require.EqualValues(t, 6, abort)
	require.EqualValues(t, 4, p.LastStableOffset(), "9's transaction is still open")
	want := []index.AbortedTxn{{ProducerID: 7, FirstOffset: 1, LastOffset: 6, LastStableOffset: 4}}
	require.Equal(t, want, abortedTxns(t, p))

	// Fencing: an older coordinator epoch; a newer epoch than the marker's.
	_, err = p.AppendMarker(markerOf(7, 0, 2, true))
	require.ErrorIs(t, err, ErrTransactionCoordinatorFenced)
	_, _, err = p.AppendBatch(producerBatchBytes(9, 1, 0, 1, 0)) // 9 bumps its epoch (not transactional while open: refused)
	require.ErrorIs(t, err, ErrInvalidTxnState)
	_, _, err = p.AppendBatch(producerBatchBytes(8, 1, 0, 1, 0)) // 7: 8 bumps its epoch
	require.NoError(t, err)
	_, err = p.AppendMarker(markerOf(8, 0, 5, false))
	require.ErrorIs(t, err, ErrProducerFenced)
	require.EqualValues(t, 8, p.EndOffset())

	// A clean restart keeps 9's open transaction and the entry.
	require.NoError(t, b.Close())
	b, err = Open("/d", Config{FS: fs})
	require.NoError(t, err)
	defer b.Close()
	p, err = b.Partition("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, p.LastStableOffset())
	require.Equal(t, want, abortedTxns(t, p))

	commit, err := p.AppendMarker(markerOf(9, 0, 0, true)) // 8
	require.NoError(t, err)
	require.EqualValues(t, 8, commit)
	require.EqualValues(t, 9, p.LastStableOffset())
	require.Equal(t, want, abortedTxns(t, p), "a commit adds no entry")
	// A retried marker ends nothing and is appended.
	again, err := p.AppendMarker(markerOf(9, 0, 0, true))
	require.NoError(t, err)
	require.Equal(t, commit+1, again)
	require.EqualValues(t, 10, p.LastStableOffset())
	_, _, err = p.AppendBatch(producerBatchBytes(7, 0, 3, 1, 0)) // 7 writes outside a transaction again
	require.NoError(t, err)

	ps, aborted := txnModel(t, p)
	require.Equal(t, aborted, abortedTxns(t, p))
	require.Equal(t, ps.OngoingTxns(), p.producers().OngoingTxns())
}

// TestTxnFollowerAndTruncation: a follower copying a leader's log gets its
// .txnindex entries and, once its high watermark moves, its LSO; a marker
// not yet below the high watermark holds the LSO at its transaction's first
// offset. Truncating below an ABORT removes its entry and opens the
// transaction again; a full truncation removes the .txnindex files.
func TestTxnFollowerAndTruncation(t *testing.T) {
	ls := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer ls.Close()
	ffs := vfs.NewMem()
	fst := openStoreT(t, ffs, StoreConfig{})
	defer fst.Close()
	leader, err := ls.CreatePartition("t", 0, small)
	require.NoError(t, err)
	follower, err := fst.CreatePartition("t", 0, small)
	require.NoError(t, err)

	seq := map[int64]int32{}
	for i := range 40 {
		pid := int64(1 + i%3)
		_, _, err := leader.AppendBatch(txnProduce(pid, 0, seq[pid], 3))
		require.NoError(t, err)
		seq[pid] += 3
		if i%4 == 3 {
			_, err := leader.AppendMarker(markerOf(pid, 0, 0, i%8 == 3))
			require.NoError(t, err)
		}
	}
	require.Greater(t, leader.Segments(), 2)
	_, err = leader.SetHighWatermark(leader.EndOffset())
	require.NoError(t, err)
	_, want := txnModel(t, leader)
	require.NotEmpty(t, want)
	require.Equal(t, want, abortedTxns(t, leader))

	raw := allBatches(t, leader)
	_, _, err = follower.AppendAsFollower(raw)
	require.NoError(t, err)
	require.Equal(t, want, abortedTxns(t, follower))
	require.EqualValues(t, 0, follower.LastStableOffset(), "high watermark 0")
	_, err = follower.SetHighWatermark(leader.EndOffset())
	require.NoError(t, err)
	require.Equal(t, leader.LastStableOffset(), follower.LastStableOffset())
	require.Less(t, follower.LastStableOffset(), follower.EndOffset(), "transactions are open")

	// A marker above the high watermark: the LSO stays at its first offset.
	last := want[len(want)-1]
	require.NoError(t, follower.TruncateTo(last.LastOffset))
	require.Equal(t, want[:len(want)-1], abortedTxns(t, follower))
	first, ok := follower.producers().FirstUnstableOffset()
	require.True(t, ok)
	require.LessOrEqual(t, first, last.FirstOffset, "the aborted transaction is open again")
	require.LessOrEqual(t, follower.LastStableOffset(), last.FirstOffset)

	// The leader's marker copied again, high watermark below it.
	_, _, err = follower.AppendAsFollower(raw[posOf(t, raw, last.LastOffset):])
	require.NoError(t, err)
	require.Equal(t, want, abortedTxns(t, follower))
	require.LessOrEqual(t, follower.LastStableOffset(), last.FirstOffset, "marker not below the high watermark")
	_, err = follower.SetHighWatermark(follower.EndOffset())
	require.NoError(t, err)
	require.Equal(t, leader.LastStableOffset(), follower.LastStableOffset())

	require.NoError(t, follower.TruncateFullyAndStartAt(1000))
	require.Empty(t, abortedTxns(t, follower))
	names, err := ffs.ReadDir(follower.dir)
	require.NoError(t, err)
	for _, n := range names {
		require.NotContains(t, n, ".txnindex")
	}
	require.EqualValues(t, 1000, follower.LastStableOffset())
}

// posOf returns the position in raw of the batch at offset.
func posOf(t *testing.T, raw []byte, offset int64) int {
	t.Helper()
	pos := -1
	at := 0
	require.NoError(t, batch.Batches(raw, func(b []byte, h batch.Header) error {
		if h.BaseOffset == offset {
			pos = at
		}
		at += len(b)
		return nil
	}))
	require.GreaterOrEqual(t, pos, 0)
	return pos
}

// TestTxnCrashRecovery appends transactional batches, COMMIT and ABORT
// markers and plain batches over many segments, crashes the file system
// at random points (unsynced bytes kept in part, torn, or lost) and
// reopens: no acknowledged (fsynced) marker is lost, every segment's
// .txnindex holds exactly the aborts of the log that survived (rebuilt for
// recovered segments, none corrupt), the open transactions and the LSO are
// those of a replay of the log, and appends go on. Replay a failure with
// STRATA_SEED.
func TestTxnCrashRecovery(t *testing.T) {
	s := seed(t)
	iters := 30
	switch {
	case testing.Short():
		iters = 8
	case os.Getenv("STRATA_SOAK") != "":
		iters = 1000
	}
	for it := range iters {
		rng := rand.New(rand.NewPCG(s, uint64(it)))
		fs := vfs.NewMem()
		b, err := Open("/d", Config{FS: fs})
		require.NoError(t, err)
		cfg := small
		cfg.SegmentBytes = int64(600 + rng.IntN(2000))
		cfg.FlushMessages = []int64{0, 1}[rng.IntN(2)]
		p := createT(t, b, "t", cfg)

		const producers = 3
		epoch := [producers]int16{}
		seq := [producers]int32{}
		var acked []index.AbortedTxn // aborts whose marker was fsynced
		durable := int64(0)
		check := func(when string) {
			t.Helper()
			ps, want := txnModel(t, p)
			require.Equal(t, want, abortedTxns(t, p), "iter %d %s", it, when)
			require.Equal(t, ps.OngoingTxns(), p.producers().OngoingTxns(), "iter %d %s", it, when)
			require.Equal(t, max(ps.LastStableOffset(p.HighWatermark()), p.StartOffset()), p.LastStableOffset(), "iter %d %s", it, when)
			for _, a := range acked {
				if a.LastOffset < durable {
					require.Contains(t, want, a, "iter %d %s: acknowledged abort lost", it, when)
				}
			}
		}
		reopen := func(crash bool) {
			t.Helper()
			target := fs
			if crash {
				target = fs.CrashCloneWithTornWrites(rng)
			}
			b.Close()
			fs = target
			b, err = Open("/d", Config{FS: fs, Logger: testLogger(t)})
			require.NoError(t, err, "iter %d", it)
			p, err = b.Partition("t", 0)
			require.NoError(t, err)
			require.GreaterOrEqual(t, p.EndOffset(), durable, "iter %d: durable records lost", it)
			durable = p.EndOffset()
			check("after reopen")
			// The coordinator aborts what the crash left open, and the
			// producers start a new epoch.
			for _, o := range p.producers().OngoingTxns() {
				i := o.ProducerID - 1
				_, err := p.AppendMarker(markerOf(o.ProducerID, epoch[i], 0, false))
				require.NoError(t, err, "iter %d", it)
			}
			for i := range epoch {
				epoch[i]++
				seq[i] = 0
			}
			check("after aborting the open transactions")
		}
		ops := 40 + rng.IntN(120)
		for op := 0; op < ops; op++ {
			i := rng.IntN(producers)
			pid := int64(i + 1)
			inTxn := false
			for _, o := range p.producers().OngoingTxns() {
				inTxn = inTxn || o.ProducerID == pid
			}
			switch r := rng.IntN(20); {
			case r < 8:
				n := 1 + rng.IntN(4)
				_, _, err := p.AppendBatch(txnProduce(pid, epoch[i], seq[i], n))
				require.NoError(t, err)
				seq[i] += int32(n)
			case r < 12 && inTxn:
				commit := rng.IntN(2) == 0
				ps := p.producers()
				off, err := p.AppendMarker(markerOf(pid, epoch[i], 0, commit))
				require.NoError(t, err)
				if cfg.FlushMessages == 1 && !commit {
					c, _ := ps.UpdateMarker(TxnMarkerOf(markerOf(pid, epoch[i], 0, commit)), off)
					acked = append(acked, c.AbortedTxn())
					durable = off + 1
				}
			case r < 14 && !inTxn:
				_, _, err := p.AppendBatch(producerBatchBytes(pid, epoch[i], seq[i], 1, 0))
				require.NoError(t, err)
				seq[i]++
			case r < 15:
				_, err := p.Append(Record{Value: bytes.Repeat([]byte("x"), rng.IntN(200))})
				require.NoError(t, err)
			case r < 16:
				require.NoError(t, p.Flush())
				durable = p.EndOffset()
			case r < 17:
				require.NoError(t, p.Roll())
			case r < 18:
				reopen(false)
			case r < 19:
				reopen(true)
			}
			if cfg.FlushMessages == 1 {
				durable = p.EndOffset()
			}
		}
		check("at the end")
		reopen(true)
		require.NoError(t, b.Close())
	}
}
