package log

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// crashAt takes the image a crash leaves of a MemFS just before its n-th
// operation that changes it (counting from 1), and counts them: a crash
// before a read leaves what a crash before the next change does.
type crashAt struct {
	mu    sync.Mutex
	mem   *vfs.MemFS
	n, at int
	image *vfs.MemFS
}

func (c *crashAt) inject(op vfs.Op, _ string) error {
	switch op {
	case vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpRemove, vfs.OpRename, vfs.OpTruncate:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n == c.at && c.image == nil {
		c.image = c.mem.CrashClone()
	}
	return nil
}

// txnCleanerLog appends to p, compacted, a log of transactions of three
// producers (committed, aborted) between plain records, over segments of a
// few batches, and a first cleaning pass, then more of the same: the state
// the crashed pass starts from.
func txnCleanerLog(t *testing.T, b *Broker, p *Partition) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 27))
	seq := map[int64]int32{}
	round := func() {
		for range 40 {
			k := fmt.Sprint("k", rng.IntN(5))
			pid := int64(1 + rng.IntN(3))
			switch rng.IntN(4) {
			case 0:
				_, _, err := p.AppendBatch(txnKeyed(-1, -1, false, k))
				require.NoError(t, err)
			default:
				_, _, err := p.AppendBatch(txnKeyed(pid, seq[pid], true, k))
				require.NoError(t, err)
				seq[pid]++
				if rng.IntN(2) == 0 {
					_, err := p.AppendMarker(markerOf(pid, 0, 0, rng.IntN(2) == 0))
					require.NoError(t, err)
				}
			}
		}
		for pid := range int64(4) {
			_, err := p.AppendMarker(markerOf(pid+1, 0, 0, false)) // ends any open one
			require.NoError(t, err)
		}
		require.NoError(t, p.Roll())
	}
	round()
	_, err := b.cleaner.run(t0)
	require.NoError(t, err)
	round()
	require.NoError(t, p.Flush())
}

// TestCleanerTransactionsCrashAtEveryOp crashes a cleaning pass over a log
// with transactions before each of its filesystem operations in turn, and
// checks that Open completes or discards the swap: no .cleaned or .swap
// file left, a READ_COMMITTED reader's view and the LSO as before the
// pass, every aborted batch left covered by a .txnindex entry, and the
// cleaner able to go on.
func TestCleanerTransactionsCrashAtEveryOp(t *testing.T) {
	cfg := TopicConfig{SegmentBytes: 700, DeleteRetention: time.Minute, MinCleanableDirtyRatio: 0.0001}
	// The count of operations of the pass, without a crash.
	count := func(at int) (ops int, image *vfs.MemFS, view map[string]string, lso int64) {
		mem := vfs.NewMem()
		ca := &crashAt{mem: mem}
		b, p := compacted(t, vfs.WithErrors(mem, ca.inject), cfg, Config{})
		defer b.Close()
		txnCleanerLog(t, b, p)
		view, lso = committedView(t, p), p.LastStableOffset()
		ca.mu.Lock()
		ca.n, ca.at = 0, at
		ca.mu.Unlock()
		passes, err := b.cleaner.run(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, passes)
		ca.mu.Lock()
		defer ca.mu.Unlock()
		ca.at = -1 // not in Close
		return ca.n, ca.image, view, lso
	}
	ops, _, _, _ := count(0)
	require.Greater(t, ops, 20)
	t.Logf("%d operations that change the filesystem", ops)
	for at := 1; at <= ops; at++ {
		_, image, view, lso := count(at)
		require.NotNil(t, image, "op %d", at)
		b, p := compacted(t, image, cfg, Config{})
		names, err := image.ReadDir(p.dir)
		require.NoError(t, err)
		for _, n := range names {
			require.False(t, strings.HasSuffix(n, segment.CleanedSuffix) || strings.HasSuffix(n, segment.SwapSuffix), "op %d: left after open: %s", at, n)
		}
		segs := *p.segs.Load()
		for i := 1; i < len(segs); i++ {
			require.Equal(t, segs[i-1].NextOffset(), segs[i].BaseOffset(), "op %d: segments follow one another", at)
		}
		require.Equal(t, view, committedView(t, p), "op %d", at)
		require.Equal(t, lso, p.LastStableOffset(), "op %d", at)
		checkTxnLayout(t, p)
		b.cleaner.firstDirty[TopicPartition{Topic: "c"}] = 0
		_, err = b.cleaner.run(t0.Add(2 * time.Hour))
		require.NoError(t, err)
		require.Empty(t, b.cleaner.uncleanable, "op %d", at)
		require.Equal(t, view, committedView(t, p), "op %d: after another pass", at)
		checkTxnLayout(t, p)
		require.NoError(t, b.Close())
	}
}
