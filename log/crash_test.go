package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// seed returns the seed of a randomized test: STRATA_SEED if set, else the
// clock. It is printed so a failure can be replayed.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("STRATA_SEED"); v != "" {
		var err error
		s, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (replay with STRATA_SEED=%d)", s, s)
	return s
}

func value(rng *rand.Rand, off int) []byte {
	v := make([]byte, 1+rng.IntN(300))
	for i := range v {
		v[i] = byte('a' + (off+i)%26)
	}
	return append([]byte(fmt.Sprintf("%08d:", off)), v...)
}

// TestCrashAtRandomPoints appends (sometimes syncing), crashes the in-memory
// file system at a random point — keeping a random part of unsynced bytes,
// garbage included — and reopens: everything synced is there, what survived
// past it is exactly what was written, and appends continue at the end.
func TestCrashAtRandomPoints(t *testing.T) {
	s := seed(t)
	iters := 40
	switch {
	case testing.Short():
		iters = 10
	case os.Getenv("STRATA_SOAK") != "":
		iters = 2000
	}
	for it := 0; it < iters; it++ {
		rng := rand.New(rand.NewPCG(s, uint64(it)))
		fs := vfs.NewMem()
		b, err := Open("/d", Config{FS: fs})
		require.NoError(t, err)
		cfg := small
		cfg.FlushMessages = []int64{0, 1, 3}[rng.IntN(3)]
		p := createT(t, b, "t", cfg)

		var written [][]byte
		durable := 0
		ops := rng.IntN(120)
		for op := 0; op < ops; op++ {
			switch rng.IntN(10) {
			case 0:
				require.NoError(t, p.Flush())
				durable = len(written)
			default:
				k := 1 + rng.IntN(4)
				var recs []Record
				for j := 0; j < k; j++ {
					v := value(rng, len(written)+j)
					recs = append(recs, Record{Value: v})
				}
				off, err := p.Append(recs...)
				require.NoError(t, err)
				require.EqualValues(t, len(written), off)
				for _, r := range recs {
					written = append(written, r.Value)
				}
				if cfg.FlushMessages == 1 {
					durable = len(written)
				}
				if rp := int(p.RecoveryPoint()); rp > durable {
					durable = rp
				}
			}
		}
		crashed := fs.CrashCloneWithTornWrites(rng)
		b.Close()

		b, err = Open("/d", Config{FS: crashed})
		require.NoError(t, err, "iteration %d", it)
		tp, err := b.Topic("t")
		require.NoError(t, err)
		p, _ = tp.Partition(0)
		end := int(p.EndOffset())
		require.GreaterOrEqual(t, end, durable, "iteration %d: synced records lost", it)
		require.LessOrEqual(t, end, len(written), "iteration %d", it)
		recs, err := p.Read(0, 1<<30)
		require.NoError(t, err, "iteration %d", it)
		require.Len(t, recs, end)
		for i, r := range recs {
			require.EqualValues(t, i, r.Offset)
			require.Equal(t, written[i], r.Value, "iteration %d offset %d", it, i)
		}
		off, err := p.Append(Record{Value: []byte("after")})
		require.NoError(t, err)
		require.EqualValues(t, end, off)
		require.NoError(t, b.Close())

		// And a clean reopen of the recovered log agrees.
		b, err = Open("/d", Config{FS: crashed})
		require.NoError(t, err)
		p, _ = b.Partition("t", 0)
		require.EqualValues(t, end+1, p.EndOffset())
		require.NoError(t, b.Close())
	}
}

