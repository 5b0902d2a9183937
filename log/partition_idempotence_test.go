package log

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// producerBatchBytes returns a batch of n records of producer pid (no
// producer: pid < 0), whose values name the producer and each record's
// sequence. ts 0 means now.
func producerBatchBytes(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	var bd batch.Builder
	bd.Reset(ts)
	if pid >= 0 {
		bd.SetProducer(pid, epoch, seq)
	}
	for i := 0; i < n; i++ {
		bd.Append(ts, nil, []byte(fmt.Sprintf("p%d-e%d-s%d", pid, epoch, int(seq)+i)), nil)
	}
	return bytes.Clone(bd.Bytes())
}

// replayedState rebuilds the producer state of p's log from its first
// batch, as open would without any snapshot: the model the snapshots and
// replays must agree with.
func replayedState(t *testing.T, p *Partition) *ProducerState {
	t.Helper()
	ps := NewProducerState(p.StartOffset())
	raw := allBatches(t, p)
	n, err := ps.ReplayBatches(raw)
	require.NoError(t, err)
	require.Equal(t, len(raw), n)
	return ps
}

// requireSameState checks that two producer states hold the same producers
// and end offset.
func requireSameState(t *testing.T, want, got *ProducerState, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want.Producers(), got.Producers(), msgAndArgs...)
	require.Equal(t, want.EndOffset(), got.EndOffset(), msgAndArgs...)
}

type sentBatch struct {
	seq        int32
	n          int
	base, next int64
}

// TestIdempotentAppendBatch: through AppendBatch, a duplicate of each of
// the producer's last 5 batches is answered with its first offsets and
// appends nothing; every refused batch changes nothing.
func TestIdempotentAppendBatch(t *testing.T) {
	const pid, epoch = 7, 1
	setup := func(t *testing.T) (*Broker, *Partition, []sentBatch, int32) {
		b, err := Open("/d", Config{FS: vfs.NewMem()})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		p := createT(t, b, "t", TopicConfig{})
		var hist []sentBatch
		seq := int32(0)
		for i := 0; i < 6; i++ {
			if i == 2 {
				_, err := p.Append(Record{Value: []byte("not idempotent")})
				require.NoError(t, err)
			}
			n := 1 + i%3
			base, next, err := p.AppendBatch(producerBatchBytes(pid, epoch, seq, n, 0))
			require.NoError(t, err)
			require.EqualValues(t, n, next-base)
			hist = append(hist, sentBatch{seq: seq, n: n, base: base, next: next})
			seq += int32(n)
		}
		return b, p, hist, seq
	}
	_, _, hist, nextSeq := setup(t)

	control := func(b []byte) []byte {
		b[22] |= 0x30 // attributes bits 4 and 5: a client's control batch
		batch.SetCRC(b)
		return b
	}
	cases := []struct {
		name       string
		batch      []byte
		err        error
		base, next int64 // for a duplicate
	}{
		{name: "batch 0 left the window", batch: producerBatchBytes(pid, epoch, 0, 1, 0), err: ErrOutOfOrderSequence},
		{name: "gap", batch: producerBatchBytes(pid, epoch, nextSeq+1, 1, 0), err: ErrOutOfOrderSequence},
		{name: "old sequence", batch: producerBatchBytes(pid, epoch, hist[4].seq+1, 1, 0), err: ErrOutOfOrderSequence},
		{name: "first sequence of batch 5, other length", batch: producerBatchBytes(pid, epoch, hist[5].seq, hist[5].n+1, 0), err: ErrOutOfOrderSequence},
		{name: "older epoch", batch: producerBatchBytes(pid, epoch-1, nextSeq, 1, 0), err: ErrProducerFenced},
		{name: "older epoch, duplicate's sequence", batch: producerBatchBytes(pid, epoch-1, hist[5].seq, hist[5].n, 0), err: ErrProducerFenced},
		{name: "new epoch not at sequence 0", batch: producerBatchBytes(pid, epoch+1, 3, 1, 0), err: ErrOutOfOrderSequence},
		{name: "unknown producer at sequence 3", batch: producerBatchBytes(pid+1, 0, 3, 1, 0), err: ErrUnknownProducerID},
		{name: "negative epoch", batch: producerBatchBytes(pid, -1, 0, 1, 0), err: ErrInvalidSequence},
		{name: "control batch", batch: control(producerBatchBytes(pid, epoch, nextSeq, 1, 0)), err: ErrTransactionsUnsupported},
	}
	for i := 1; i < 6; i++ {
		h := hist[i]
		cases = append(cases, struct {
			name       string
			batch      []byte
			err        error
			base, next int64
		}{name: fmt.Sprintf("duplicate of batch %d", i), batch: producerBatchBytes(pid, epoch, h.seq, h.n, 0), base: h.base, next: h.next})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			br, p, _, _ := setup(t)
			before, end, log := p.producers(), p.EndOffset(), allBatches(t, p)
			base, next, err := p.AppendBatch(bytes.Clone(tc.batch))
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.base, base)
				require.Equal(t, tc.next, next)
				// The Broker's answer is the first one too.
				res, err := br.ProduceBatch(context.Background(), TopicPartition{Topic: "t"}, bytes.Clone(tc.batch), AcksAll)
				require.NoError(t, err)
				require.Equal(t, tc.base, res.BaseOffset)
			}
			require.Equal(t, end, p.EndOffset(), "nothing appended")
			require.Equal(t, log, allBatches(t, p))
			requireSameState(t, before, p.producers())
		})
	}
}

