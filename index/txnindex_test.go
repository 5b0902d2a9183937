package index

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// txnFS runs a test over the OS file system and the in-memory one.
func txnFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { fn(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := vfs.NewMem()
		require.NoError(t, m.MkdirAll("d", 0o755))
		fn(t, m, "d")
	})
}

func openTxn(t *testing.T, fsys vfs.FS, name string, base int64) *TxnIndex {
	t.Helper()
	x, err := OpenTxnIndex(fsys, name, base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// The entries of Kafka's TransactionIndexTest.
var kafkaTxns = []AbortedTxn{
	{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11},
	{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 13},
	{ProducerID: 2, FirstOffset: 18, LastOffset: 35, LastStableOffset: 25},
	{ProducerID: 3, FirstOffset: 32, LastOffset: 50, LastStableOffset: 40},
}

func appendAll(t *testing.T, x *TxnIndex, txns []AbortedTxn) {
	t.Helper()
	for _, a := range txns {
		require.NoError(t, x.Append(a))
	}
}

func TestTxnIndexBytes(t *testing.T) {
	// testAbortedTxnSerde, and the layout on disk.
	txnFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "00000000000000000000.txnindex")
		x := openTxn(t, fsys, name, 0)
		_, err := fsys.Stat(name)
		require.True(t, errors.Is(err, os.ErrNotExist), "created by the first append, as Kafka")
		require.NoError(t, x.Flush(), "flushing a missing file is a no-op")
		require.NoError(t, x.Append(AbortedTxn{ProducerID: 983493, FirstOffset: 137, LastOffset: 299, LastStableOffset: 200}))
		require.NoError(t, x.Flush())
		f, err := fsys.Open(name)
		require.NoError(t, err)
		b := make([]byte, 64)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		require.Equal(t, "0000"+"00000000000f01c5"+"0000000000000089"+"000000000000012b"+"00000000000000c8", hex.EncodeToString(b[:n]))
	})
}

func TestTxnIndexReopen(t *testing.T) {
	// testPositionSetCorrectlyWhenOpened
	txnFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "a.txnindex")
		x := openTxn(t, fsys, name, 0)
		appendAll(t, x, kafkaTxns)
		require.NoError(t, x.Close())
		require.ErrorIs(t, x.Append(AbortedTxn{LastOffset: 100}), ErrClosed)
		_, _, err := x.Collect(0, 1)
		require.ErrorIs(t, err, ErrClosed)

		y := openTxn(t, fsys, name, 0)
		require.Equal(t, 4, y.Entries())
		require.ErrorIs(t, y.Append(AbortedTxn{ProducerID: 3, FirstOffset: 40, LastOffset: 50, LastStableOffset: 55}), ErrInvalidEntry,
			"the last offset is known after reopening")
		another := AbortedTxn{ProducerID: 3, FirstOffset: 50, LastOffset: 60, LastStableOffset: 55}
		require.NoError(t, y.Append(another))
		all, err := y.All()
		require.NoError(t, err)
		require.Equal(t, append(slices.Clone(kafkaTxns), another), all)
		require.NoError(t, y.SanityCheck())
	})
}

func TestTxnIndexSanityCheck(t *testing.T) {
	txnFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "a.txnindex")
		x := openTxn(t, fsys, name, 0)
		appendAll(t, x, kafkaTxns)
		require.NoError(t, x.Close())
		// testSanityCheck: opened with a later base offset, the entries
		// end below it.
		y := openTxn(t, fsys, name, 100)
		require.ErrorIs(t, y.SanityCheck(), ErrCorruptIndex)
		require.NoError(t, y.Close())

		// A torn tail.
		f, err := fsys.OpenReadWrite(name)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0, 0, 0, 1, 2}, 4*TxnEntrySize)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		z := openTxn(t, fsys, name, 0)
		require.Equal(t, 4, z.Entries())
		require.ErrorIs(t, z.SanityCheck(), ErrCorruptIndex)
		all, err := z.All()
		require.NoError(t, err)
		require.Equal(t, kafkaTxns, all, "reads ignore the partial entry")
		dropped, err := z.RecoverTail()
		require.NoError(t, err)
		require.Equal(t, 0, dropped)
		require.NoError(t, z.SanityCheck())

		// A bad version, zeros, an entry out of order: the check names them
		// and RecoverTail keeps what comes before.
		for _, bad := range []AbortedTxn{{}, {ProducerID: 9, FirstOffset: 11, LastOffset: 12, LastStableOffset: 13}, {FirstOffset: 70, LastOffset: 60}} {
			require.NoError(t, z.Reset())
			appendAll(t, z, kafkaTxns[:2])
			f, err := fsys.OpenReadWrite(name)
			require.NoError(t, err)
			_, err = f.WriteAt(bad.appendTo(nil), 2*TxnEntrySize)
			require.NoError(t, err)
			_, err = f.WriteAt(kafkaTxns[3].appendTo(nil), 3*TxnEntrySize)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			w := openTxn(t, fsys, name, 0)
			require.ErrorIs(t, w.SanityCheck(), ErrCorruptIndex, "%+v", bad)
			dropped, err := w.RecoverTail()
			require.NoError(t, err)
			require.Equal(t, 2, dropped)
			all, err := w.All()
			require.NoError(t, err)
			require.Equal(t, kafkaTxns[:2], all)
			require.NoError(t, w.Append(kafkaTxns[2]), "appends continue after the recovered entries")
			require.NoError(t, w.Close())
		}
		f, err = fsys.OpenReadWrite(name)
		require.NoError(t, err)
		b := kafkaTxns[0].appendTo(nil)
		b[1] = 1 // version 1
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		v := openTxn(t, fsys, name, 0)
		require.ErrorContains(t, v.SanityCheck(), "version 1")
	})
}