// TestCrashWhileAppending crashes while a writer is mid-append: every
// acknowledged offset (FlushMessages 1) survives.
func TestCrashWhileAppending(t *testing.T) {
	s := seed(t)
	for it := 0; it < 10; it++ {
		rng := rand.New(rand.NewPCG(s, uint64(it)))
		fs := vfs.NewMem()
		b, err := Open("/d", Config{FS: fs})
		require.NoError(t, err)
		cfg := small
		cfg.FlushMessages = 1
		p := createT(t, b, "t", cfg)
		var acked atomic.Int64
		target := int64(20 + rng.IntN(100))
		reached := make(chan struct{})
		var once sync.Once
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					off, err := p.Append(Record{Value: []byte("v")}, Record{Value: []byte("w")})
					if err != nil {
						return
					}
					for {
						a := acked.Load()
						if off+2 <= a || acked.CompareAndSwap(a, off+2) {
							break
						}
					}
					if acked.Load() >= target {
						once.Do(func() { close(reached) })
					}
				}
			}()
		}
		<-reached
		before := acked.Load()
		crashed := fs.CrashCloneWithTornWrites(rng)
		close(stop)
		wg.Wait()
		b.Close()

		b, err = Open("/d", Config{FS: crashed})
		require.NoError(t, err)
		p, err = b.Partition("t", 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p.EndOffset(), before, "iteration %d", it)
		recs, err := p.Read(0, 1<<30)
		require.NoError(t, err)
		require.EqualValues(t, p.EndOffset(), len(recs))
		require.NoError(t, b.Close())
	}
}

// TestCorruptionIsAnErrorNeverRecords flips a byte inside a sealed segment:
// reads over it fail with ErrCorrupt, reads elsewhere work.
func TestCorruptionIsAnErrorNeverRecords(t *testing.T) {
	dir := t.TempDir()
	b := openT(t, vfs.Default, dir)
	p := createT(t, b, "t", small)
	for i := 0; i < 200; i++ {
		_, err := p.Append(rec(i))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	name := filepath.Join(dir, "t-0", segment.Name(0, ".log"))
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	i := bytes.Index(data, []byte("value-10"))
	require.Positive(t, i)
	data[i+3] ^= 0xff
	require.NoError(t, os.WriteFile(name, data, 0o644))

	b = openT(t, vfs.Default, dir)
	defer b.Close()
	p, _ = b.Partition("t", 0)
	_, err = p.Read(0, 1<<20)
	require.ErrorIs(t, err, ErrCorrupt)
	recs, err := p.Read(190, 1<<20)
	require.NoError(t, err)
	require.EqualValues(t, 190, recs[0].Offset)
}

// TestUncleanOpenTruncatesCorruptTail: after an unclean shutdown, a corrupt
// batch in the active segment ends the log there.
func TestUncleanOpenTruncatesCorruptTail(t *testing.T) {
	dir := t.TempDir()
	b := openT(t, vfs.Default, dir)
	p := createT(t, b, "t", TopicConfig{})
	for i := 0; i < 50; i++ {
		_, err := p.Append(rec(i))
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, cleanShutdown)))
	name := filepath.Join(dir, "t-0", segment.Name(0, ".log"))
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	// Batch 40's position: every batch here has the same size.
	size := len(data) / 50
	data[40*size+70] ^= 0x01
	data = append(data, bytes.Repeat([]byte{0xAB}, 33)...) // and some garbage
	require.NoError(t, os.WriteFile(name, data, 0o644))
	// The recovery point says everything was flushed; force a full scan as a
	// lost checkpoint would.
	require.NoError(t, os.Remove(filepath.Join(dir, recoveryPointFile)))

	b = openT(t, vfs.Default, dir)
	defer b.Close()
	p, _ = b.Partition("t", 0)
	require.EqualValues(t, 40, p.EndOffset())
	recs, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 40)
	off, err := p.Append(rec(40))
	require.NoError(t, err)
	require.EqualValues(t, 40, off)
}