// TestIdempotentAppendBatchAccepts: the batches that are accepted and what
// follows from them.
func TestIdempotentAppendBatchAccepts(t *testing.T) {
	b, err := Open("/d", Config{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	appendOK := func(pid int64, epoch int16, seq int32, n int) int64 {
		t.Helper()
		end := p.EndOffset()
		base, next, err := p.AppendBatch(producerBatchBytes(pid, epoch, seq, n, 0))
		require.NoError(t, err)
		require.Equal(t, end, base)
		require.EqualValues(t, end+int64(n), next)
		return base
	}
	appendOK(3, 0, 0, 2) // unknown producer at sequence 0
	appendOK(3, 0, 2, 1) // the next sequence
	appendOK(4, 5, 0, 1) // another producer, interleaved
	appendOK(3, 1, 0, 3) // a new epoch at 0
	_, _, err = p.AppendBatch(producerBatchBytes(3, 0, 3, 1, 0))
	require.ErrorIs(t, err, ErrProducerFenced, "the old epoch is fenced from now on")
	// A duplicate of the old epoch's batch is fenced too: its window went
	// with the epoch.
	_, _, err = p.AppendBatch(producerBatchBytes(3, 0, 2, 1, 0))
	require.ErrorIs(t, err, ErrProducerFenced)
	appendOK(3, 1, 3, 1)
	appendOK(4, 5, 1, 1)
	info, ok := p.producers().Producer(3)
	require.True(t, ok)
	require.EqualValues(t, 1, info.Epoch)
	require.EqualValues(t, 3, info.LastSequence)
	requireSameState(t, replayedState(t, p), p.producers())
	require.Equal(t, map[int64]int64{3: 7, 4: 8}, p.ProducerLastOffsets())
}

// TestDuplicateWaitsForDurability: with FlushMessages 1, the duplicate of a
// batch whose first append is still waiting for its fsync is not answered
// before that fsync.
func TestDuplicateWaitsForDurability(t *testing.T) {
	var block atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	fs := vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, ".log") && block.CompareAndSwap(true, false) {
			close(reached)
			<-release
		}
		return nil
	})
	b, err := Open("/d", Config{FS: fs})
	require.NoError(t, err)
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{FlushMessages: 1})
	_, _, err = p.AppendBatch(producerBatchBytes(1, 0, 0, 1, 0))
	require.NoError(t, err)

	raw := producerBatchBytes(1, 0, 1, 2, 0)
	block.Store(true)
	first := make(chan error, 1)
	go func() {
		_, _, err := p.AppendBatch(bytes.Clone(raw))
		first <- err
	}()
	<-reached // the first append is in its fsync
	var released atomic.Bool
	dup := make(chan int64, 1)
	go func() {
		base, _, err := p.AppendBatch(bytes.Clone(raw))
		if err != nil || !released.Load() {
			base = -1 // answered with an error, or before the fsync
		}
		dup <- base
	}()
	select {
	case base := <-dup:
		t.Fatalf("duplicate answered (%d) while its first append waits for the disk", base)
	case <-time.After(50 * time.Millisecond): // no answer: as it should be
	}
	released.Store(true)
	close(release)
	require.NoError(t, <-first)
	require.EqualValues(t, 1, <-dup)
	require.EqualValues(t, 3, p.EndOffset())
}