func TestTxnIndexAppendRules(t *testing.T) {
	// testLastOffsetMustIncrease, testLastOffsetCannotDecrease
	txnFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := openTxn(t, fsys, filepath.Join(dir, "a.txnindex"), 0)
		require.NoError(t, x.Append(AbortedTxn{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 13}))
		require.ErrorIs(t, x.Append(AbortedTxn{ProducerID: 0, FirstOffset: 0, LastOffset: 15, LastStableOffset: 11}), ErrInvalidEntry)
		require.ErrorIs(t, x.Append(AbortedTxn{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11}), ErrInvalidEntry)
		require.ErrorIs(t, x.Append(AbortedTxn{ProducerID: 0, FirstOffset: 30, LastOffset: 20, LastStableOffset: 21}), ErrInvalidEntry)
		require.ErrorIs(t, x.Append(AbortedTxn{ProducerID: 0, FirstOffset: -1, LastOffset: 20, LastStableOffset: 21}), ErrInvalidEntry)
		require.Equal(t, 1, x.Entries())
		_, err := OpenTxnIndex(fsys, filepath.Join(dir, "b.txnindex"), -1)
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
}

func TestTxnIndexCollect(t *testing.T) {
	// testCollectAbortedTransactions
	txnFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := openTxn(t, fsys, filepath.Join(dir, "a.txnindex"), 0)
		got, complete, err := x.Collect(0, 100)
		require.NoError(t, err)
		require.Empty(t, got)
		require.False(t, complete)
		appendAll(t, x, kafkaTxns)
		for _, c := range []struct {
			from, to int64
			want     []AbortedTxn
			complete bool
		}{
			{0, 100, kafkaTxns, false},
			{0, 32, kafkaTxns[:3], true},
			{0, 35, kafkaTxns, true},
			{10, 35, kafkaTxns, true},
			{11, 35, kafkaTxns[1:], true},
			{20, 41, kafkaTxns[2:], false},
		} {
			got, complete, err := x.Collect(c.from, c.to)
			require.NoError(t, err)
			require.Equal(t, c.want, got, "[%d, %d)", c.from, c.to)
			require.Equal(t, c.complete, complete, "[%d, %d)", c.from, c.to)
		}
	})
}

func TestTxnIndexTruncate(t *testing.T) {
	// testTruncate
	txns := []AbortedTxn{
		{ProducerID: 0, FirstOffset: 0, LastOffset: 10, LastStableOffset: 2},
		{ProducerID: 1, FirstOffset: 5, LastOffset: 15, LastStableOffset: 16},
		{ProducerID: 2, FirstOffset: 18, LastOffset: 35, LastStableOffset: 25},
		{ProducerID: 3, FirstOffset: 32, LastOffset: 50, LastStableOffset: 40},
	}
	txnFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "a.txnindex")
		x := openTxn(t, fsys, name, 0)
		require.NoError(t, x.TruncateTo(0), "nothing to truncate, no file")
		appendAll(t, x, txns)
		collect := func() []AbortedTxn {
			got, _, err := x.Collect(0, 100)
			require.NoError(t, err)
			return got
		}
		require.NoError(t, x.TruncateTo(51))
		require.Equal(t, txns, collect())
		require.NoError(t, x.TruncateTo(50))
		require.Equal(t, txns[:3], collect())
		require.NoError(t, x.Append(txns[3]), "the last offset went back with the truncation")
		require.NoError(t, x.TruncateTo(11))
		require.Equal(t, txns[:1], collect())
		st, err := fsys.Stat(name)
		require.NoError(t, err)
		require.Equal(t, int64(TxnEntrySize), st.Size())
		require.NoError(t, x.Reset())
		require.Empty(t, collect())
		require.Equal(t, 0, x.Entries())
		require.NoError(t, x.Append(txns[0]))
		// testDeleteIfExists
		require.NoError(t, x.Delete())
		_, err = fsys.Stat(name)
		require.True(t, errors.Is(err, os.ErrNotExist))
		require.NoError(t, x.Delete(), "deleting twice")
	})
}

