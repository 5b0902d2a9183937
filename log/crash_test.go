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