// TestIdempotentProducerExactlyOnce: a producer keeps up to 5 batches in
// flight; each is sent again and again, out of order, its answers lost at
// random, across clean restarts and crashes of the broker. Every record is
// in the log exactly once, in order, and every answer gives the offsets its
// batch got the first time.
func TestIdempotentPartitionExactlyOnce(t *testing.T) {
	s := seed(t)
	iters := 10
	if testing.Short() {
		iters = 3
	}
	for it := 0; it < iters; it++ {
		rng := rand.New(rand.NewPCG(s, uint64(it)))
		const pid, epoch, total = 11, 2, 80
		var batches []sentBatch
		seq := int32(0)
		for range total {
			n := 1 + rng.IntN(3)
			batches = append(batches, sentBatch{seq: seq, n: n, base: -1})
			seq += int32(n)
		}
		mem := vfs.NewMem()
		cfg := TopicConfig{SegmentBytes: 512, MaxIndexBytes: 1024, FlushMessages: 1}
		b, err := Open("/d", Config{FS: mem})
		require.NoError(t, err)
		p := createT(t, b, "t", cfg)
		appended, lo := 0, 0
		acked := make([]bool, total)
		restarts, crashes := 0, 0
		for lo < total {
			r := rng.IntN(40)
			switch {
			case r == 0:
				require.NoError(t, b.Close())
				restarts++
			case r == 1:
				mem = mem.CrashCloneWithTornWrites(rng)
				b.Close()
				crashes++
			}
			if r <= 1 {
				b, err = Open("/d", Config{FS: mem})
				require.NoError(t, err, "iteration %d", it)
				p, err = b.Partition("t", 0)
				require.NoError(t, err)
				requireSameState(t, replayedState(t, p), p.producers(), "iteration %d: state after reopen", it)
			}
			i := lo + rng.IntN(min(5, total-lo))
			sb := &batches[i]
			end := p.EndOffset()
			base, next, err := p.AppendBatch(producerBatchBytes(pid, epoch, sb.seq, sb.n, 0))
			switch {
			case i < appended: // a duplicate
				require.NoError(t, err, "iteration %d batch %d", it, i)
				require.Equal(t, sb.base, base, "iteration %d batch %d", it, i)
				require.Equal(t, sb.next, next)
				require.Equal(t, end, p.EndOffset())
			case i == appended:
				require.NoError(t, err, "iteration %d batch %d", it, i)
				require.Equal(t, end, base)
				sb.base, sb.next = base, next
				appended++
			default:
				require.ErrorIs(t, err, ErrOutOfOrderSequence, "iteration %d batch %d, %d appended", it, i, appended)
				require.Equal(t, end, p.EndOffset())
				continue
			}
			if rng.IntN(3) > 0 { // else the answer is lost
				acked[i] = true
			}
			for lo < total && acked[lo] {
				lo++
			}
		}
		recs, err := p.Read(0, 1<<30)
		require.NoError(t, err)
		var want []string
		for _, sb := range batches {
			for j := 0; j < sb.n; j++ {
				want = append(want, fmt.Sprintf("p%d-e%d-s%d", pid, epoch, int(sb.seq)+j))
			}
		}
		got := make([]string, len(recs))
		for j, r := range recs {
			got[j] = string(r.Value)
		}
		require.Equal(t, want, got, "iteration %d (%d restarts, %d crashes)", it, restarts, crashes)
		require.NoError(t, b.Close())
	}
}

