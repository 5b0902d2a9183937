package log

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestStorePartitions: partitions need not be dense; the store deletes no
// directory it was not asked to; CreatePartition refuses what exists;
// RemovePartition removes open and unopened ones.
func TestStorePartitions(t *testing.T) {
	leaktest.Check(t)
	mem := vfs.NewMem()
	s := openStoreT(t, mem, StoreConfig{})
	p3, err := s.CreatePartition("a", 3, small)
	require.NoError(t, err)
	_, err = s.CreatePartition("a", 7, small)
	require.NoError(t, err)
	_, err = s.CreatePartition("b", 0, small)
	require.NoError(t, err)
	appendN(t, p3, 4, 2)
	_, err = s.CreatePartition("a", 3, small)
	require.ErrorIs(t, err, ErrPartitionExists)
	for _, bad := range []struct {
		topic string
		id    int
		cfg   TopicConfig
		err   error
	}{
		{"", 0, small, ErrInvalidTopic},
		{"../x", 0, small, ErrInvalidTopic},
		{"a", -1, small, ErrUnknownPartition},
		{"a", 9, TopicConfig{SegmentBytes: -1}, ErrInvalidConfig},
	} {
		_, err := s.CreatePartition(bad.topic, bad.id, bad.cfg)
		require.ErrorIs(t, err, bad.err)
		_, err = s.OpenPartition(bad.topic, bad.id, bad.cfg)
		require.ErrorIs(t, err, bad.err)
	}
	require.Len(t, s.Partitions(), 3)
	require.NoError(t, s.Close())

	// Reopen: nothing is open until asked, nothing is deleted.
	s = openStoreT(t, mem, StoreConfig{})
	require.Empty(t, s.Partitions())
	dirs, err := s.PartitionDirs()
	require.NoError(t, err)
	require.Equal(t, []TopicPartition{{Topic: "a", Partition: 3}, {Topic: "a", Partition: 7}, {Topic: "b", Partition: 0}}, dirs)
	// A directory that exists cannot be created over.
	_, err = s.CreatePartition("a", 7, small)
	require.ErrorIs(t, err, ErrPartitionExists)
	p3, err = s.OpenPartition("a", 3, small)
	require.NoError(t, err)
	require.EqualValues(t, 8, p3.EndOffset())
	again, err := s.OpenPartition("a", 3, small)
	require.NoError(t, err)
	require.Same(t, p3, again)
	_, ok := s.Partition("a", 7)
	require.False(t, ok)
	// Removing: an unopened one, an open one, one that does not exist.
	require.NoError(t, s.RemovePartition("a", 7))
	require.NoError(t, s.RemovePartition("a", 3))
	_, err = p3.Append(Record{Value: []byte("x")})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.RemovePartition("a", 5), ErrUnknownPartition)
	dirs, err = s.PartitionDirs()
	require.NoError(t, err)
	require.Equal(t, []TopicPartition{{Topic: "b", Partition: 0}}, dirs)
	// A removed partition can be created again, empty.
	p3, err = s.CreatePartition("a", 3, small)
	require.NoError(t, err)
	require.Zero(t, p3.EndOffset())
	require.NoError(t, s.Close())
	_, err = s.CreatePartition("a", 4, small)
	require.ErrorIs(t, err, ErrClosed)
}

// TestStoreKeepsCheckpointsOfUnopenedPartitions: a partition not opened in
// one life of the store keeps its recovery point, start offset and high
// watermark for the next.
func TestStoreKeepsCheckpointsOfUnopenedPartitions(t *testing.T) {
	mem := vfs.NewMem()
	s := openStoreT(t, mem, StoreConfig{})
	p, err := s.CreatePartition("a", 1, small)
	require.NoError(t, err)
	appendN(t, p, 50, 2)
	_, err = p.SetHighWatermark(42)
	require.NoError(t, err)
	_, err = s.CreatePartition("b", 0, small)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// A life that opens only b, and checkpoints.
	s = openStoreT(t, mem, StoreConfig{})
	_, err = s.OpenPartition("b", 0, small)
	require.NoError(t, err)
	require.NoError(t, s.WriteCheckpoints())
	require.NoError(t, s.Close())

	s = openStoreT(t, mem, StoreConfig{})
	defer s.Close()
	p, err = s.OpenPartition("a", 1, small)
	require.NoError(t, err)
	require.EqualValues(t, 42, p.HighWatermark())
	require.EqualValues(t, 100, p.RecoveryPoint())
}

// TestRemovePartitionCrash: a crash at any operation of RemovePartition
// leaves the partition either whole or gone after the next open, never
// part of it.
func TestRemovePartitionCrash(t *testing.T) {
	for n := 0; ; n++ {
		mem := vfs.NewMem()
		s := openStoreT(t, mem, StoreConfig{})
		p, err := s.CreatePartition("a", 0, small)
		require.NoError(t, err)
		appendN(t, p, 60, 2)
		require.NoError(t, p.Flush())
		require.Greater(t, p.Segments(), 1)
		end := p.EndOffset()
		require.NoError(t, s.Close())

		var crashed *vfs.MemFS
		efs, hook := injectable(mem)
		s = openStoreT(t, efs, StoreConfig{})
		hook.set(crashAtOp(mem, n, &crashed, nil))
		err = s.RemovePartition("a", 0)
		hook.set(nil)
		require.NoError(t, s.Close())
		if crashed == nil {
			require.NoError(t, err)
			require.Positive(t, n)
			return
		}
		s = openStoreT(t, crashed, StoreConfig{})
		dirs, err := s.PartitionDirs()
		require.NoError(t, err)
		if len(dirs) == 1 {
			p, err := s.OpenPartition("a", 0, small)
			require.NoError(t, err)
			require.Equal(t, end, p.EndOffset(), "crash at operation %d: the partition is whole", n)
			_, err = p.Read(0, 1<<20)
			require.NoError(t, err)
		} else {
			require.Empty(t, dirs, "crash at operation %d", n)
		}
		names, err := crashed.ReadDir("/d")
		require.NoError(t, err)
		for _, name := range names {
			require.NotContains(t, name, deletedSuffix, "crash at operation %d: finished at open", n)
		}
		require.NoError(t, s.Close())
	}
}