func TestTxnIndexWriteErrors(t *testing.T) {
	// A failed write changes nothing that reads see; the next append
	// goes where the failed one would have.
	mem := vfs.NewMem()
	var fail bool
	fsys := vfs.WithErrors(mem, func(op vfs.Op, _ string) error {
		if fail && (op == vfs.OpWrite || op == vfs.OpCreate || op == vfs.OpTruncate || op == vfs.OpSync) {
			return vfs.ErrInjected
		}
		return nil
	})
	x := openTxn(t, fsys, "a.txnindex", 0)
	fail = true
	require.ErrorIs(t, x.Append(kafkaTxns[0]), vfs.ErrInjected)
	fail = false
	appendAll(t, x, kafkaTxns[:2])
	fail = true
	require.ErrorIs(t, x.Append(kafkaTxns[2]), vfs.ErrInjected)
	require.ErrorIs(t, x.TruncateTo(0), vfs.ErrInjected)
	require.ErrorIs(t, x.Flush(), vfs.ErrInjected)
	fail = false
	all, err := x.All()
	require.NoError(t, err)
	require.Equal(t, kafkaTxns[:2], all)
	appendAll(t, x, kafkaTxns[2:])
	all, err = x.All()
	require.NoError(t, err)
	require.Equal(t, kafkaTxns, all)
}

// TestTxnIndexCrash appends, flushes and truncates at random and, after
// every operation, crashes a clone of the file system, reopens the index
// there and recovers its tail. When nothing was truncated since the last
// Flush, a clean crash (unsynced writes lost) leaves exactly the flushed
// entries, and a crash with torn writes (part of the unsynced tail reached
// the disk, maybe as garbage) leaves them followed by entries that pass
// SanityCheck. Entries carry no checksum, as in Kafka, so garbage that
// reads as valid entries cannot be told apart: recovery rebuilds the index
// of every segment past the recovery point from the .log. Replay with
// STRATA_SEED=n.
func TestTxnIndexCrash(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 20 {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("p", 0o755))
		name := "p/00000000000000000100.txnindex"
		x, err := OpenTxnIndex(mem, name, 100)
		require.NoError(t, err)
		var cur, durable []AbortedTxn
		truncatedSinceFlush := false
		next := int64(100)
		for range 40 {
			switch r := rng.IntN(10); {
			case r < 6:
				first := next - int64(rng.IntN(30))
				next += 1 + int64(rng.IntN(20))
				a := AbortedTxn{ProducerID: rng.Int64N(1000), FirstOffset: max(first, 0), LastOffset: next, LastStableOffset: next + 1}
				require.NoError(t, x.Append(a))
				cur = append(cur, a)
			case r < 8:
				require.NoError(t, x.Flush())
				durable, truncatedSinceFlush = slices.Clone(cur), false
			default:
				if len(cur) == 0 {
					continue
				}
				i := rng.IntN(len(cur))
				require.NoError(t, x.TruncateTo(cur[i].LastOffset))
				cur = cur[:i]
				next = 100
				if i > 0 {
					next = cur[i-1].LastOffset
				}
				truncatedSinceFlush = true
			}
			for _, torn := range []bool{false, true} {
				crashed := mem.CrashClone()
				if torn {
					crashed = mem.CrashCloneWithTornWrites(rng)
				}
				y, err := OpenTxnIndex(crashed, name, 100)
				require.NoError(t, err)
				_, err = y.RecoverTail()
				require.NoError(t, err)
				require.NoError(t, y.SanityCheck(), "round %d", round)
				got, err := y.All()
				require.NoError(t, err)
				if !truncatedSinceFlush {
					if torn {
						require.GreaterOrEqual(t, len(got), len(durable), "round %d: flushed entries lost", round)
						require.True(t, slices.Equal(durable, got[:len(durable)]), "round %d: %v does not start with %v", round, got, durable)
					} else {
						require.True(t, slices.Equal(durable, got), "round %d: %v, flushed %v", round, got, durable)
					}
				}
				require.NoError(t, y.Close())
			}
		}
		require.NoError(t, x.Close())
	}
}