// TestProducerSnapshotOnCloseAndRoll: rolls leave a snapshot at each
// segment's base; a clean close one at the end offset, which the next open
// loads: the state is the live one, and equals the one rebuilt from the log
// without any snapshot.
func TestProducerSnapshotOnCloseAndRoll(t *testing.T) {
	mem := vfs.NewMem()
	b, err := Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p := createT(t, b, "t", TopicConfig{SegmentBytes: 400, MaxIndexBytes: 1024})
	seqs := map[int64]int32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 60; i++ {
		pid := int64(rng.IntN(4))
		n := 1 + rng.IntN(3)
		_, _, err := p.AppendBatch(producerBatchBytes(pid, 0, seqs[pid], n, 0))
		require.NoError(t, err)
		seqs[pid] += int32(n)
		if i%7 == 0 {
			_, err := p.Append(Record{Value: []byte("plain")})
			require.NoError(t, err)
		}
	}
	require.Greater(t, p.Segments(), 3)
	live, end := p.producers(), p.EndOffset()
	offs, err := listProducerSnapshots(mem, p.dir)
	require.NoError(t, err)
	var bases []int64
	for _, s := range (*p.segs.Load())[1:] {
		bases = append(bases, s.BaseOffset())
	}
	require.Equal(t, bases, offs, "one snapshot per roll, at the new segment's base")
	require.NoError(t, p.Flush())
	for _, off := range offs {
		// Each is what the state was at its offset: the log before it,
		// replayed.
		s, err := ReadProducerSnapshot(mem, producerSnapshotName(p.dir, off))
		require.NoError(t, err)
		want := NewProducerState(0)
		raw, err := p.ReadBatches(0, 1<<30, off)
		require.NoError(t, err)
		_, err = want.ReplayBatches(raw)
		require.NoError(t, err)
		requireSameState(t, want, s, "snapshot %d", off)
	}
	require.NoError(t, b.Close())
	offs, err = listProducerSnapshots(mem, p.dir)
	require.NoError(t, err)
	require.Equal(t, end, offs[len(offs)-1], "the close snapshot is at the end offset")

	b, err = Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p, err = b.Partition("t", 0)
	require.NoError(t, err)
	requireSameState(t, live, p.producers())
	// And the duplicate window survived: the last batch of producer 0 is
	// answered, not appended.
	info, _ := live.Producer(0)
	last := info.Batches[len(info.Batches)-1]
	base, _, err := p.AppendBatch(producerBatchBytes(0, 0, last.FirstSeq, int(last.OffsetDelta)+1, 0))
	require.NoError(t, err)
	require.Equal(t, last.FirstOffset(), base)
	require.Equal(t, end, p.EndOffset())
	require.NoError(t, b.Close())

	// A damaged close snapshot, one past the end (a crash's leftover) and a
	// half-written one: open falls back to the roll snapshots and the log,
	// and cleans up.
	dir := p.dir
	require.NoError(t, vfs.WriteFileAtomic(mem, producerSnapshotName(dir, end), []byte("torn")))
	require.NoError(t, vfs.WriteFileAtomic(mem, producerSnapshotName(dir, end+100), encodeProducerSnapshot(NewProducerState(end+100))))
	require.NoError(t, vfs.WriteFileAtomic(mem, producerSnapshotName(dir, end-1)+".tmp", []byte("half")))
	b, err = Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p, _ = b.Partition("t", 0)
	requireSameState(t, live, p.producers())
	names, err := mem.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		require.NotContains(t, n, ".tmp")
		require.NotEqual(t, producerSnapshotName("", end+100), n, "snapshot past the end deleted")
	}
	require.NoError(t, b.Close())

	// Without any snapshot, the log alone gives the same state.
	require.NoError(t, deleteProducerSnapshots(mem, p.dir, func(int64) bool { return true }))
	b, err = Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p, _ = b.Partition("t", 0)
	requireSameState(t, live, p.producers())
	require.NoError(t, b.Close())
}

