package log

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

func newFileAllocator(t *testing.T, fs vfs.FS, blockSize int) *ProducerIDAllocator {
	t.Helper()
	src, err := OpenProducerIDBlocks(fs, "/data", blockSize)
	require.NoError(t, err)
	return NewProducerIDAllocator(src)
}

func TestProducerIDAllocatorBlocks(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/data", 0o755))
	var renames int
	fs := vfs.WithErrors(mem, func(op vfs.Op, path string) error {
		if op == vfs.OpRename {
			renames++
		}
		return nil
	})
	ctx := context.Background()
	a := newFileAllocator(t, fs, 0) // Kafka's 1000
	for want := range int64(2500) {
		id, epoch, err := a.InitProducerID(ctx)
		require.NoError(t, err)
		require.Equal(t, want, id)
		require.Equal(t, int16(0), epoch)
	}
	require.Equal(t, 3, renames, "one durable write per block of 1000")
	data, err := vfs.ReadFile(mem, "/data/producer-id-block")
	require.NoError(t, err)
	require.JSONEq(t, `{"version":1,"broker":0,"block_start":"2000","block_end":"2999"}`, string(data))

	// A restart starts after the last block reserved: 2500-2999 are lost.
	a = newFileAllocator(t, mem, 0)
	id, _, err := a.InitProducerID(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3000), id)
}

// TestProducerIDAllocatorCrash crashes the machine at every file-system
// operation of a run of allocations in turn, with torn unsynced writes, and
// allocates on after the restart: no id is ever given twice.
func TestProducerIDAllocatorCrash(t *testing.T) {
	ctx := context.Background()
	for crashAt := 1; crashAt < 60; crashAt++ {
		rng := rand.New(rand.NewPCG(uint64(crashAt), 1))
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/data", 0o755))
		given := map[int64]bool{}
		give := func(id int64) {
			require.False(t, given[id], "crash at op %d: id %d given twice", crashAt, id)
			given[id] = true
		}
		// Run 1: ops are counted; at op crashAt the machine crashes (the
		// state then durable is kept) and every later op fails.
		var ops int
		var after *vfs.MemFS
		fs := vfs.WithErrors(mem, func(vfs.Op, string) error {
			ops++
			if ops == crashAt {
				after = mem.CrashCloneWithTornWrites(rng)
			}
			if ops >= crashAt {
				return vfs.ErrInjected
			}
			return nil
		})
		src, err := OpenProducerIDBlocks(fs, "/data", 3)
		if err == nil {
			a := NewProducerIDAllocator(src)
			for range 40 {
				id, _, err := a.InitProducerID(ctx)
				if err != nil {
					require.ErrorIs(t, err, vfs.ErrInjected)
					break
				}
				give(id)
			}
		}
		if after == nil {
			after = mem.CrashCloneWithTornWrites(rng)
		}
		// Run 2, on what the crash left.
		a := newFileAllocator(t, after, 3)
		for range 10 {
			id, _, err := a.InitProducerID(ctx)
			require.NoError(t, err)
			give(id)
		}
	}
}

func TestProducerIDAllocatorWriteError(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/data", 0o755))
	fail := map[vfs.Op]bool{}
	fs := vfs.WithErrors(mem, func(op vfs.Op, path string) error {
		if fail[op] {
			return vfs.ErrInjected
		}
		return nil
	})
	ctx := context.Background()
	a := newFileAllocator(t, fs, 2)
	given := map[int64]bool{}
	next := func() error {
		id, _, err := a.InitProducerID(ctx)
		if err == nil {
			require.False(t, given[id], "id %d given twice", id)
			given[id] = true
		}
		return err
	}
	require.NoError(t, next())
	require.NoError(t, next())
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir} {
		fail[op] = true
		require.ErrorIs(t, next(), vfs.ErrInjected, "%v fails", op)
		fail[op] = false
		require.NoError(t, next())
		require.NoError(t, next())
		// After a failed reservation that may have reached the disk, a
		// restart never gives an id given by the retry.
		b := newFileAllocator(t, mem.CrashClone(), 2)
		id, _, err := b.InitProducerID(ctx)
		require.NoError(t, err)
		require.False(t, given[id], "after a restart: id %d given twice", id)
	}
	require.Len(t, given, 10)
}