// TestCrashDuringTruncateTo crashes at every file-system operation of a
// TruncateTo that spans segments (and, with a high watermark and epochs to
// cut, checkpoints): after the reopen the log is either what it was or cut
// exactly at the batch boundary TruncateTo cuts at, its records are the
// old ones, and the epoch cache and high watermark fit it.
func TestCrashDuringTruncateTo(t *testing.T) {
	for _, full := range []bool{false, true} {
		for n := 0; ; n++ {
			mem := vfs.NewMem()
			efs, hook := injectable(mem)
			s := openStoreT(t, efs, StoreConfig{})
			p, err := s.CreatePartition("t", 0, small)
			require.NoError(t, err)
			appendN(t, p, 30, 3)
			require.NoError(t, p.SetLeaderEpoch(4))
			appendN(t, p, 30, 3) // 90..179 under epoch 4
			_, err = p.SetHighWatermark(170)
			require.NoError(t, err)
			require.NoError(t, p.Flush())
			require.NoError(t, s.WriteCheckpoints())
			old := allBatches(t, p)
			oldEnd := p.EndOffset()

			var crashed *vfs.MemFS
			s.roundMu.Lock() // the crash point is the same every run
			hook.set(crashAtOp(mem, n, &crashed, nil))
			cutAt := int64(100) // inside the batch 99..101: the cut is at 99
			if full {
				err = p.TruncateFullyAndStartAt(1000)
			} else {
				err = p.TruncateTo(cutAt)
			}
			hook.set(nil)
			s.roundMu.Unlock()
			s.Close()
			if crashed == nil {
				require.NoError(t, err)
				require.Positive(t, n)
				break
			}
			s = openStoreT(t, crashed, StoreConfig{})
			p, err = s.OpenPartition("t", 0, small)
			require.NoError(t, err, "crash at operation %d", n)
			end := p.EndOffset()
			got := allBatches(t, p)
			switch {
			case end == oldEnd:
				require.Equal(t, old, got, "crash at operation %d: untouched", n)
				require.EqualValues(t, 170, p.HighWatermark())
				require.Equal(t, []EpochEntry{{0, 0}, {4, 90}}, p.EpochEntries())
			case full:
				require.Empty(t, got, "crash at operation %d", n)
				require.Equal(t, p.StartOffset(), end)
				require.Equal(t, end, p.HighWatermark())
			default:
				require.EqualValues(t, 99, end, "crash at operation %d: cut at the batch boundary", n)
				require.Equal(t, old[:len(got)], got, "crash at operation %d", n)
				require.LessOrEqual(t, p.HighWatermark(), end)
				require.Equal(t, []EpochEntry{{0, 0}, {4, 90}}, p.EpochEntries())
			}
			// The log goes on.
			off, err := p.Append(Record{Value: []byte("after")})
			require.NoError(t, err)
			require.Equal(t, end, off)
			require.NoError(t, s.Close())
		}
	}
}

// TestReopenKeepsHighWatermarkAndEpochs: a clean reopen and a crash after
// a checkpoint give back the high watermark and the leader-epoch cache.
func TestReopenKeepsHighWatermarkAndEpochs(t *testing.T) {
	mem := vfs.NewMem()
	s := openStoreT(t, mem, StoreConfig{})
	p, err := s.CreatePartition("t", 2, small)
	require.NoError(t, err)
	appendN(t, p, 10, 2)
	require.NoError(t, p.SetLeaderEpoch(3))
	appendN(t, p, 10, 2)
	require.NoError(t, p.SetLeaderEpoch(6))
	_, err = p.SetHighWatermark(33)
	require.NoError(t, err)
	epochs := p.EpochEntries()
	require.Equal(t, []EpochEntry{{0, 0}, {3, 20}, {6, 40}}, epochs)
	require.NoError(t, p.Flush())
	require.NoError(t, s.WriteCheckpoints())
	crashed := mem.CrashClone()
	require.NoError(t, s.Close())

	for _, fs := range []*vfs.MemFS{mem, crashed} {
		s := openStoreT(t, fs, StoreConfig{})
		p, err := s.OpenPartition("t", 2, small)
		require.NoError(t, err)
		require.EqualValues(t, 33, p.HighWatermark())
		require.EqualValues(t, 40, p.EndOffset())
		require.Equal(t, epochs, p.EpochEntries())
		require.EqualValues(t, 6, p.LeaderEpoch())
		ep, end := p.EndOffsetForEpoch(3)
		require.EqualValues(t, 3, ep)
		require.EqualValues(t, 40, end)
		require.NoError(t, s.Close())
	}
}