// TestProducerStateCrashAtRandomOps crashes the file system at a random
// operation while idempotent producers append (rolls writing snapshots,
// flushes, a clean close), keeping a random part of the unsynced bytes, and
// reopens: the state is the one the surviving log gives, whatever snapshots
// survived; a retry of each producer's last surviving batch is answered
// with its offsets; the next batch is appended at the end.
func TestProducerStateCrashAtRandomOps(t *testing.T) {
	s := seed(t)
	iters := 40
	switch {
	case testing.Short():
		iters = 10
	case os.Getenv("STRATA_SOAK") != "":
		iters = 1000
	}
	for it := 0; it < iters; it++ {
		rng := rand.New(rand.NewPCG(s, uint64(it)))
		mem := vfs.NewMem()
		fs, hook := injectable(mem)
		b, err := Open("/d", Config{FS: fs})
		require.NoError(t, err)
		cfg := TopicConfig{SegmentBytes: 300 + int64(rng.IntN(500)), MaxIndexBytes: 1024, FlushMessages: []int64{0, 1, 4}[rng.IntN(3)]}
		p := createT(t, b, "t", cfg)
		// The crash may come in the background loop's flush: it tears
		// with its own generator, and the loop below learns of it through
		// an atomic; crashed is read once Close has joined the loop.
		var crashed *vfs.MemFS
		inject := crashAtOp(mem, rng.IntN(400), &crashed, rand.New(rand.NewPCG(s, uint64(it)+1<<32)))
		var failing atomic.Bool
		hook.set(func(op vfs.Op, path string) error {
			err := inject(op, path)
			if err != nil {
				failing.Store(true)
			}
			return err
		})
		seqs := map[int64]int32{}
		for op := 0; op < 120 && !failing.Load(); op++ {
			switch r := rng.IntN(20); {
			case r == 0:
				p.Flush()
			case r == 1:
				p.Append(Record{Value: []byte("plain")})
			default:
				pid := int64(rng.IntN(3))
				n := 1 + rng.IntN(3)
				if _, _, err := p.AppendBatch(producerBatchBytes(pid, 0, seqs[pid], n, 0)); err == nil {
					seqs[pid] += int32(n)
				}
			}
		}
		b.Close()
		if crashed == nil {
			crashed = mem.CrashCloneWithTornWrites(rng) // after the clean close
		}
		b, err = Open("/d", Config{FS: crashed})
		require.NoError(t, err, "iteration %d", it)
		p, err = b.Partition("t", 0)
		require.NoError(t, err)
		got := p.producers()
		requireSameState(t, replayedState(t, p), got, "iteration %d", it)
		for _, info := range got.Producers() {
			last := info.Batches[len(info.Batches)-1]
			end := p.EndOffset()
			base, next, err := p.AppendBatch(producerBatchBytes(info.ProducerID, 0, last.FirstSeq, int(last.OffsetDelta)+1, 0))
			require.NoError(t, err, "iteration %d producer %d", it, info.ProducerID)
			require.Equal(t, last.FirstOffset(), base)
			require.Equal(t, last.LastOffset+1, next)
			base, _, err = p.AppendBatch(producerBatchBytes(info.ProducerID, 0, last.LastSeq+1, 1, 0))
			require.NoError(t, err, "iteration %d producer %d", it, info.ProducerID)
			require.Equal(t, end, base)
		}
		require.NoError(t, b.Close())
	}
}

// TestTruncateToReloadsProducerState: a follower copies a leader's
// idempotent batches, truncates at random offsets and copies again; after
// each truncation its producer state is the one its log gives, and no
// snapshot is left above its end. TruncateFullyAndStartAt leaves no state
// and no snapshot.
func TestTruncateToReloadsProducerState(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 3))
	cfg := TopicConfig{SegmentBytes: 300, MaxIndexBytes: 1024}
	ls := openStoreT(t, vfs.NewMem(), StoreConfig{HighWatermarkFollowsEnd: true})
	defer ls.Close()
	leader, err := ls.CreatePartition("t", 0, cfg)
	require.NoError(t, err)
	seqs := map[int64]int32{}
	for i := 0; i < 80; i++ {
		pid := int64(rng.IntN(3))
		n := 1 + rng.IntN(3)
		_, _, err := leader.AppendBatch(producerBatchBytes(pid, 0, seqs[pid], n, 0))
		require.NoError(t, err)
		seqs[pid] += int32(n)
	}
	mem := vfs.NewMem()
	fs := openStoreT(t, mem, StoreConfig{})
	defer fs.Close()
	f, err := fs.CreatePartition("t", 0, cfg)
	require.NoError(t, err)
	copyFrom := func() {
		t.Helper()
		raw, err := leader.ReadBatches(f.EndOffset(), 1<<30, leader.EndOffset())
		require.NoError(t, err)
		_, _, err = f.AppendAsFollower(raw)
		require.NoError(t, err)
	}
	copyFrom()
	requireSameState(t, leader.producers(), f.producers(), "the follower replays what the leader checked")
	for round := 0; round < 8; round++ {
		off := rng.Int64N(f.EndOffset() + 1)
		require.NoError(t, f.TruncateTo(off))
		requireSameState(t, replayedState(t, f), f.producers(), "round %d: truncated to %d", round, off)
		offs, err := listProducerSnapshots(mem, f.dir)
		require.NoError(t, err)
		for _, o := range offs {
			require.LessOrEqual(t, o, f.EndOffset(), "round %d: snapshot above the end", round)
		}
		copyFrom()
		requireSameState(t, leader.producers(), f.producers(), "round %d: copied again", round)
	}
	require.NoError(t, f.TruncateFullyAndStartAt(500))
	require.Zero(t, f.producers().Len())
	require.EqualValues(t, 500, f.producers().EndOffset())
	offs, err := listProducerSnapshots(mem, f.dir)
	require.NoError(t, err)
	require.Empty(t, offs)
}