func TestProducerIDAllocatorConcurrent(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/data", 0o755))
	a := newFileAllocator(t, mem, 7)
	const workers, each = 4, 50
	ids := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				id, _, err := a.InitProducerID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, l := range ids {
		for _, id := range l {
			require.False(t, seen[id], "id %d given twice", id)
			seen[id] = true
		}
	}
	require.Len(t, seen, workers*each)
}

// blockList is a ProducerIDBlockSource handing out given blocks, as a
// cluster's controller would.
type blockList struct {
	blocks []ProducerIDBlock
	err    error
}

func (l *blockList) NextProducerIDBlock(ctx context.Context) (ProducerIDBlock, error) {
	if len(l.blocks) == 0 {
		return ProducerIDBlock{}, l.err
	}
	b := l.blocks[0]
	l.blocks = l.blocks[1:]
	return b, nil
}

func TestProducerIDAllocatorSource(t *testing.T) {
	ctx := context.Background()
	errNoController := errors.New("no controller")
	src := &blockList{
		blocks: []ProducerIDBlock{{Start: 5000, Len: 2}, {Start: math.MaxInt64 - 1, Len: 2}, {Start: -3, Len: 5}},
		err:    errNoController,
	}
	a := NewProducerIDAllocator(src)
	var got []int64
	for range 4 {
		id, _, err := a.InitProducerID(ctx)
		require.NoError(t, err)
		got = append(got, id)
	}
	require.Equal(t, []int64{5000, 5001, math.MaxInt64 - 1, math.MaxInt64}, got)
	id, _, err := a.InitProducerID(ctx)
	require.Error(t, err, "an invalid block")
	require.Equal(t, NoProducerID, id)
	_, _, err = a.InitProducerID(ctx)
	require.ErrorIs(t, err, errNoController)
}

func TestProducerIDBlocksFile(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		content string
		want    int64 // first id; -1: exhausted
		err     error
	}{
		{"absent", "", 0, nil},
		{"kafka's zk node", `{"version":1,"broker":3,"block_start":"4000","block_end":"4999"}`, 5000, nil},
		{"near the end", `{"version":1,"broker":0,"block_start":"0","block_end":"9223372036854775000"}`, -1, nil},
		{"at the end", `{"version":1,"broker":0,"block_start":"0","block_end":"9223372036854775807"}`, -1, nil},
		{"torn", `{"version":1,"broker":0,"block_st`, 0, ErrCorrupt},
		{"version 2", `{"version":2,"broker":0,"block_start":"0","block_end":"999"}`, 0, ErrCorrupt},
		{"end before start", `{"version":1,"broker":0,"block_start":"10","block_end":"9"}`, 0, ErrCorrupt},
		{"not a number", `{"version":1,"broker":0,"block_start":"x","block_end":"9"}`, 0, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			require.NoError(t, fs.MkdirAll("/data", 0o755))
			if c.content != "" {
				require.NoError(t, vfs.WriteFileAtomic(fs, filepath.Join("/data", "producer-id-block"), []byte(c.content)))
			}
			src, err := OpenProducerIDBlocks(fs, "/data", 1000)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				return
			}
			require.NoError(t, err)
			b, err := src.NextProducerIDBlock(ctx)
			if c.want < 0 {
				require.ErrorIs(t, err, ErrProducerIDsExhausted)
				return
			}
			require.NoError(t, err)
			require.Equal(t, ProducerIDBlock{Start: c.want, Len: 1000}, b)
		})
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	src, err := OpenProducerIDBlocks(vfs.NewMem(), "/", 0)
	require.NoError(t, err)
	_, err = src.NextProducerIDBlock(ctxDone)
	require.ErrorIs(t, err, context.Canceled)
}