// TestDamagedCheckpointsAreNotTrusted: a torn or garbage leader-epoch
// checkpoint is rebuilt from the batches; one whose epochs run past the
// log is cut to it; a torn high-watermark checkpoint is ignored (the high
// watermark falls back to the log start); one past the log end is clamped.
func TestDamagedCheckpointsAreNotTrusted(t *testing.T) {
	setup := func(t *testing.T) (*vfs.MemFS, []EpochEntry) {
		mem := vfs.NewMem()
		s := openStoreT(t, mem, StoreConfig{})
		p, err := s.CreatePartition("t", 0, small)
		require.NoError(t, err)
		appendN(t, p, 10, 2)
		require.NoError(t, p.SetLeaderEpoch(2))
		appendN(t, p, 10, 2)
		require.NoError(t, p.SetLeaderEpoch(5))
		appendN(t, p, 10, 2)
		_, err = p.SetHighWatermark(50)
		require.NoError(t, err)
		epochs := p.EpochEntries()
		require.NoError(t, s.Close())
		return mem, epochs
	}
	write := func(t *testing.T, fs vfs.FS, name, data string) {
		f, err := fs.Create(name)
		require.NoError(t, err)
		_, err = f.Write([]byte(data))
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	reopen := func(t *testing.T, fs vfs.FS) (*Store, *Partition) {
		s := openStoreT(t, fs, StoreConfig{})
		p, err := s.OpenPartition("t", 0, small)
		require.NoError(t, err)
		return s, p
	}
	epochFile := filepath.Join("/d", "t-0", epochCheckpointFile)
	for _, damage := range []string{"", "0\n3\n0 0\n2 20\n", "0\n3\n0 0\n2 20\n5 4", "garbage\x00\xff", "0\n2\n5 40\n2 20\n"} {
		mem, epochs := setup(t)
		write(t, mem, epochFile, damage)
		s, p := reopen(t, mem)
		require.Equal(t, epochs, p.EpochEntries(), "damage %q: rebuilt from the log", damage)
		require.EqualValues(t, 5, p.LeaderEpoch())
		require.NoError(t, s.Close())
		// And checkpointed again: the next open reads it as it is.
		data, err := vfs.ReadFile(mem, epochFile)
		require.NoError(t, err)
		require.Equal(t, string(formatEpochCheckpoint(epochs)), string(data))
	}
	// Epochs past the end of the log (its tail was lost) are cut.
	mem, _ := setup(t)
	write(t, mem, epochFile, "0\n5\n0 0\n2 20\n5 40\n9 60\n11 75\n")
	s, p := reopen(t, mem)
	// The epoch at the end offset (60) has no record yet and stays.
	require.Equal(t, []EpochEntry{{0, 0}, {2, 20}, {5, 40}, {9, 60}}, p.EpochEntries())
	require.EqualValues(t, 9, p.LeaderEpoch())
	require.NoError(t, s.Close())

	// A torn high-watermark checkpoint: ignored.
	mem, _ = setup(t)
	write(t, mem, filepath.Join("/d", highWatermarkFile), "0\n1\nt 0 5")
	s, p = reopen(t, mem)
	require.EqualValues(t, 0, p.HighWatermark())
	require.NoError(t, s.Close())
	// One past the end: clamped.
	mem, _ = setup(t)
	write(t, mem, filepath.Join("/d", highWatermarkFile), "0\n1\nt 0 5000\n")
	s, p = reopen(t, mem)
	require.EqualValues(t, 60, p.HighWatermark())
	require.NoError(t, s.Close())
}