func FuzzTxnIndex(f *testing.F) {
	var seed []byte
	for _, a := range kafkaTxns {
		seed = a.appendTo(seed)
	}
	f.Add(seed, int64(0), int64(0), int64(100))
	f.Add(seed[:40], int64(100), int64(20), int64(41))
	f.Add([]byte{}, int64(5), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, base, from, to int64) {
		if base < 0 {
			base = -base
			if base < 0 {
				base = 0
			}
		}
		mem := vfs.NewMem()
		file, err := mem.Create("x.txnindex")
		require.NoError(t, err)
		_, err = file.Write(data)
		require.NoError(t, err)
		require.NoError(t, file.Close())
		x, err := OpenTxnIndex(mem, "x.txnindex", base)
		require.NoError(t, err)
		defer x.Close()
		// Whatever the bytes: nothing panics, reads see the whole entries.
		all, err := x.All()
		require.NoError(t, err)
		require.Len(t, all, len(data)/TxnEntrySize)
		got, _, err := x.Collect(from, to)
		require.NoError(t, err)
		for _, a := range got {
			require.True(t, a.LastOffset >= from && a.FirstOffset < to)
		}
		sane := x.SanityCheck() == nil
		dropped, err := x.RecoverTail()
		require.NoError(t, err)
		require.NoError(t, x.SanityCheck(), "after RecoverTail")
		if sane {
			require.Equal(t, 0, dropped)
			after, err := x.All()
			require.NoError(t, err)
			require.Equal(t, all, after)
		}
	})
}

func TestTxnIndexConcurrentReaders(t *testing.T) {
	// Readers see whole entries in order while the writer appends and
	// truncates (go test -race checks the rest).
	x := openTxn(t, vfs.NewMem(), "a.txnindex", 0)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				got, _, err := x.Collect(0, 1<<40)
				if err != nil {
					errs <- err
					return
				}
				for i := 1; i < len(got); i++ {
					if got[i].LastOffset <= got[i-1].LastOffset {
						errs <- errors.New("entries out of order")
						return
					}
				}
			}
		}()
	}
	for i := range int64(300) {
		require.NoError(t, x.Append(AbortedTxn{ProducerID: i, FirstOffset: 10 * i, LastOffset: 10*i + 5, LastStableOffset: 10*i + 6}))
		if i%50 == 49 {
			require.NoError(t, x.TruncateTo(10*i))
		}
	}
	close(done)
	for range 4 {
		require.NoError(t, <-errs)
	}
}

// A large index (a segment with many aborts) is binary-searched: Collect
// reads a few entries to find where the range starts, not the whole file,
// and returns what a whole scan returns.
func TestTxnIndexCollectSeeks(t *testing.T) {
	var reads atomic.Int64
	fsys := vfs.WithErrors(vfs.NewMem(), func(op vfs.Op, _ string) error {
		if op == vfs.OpRead {
			reads.Add(1)
		}
		return nil
	})
	x := openTxn(t, fsys, "a.txnindex", 0)
	const n = 10_000 // each transaction: 10 offsets, its marker at the end
	var txns []AbortedTxn
	for i := range int64(n) {
		// Transactions overlap their neighbours, and the LSO lags behind.
		txns = append(txns, AbortedTxn{ProducerID: i, FirstOffset: max(0, 10*i-15), LastOffset: 10*i + 9, LastStableOffset: max(0, 10*i-15)})
	}
	appendAll(t, x, txns)
	// What Kafka's whole scan of the entries returns.
	scan := func(from, to int64) (want []AbortedTxn, complete bool) {
		for _, a := range txns {
			if a.LastOffset >= from && a.FirstOffset < to {
				want = append(want, a)
			}
			if complete = a.LastStableOffset >= to; complete {
				break
			}
		}
		return want, complete
	}
	for _, r := range [][2]int64{{0, 100}, {5, 6}, {50_000, 50_100}, {99_990, 100_000}, {99_995, 200_000}, {100_000, 100_010}, {-1, 30}} {
		reads.Store(0)
		got, complete, err := x.Collect(r[0], r[1])
		require.NoError(t, err)
		want, wantComplete := scan(r[0], r[1])
		require.Equal(t, want, got, "%v", r)
		require.Equal(t, wantComplete, complete, "%v", r)
		// log2(10,000) probes and a read or two of the range: not the
		// 84 reads of 120 entries a whole scan takes.
		require.LessOrEqual(t, reads.Load(), int64(17), "%v", r)
	}
}