// TestRetentionKeepsProducers: retention deletes the snapshots below the new
// log start offset, but the producers stay, across a restart too.
func TestRetentionKeepsProducers(t *testing.T) {
	mem := vfs.NewMem()
	b, err := Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p := createT(t, b, "t", TopicConfig{SegmentBytes: 300, MaxIndexBytes: 1024, RetentionBytes: 600})
	for i := 0; i < 20; i++ {
		_, _, err := p.AppendBatch(producerBatchBytes(1, 0, int32(i), 1, 0))
		require.NoError(t, err)
	}
	for i := 0; i < 20; i++ {
		_, err := p.Append(Record{Value: bytes.Repeat([]byte("x"), 40)})
		require.NoError(t, err)
	}
	n, err := p.enforceRetention(time.Now())
	require.NoError(t, err)
	require.Positive(t, n)
	start := p.StartOffset()
	require.Greater(t, start, int64(20), "the producer's records are gone")
	offs, err := listProducerSnapshots(mem, p.dir)
	require.NoError(t, err)
	require.Equal(t, start, offs[0], "snapshots below the start deleted, the one at it kept")
	require.NoError(t, b.Close())

	b, err = Open("/d", Config{FS: mem})
	require.NoError(t, err)
	defer b.Close()
	p, _ = b.Partition("t", 0)
	base, _, err := p.AppendBatch(producerBatchBytes(1, 0, 19, 1, 0))
	require.NoError(t, err, "still known: a duplicate")
	require.EqualValues(t, 19, base)
	_, _, err = p.AppendBatch(producerBatchBytes(1, 0, 20, 1, 0))
	require.NoError(t, err, "still known: its next sequence")
}

// TestProducerExpiration: a producer silent for ProducerIDExpiration (by its
// batches' timestamps) is forgotten at open and by the background loop.
func TestProducerExpiration(t *testing.T) {
	mem := vfs.NewMem()
	b, err := Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p := createT(t, b, "t", TopicConfig{ProducerIDExpiration: time.Hour})
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	_, _, err = p.AppendBatch(producerBatchBytes(1, 0, 0, 2, old))
	require.NoError(t, err)
	_, _, err = p.AppendBatch(producerBatchBytes(2, 0, 0, 2, 0))
	require.NoError(t, err)
	require.Equal(t, 2, p.producers().Len())
	require.NoError(t, b.Close())

	b, err = Open("/d", Config{FS: mem})
	require.NoError(t, err)
	p, _ = b.Partition("t", 0)
	_, ok := p.producers().Producer(1)
	require.False(t, ok, "expired at open")
	_, _, err = p.AppendBatch(producerBatchBytes(1, 0, 2, 1, 0))
	require.ErrorIs(t, err, ErrUnknownProducerID)
	_, ok = p.producers().Producer(2)
	require.True(t, ok)
	require.NoError(t, b.Close())

	st := openStoreT(t, mem, StoreConfig{ProducerIDExpirationCheckInterval: time.Millisecond})
	defer st.Close()
	p, err = st.OpenPartition("t", 0, TopicConfig{ProducerIDExpiration: time.Hour})
	require.NoError(t, err)
	_, _, err = p.AppendBatch(producerBatchBytes(3, 0, 0, 1, old))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, ok := p.producers().Producer(3)
		return !ok
	}, 10*time.Second, time.Millisecond, "the background loop expires it")
	_, ok = p.producers().Producer(2)
	require.True(t, ok)
}