// faultHook turns failures of an injectable file system on and off while a
// store (and its background loop) runs on it.
type faultHook struct {
	mu sync.Mutex
	f  func(op vfs.Op, path string) error
}

func (h *faultHook) set(f func(op vfs.Op, path string) error) {
	h.mu.Lock()
	h.f = f
	h.mu.Unlock()
}

// injectable wraps fs so that h decides the fate of every operation.
func injectable(fs vfs.FS) (vfs.FS, *faultHook) {
	h := new(faultHook)
	return vfs.WithErrors(fs, func(op vfs.Op, path string) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.f == nil {
			return nil
		}
		return h.f(op, path)
	}), h
}

// crashAtOp returns an injector that, at the n-th operation, takes what a
// crash would leave of mem into *crashed and fails that operation and
// every later one.
func crashAtOp(mem *vfs.MemFS, n int, crashed **vfs.MemFS, torn *rand.Rand) func(vfs.Op, string) error {
	ops := 0
	return func(vfs.Op, string) error {
		if *crashed == nil && ops == n {
			if torn != nil {
				*crashed = mem.CrashCloneWithTornWrites(torn)
			} else {
				*crashed = mem.CrashClone()
			}
		}
		ops++
		if *crashed != nil {
			return vfs.ErrInjected
		}
		return nil
	}
}

// TestUnopenedPartitionsStayUnrecovered: after an unclean shutdown, a store
// that opens only some partitions does not mark the data dir clean, so the
// next open still recovers the others.
func TestUnopenedPartitionsStayUnrecovered(t *testing.T) {
	mem := vfs.NewMem()
	s := openStoreT(t, mem, StoreConfig{})
	for _, topic := range []string{"a", "b"} {
		p, err := s.CreatePartition(topic, 0, small)
		require.NoError(t, err)
		appendN(t, p, 5, 2)
		require.NoError(t, p.Flush())
	}
	crashed := mem.CrashClone()
	require.NoError(t, s.Close())

	s = openStoreT(t, crashed, StoreConfig{})
	_, err := s.OpenPartition("a", 0, small)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = crashed.Stat("/d/" + cleanShutdown)
	require.True(t, isNotExist(err), "b was never recovered: not clean")

	s = openStoreT(t, crashed, StoreConfig{})
	_, err = s.OpenPartition("a", 0, small)
	require.NoError(t, err)
	_, err = s.OpenPartition("b", 0, small)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = crashed.Stat("/d/" + cleanShutdown)
	require.NoError(t, err, "every partition recovered: clean")
}

// TestReadsBelowHighWatermarkDuringReplication: readers bounded by the high
// watermark keep reading while a follower appends, moves its high
// watermark and truncates above it.
func TestReadsBelowHighWatermarkDuringReplication(t *testing.T) {
	leaktest.Check(t)
	ls := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer ls.Close()
	fs := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer fs.Close()
	leader, err := ls.CreatePartition("t", 0, small)
	require.NoError(t, err)
	follower, err := fs.CreatePartition("t", 0, small)
	require.NoError(t, err)
	appendN(t, leader, 200, 2)
	_, err = leader.SetHighWatermark(leader.EndOffset())
	require.NoError(t, err)
	want, err := leader.Read(0, 1<<30)
	require.NoError(t, err)
	require.Len(t, want, 400)

	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				hw := follower.HighWatermark()
				from := hw / 2
				recs, err := follower.Read(from, 2000)
				if err != nil {
					t.Errorf("read at %d below hw %d: %v", from, hw, err)
					return
				}
				for i, r := range recs {
					if r.Offset != from+int64(i) || !bytes.Equal(r.Value, want[r.Offset].Value) {
						t.Errorf("offset %d: wrong record", r.Offset)
						return
					}
				}
			}
		}()
	}
	for off := int64(0); off < leader.EndOffset(); off = follower.EndOffset() {
		raw, err := leader.ReadBatches(off, 500, leader.EndOffset())
		require.NoError(t, err)
		_, next, err := follower.AppendAsFollower(raw)
		require.NoError(t, err)
		// Commit half of what was appended; cut (and re-fetch) some of the
		// uncommitted rest now and then.
		hw, err := follower.SetHighWatermark(off + (next-off)/2)
		require.NoError(t, err)
		if next%3 == 0 && next > hw {
			require.NoError(t, follower.TruncateTo(hw))
		}
	}
	_, err = follower.SetHighWatermark(follower.EndOffset())
	require.NoError(t, err)
	close(done)
	wg.Wait()
	require.Equal(t, allBatches(t, leader), allBatches(t, follower))
}
