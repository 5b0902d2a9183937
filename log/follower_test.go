package log

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// openStoreT opens a cluster-style store (the high watermark moves only by
// SetHighWatermark) on fs at /d.
func openStoreT(t *testing.T, fs vfs.FS, cfg StoreConfig) *Store {
	t.Helper()
	cfg.FS = fs
	s, err := OpenStore("/d", cfg)
	require.NoError(t, err)
	return s
}

// allBatches returns the partition's batches from its start to its end.
func allBatches(t *testing.T, p *Partition) []byte {
	t.Helper()
	raw, err := p.ReadBatches(p.StartOffset(), 1<<30, p.EndOffset())
	require.NoError(t, err)
	return raw
}

// appendN appends n batches of k records to p.
func appendN(t *testing.T, p *Partition, n, k int) {
	t.Helper()
	for i := 0; i < n; i++ {
		recs := make([]Record, k)
		for j := range recs {
			recs[j] = Record{Key: []byte("k"), Value: []byte(fmt.Sprintf("v%d-%d", p.EndOffset(), j))}
		}
		_, err := p.Append(recs...)
		require.NoError(t, err)
	}
}

// epochsOf returns the leader epoch of each batch in raw.
func epochsOf(t *testing.T, raw []byte) []int32 {
	t.Helper()
	var out []int32
	require.NoError(t, batch.Batches(raw, func(_ []byte, h batch.Header) error {
		out = append(out, h.PartitionLeaderEpoch)
		return nil
	}))
	return out
}

// TestFollowerCopiesLeader: a leader appends under three epochs; a follower
// copies its batches in chunks with AppendAsFollower and ends with the same
// bytes, the same epoch cache and the same EndOffsetForEpoch answers; its
// high watermark moves only by SetHighWatermark, capped at its end offset.
func TestFollowerCopiesLeader(t *testing.T) {
	leaktest.Check(t)
	ls := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer ls.Close()
	var notified atomic.Int64
	fs := openStoreT(t, vfs.NewMem(), StoreConfig{Notify: func(*Partition) { notified.Add(1) }})
	defer fs.Close()
	leader, err := ls.CreatePartition("t", 3, small)
	require.NoError(t, err)
	follower, err := fs.CreatePartition("t", 3, small)
	require.NoError(t, err)

	require.EqualValues(t, 0, leader.LeaderEpoch())
	appendN(t, leader, 5, 3)
	require.NoError(t, leader.SetLeaderEpoch(3))
	appendN(t, leader, 4, 2)
	require.NoError(t, leader.SetLeaderEpoch(3)) // the same epoch: nothing
	require.NoError(t, leader.SetLeaderEpoch(5))
	appendN(t, leader, 30, 4)
	require.ErrorIs(t, leader.SetLeaderEpoch(4), ErrInvalidEpoch)
	require.ErrorIs(t, leader.SetLeaderEpoch(-1), ErrInvalidEpoch)
	require.Equal(t, []EpochEntry{{0, 0}, {3, 15}, {5, 23}}, leader.EpochEntries())
	require.EqualValues(t, 5, leader.LeaderEpoch())
	// Leader appends carry the epoch they were made under.
	raw := allBatches(t, leader)
	eps := epochsOf(t, raw)
	require.Equal(t, []int32{0, 0, 0, 0, 0, 3, 3, 3, 3}, eps[:9])
	for _, e := range eps[9:] {
		require.EqualValues(t, 5, e)
	}
	require.Greater(t, leader.Segments(), 2)

	// The follower fetches in chunks of whole batches, as from Fetch.
	for off := follower.EndOffset(); off < leader.EndOffset(); off = follower.EndOffset() {
		chunk, err := leader.ReadBatches(off, 700, leader.EndOffset())
		require.NoError(t, err)
		first, next, err := follower.AppendAsFollower(chunk)
		require.NoError(t, err)
		require.Equal(t, off, first)
		require.Greater(t, next, first)
	}
	require.Equal(t, raw, allBatches(t, follower))
	require.Equal(t, leader.EpochEntries(), follower.EpochEntries())
	for e := int32(-1); e <= 6; e++ {
		le, lo := leader.EndOffsetForEpoch(e)
		fe, fo := follower.EndOffsetForEpoch(e)
		require.Equal(t, le, fe, "epoch %d", e)
		require.Equal(t, lo, fo, "epoch %d", e)
	}
	ep, end := follower.EndOffsetForEpoch(3)
	require.EqualValues(t, 3, ep)
	require.EqualValues(t, 23, end)
	ep, end = follower.EndOffsetForEpoch(4)
	require.EqualValues(t, 3, ep)
	require.EqualValues(t, 23, end)
	ep, end = follower.EndOffsetForEpoch(5)
	require.EqualValues(t, 5, ep)
	require.Equal(t, follower.EndOffset(), end)

	// The high watermark: not moved by appends; forward only; capped.
	require.Zero(t, follower.HighWatermark())
	recs, err := follower.Read(0, 1<<20)
	require.NoError(t, err)
	require.Empty(t, recs, "nothing is committed yet")
	before := notified.Load()
	hw, err := follower.SetHighWatermark(10)
	require.NoError(t, err)
	require.EqualValues(t, 10, hw)
	require.Greater(t, notified.Load(), before, "a high watermark move notifies")
	recs, err = follower.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 10)
	before = notified.Load()
	hw, err = follower.SetHighWatermark(4)
	require.NoError(t, err)
	require.EqualValues(t, 10, hw, "only a truncation moves it back")
	require.Equal(t, before, notified.Load())
	hw, err = follower.SetHighWatermark(1 << 40)
	require.NoError(t, err)
	require.Equal(t, follower.EndOffset(), hw)
	_, err = follower.SetHighWatermark(-1)
	require.ErrorIs(t, err, ErrInvalidOffset)
	require.Equal(t, follower.EndOffset(), follower.HighWatermark())
}

// TestAppendAsFollowerRefusesBadInput: every refusal is a sentinel error
// and changes nothing.
func TestAppendAsFollowerRefusesBadInput(t *testing.T) {
	leaktest.Check(t)
	ls := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer ls.Close()
	fs := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer fs.Close()
	leader, err := ls.CreatePartition("t", 0, small)
	require.NoError(t, err)
	follower, err := fs.CreatePartition("t", 0, small)
	require.NoError(t, err)
	require.NoError(t, leader.SetLeaderEpoch(2))
	appendN(t, leader, 6, 2)
	raw := allBatches(t, leader)
	var bs [][]byte
	require.NoError(t, batch.Batches(raw, func(b []byte, _ batch.Header) error {
		bs = append(bs, bytes.Clone(b))
		return nil
	}))
	_, _, err = follower.AppendAsFollower(bytes.Join(bs[:2], nil))
	require.NoError(t, err)
	state := func() string {
		return fmt.Sprintf("end %d hw %d epochs %v bytes %x", follower.EndOffset(), follower.HighWatermark(), follower.EpochEntries(), allBatches(t, follower))
	}
	want := state()

	corrupt := bytes.Clone(bs[2])
	corrupt[len(corrupt)-1] ^= 1
	lowerEpoch := bytes.Clone(bs[2])
	batch.SetPartitionLeaderEpoch(lowerEpoch, 1) // outside the CRC
	backwards := bytes.Clone(bs[3])
	batch.SetPartitionLeaderEpoch(backwards, 1)
	h2, err := batch.ParseHeader(bs[2])
	require.NoError(t, err)
	lz, err := batch.Recompress(nil, bs[2], h2, batch.CompressionLz4)
	require.NoError(t, err)
	lzCorrupt := bytes.Clone(lz)
	lzCorrupt[len(lzCorrupt)-1] ^= 1 // in the lz4 frame, under the CRC
	big := TopicConfig{MaxMessageBytes: 40}
	for _, tc := range []struct {
		name string
		raw  []byte
		err  error
	}{
		{"does not start at the end offset", bs[3], ErrUnexpectedOffset},
		{"an old batch again", bs[1], ErrUnexpectedOffset},
		{"a gap between batches", bytes.Join([][]byte{bs[2], bs[4]}, nil), ErrUnexpectedOffset},
		{"corrupt", corrupt, ErrCorrupt},
		{"a good batch then a corrupt one", bytes.Join([][]byte{bs[2], corrupt}, nil), ErrCorrupt},
		{"compressed, corrupt", lzCorrupt, ErrCorrupt},
		{"torn", bs[2][:len(bs[2])-3], batch.ErrShort},
		{"garbage after a batch", append(bytes.Clone(bs[2]), 1, 2, 3), batch.ErrShort},
		{"an epoch below the log's", lowerEpoch, ErrInvalidEpoch},
		{"epochs going backwards within the call", bytes.Join([][]byte{bs[2], backwards}, nil), ErrInvalidEpoch},
		{"too large", bs[2], ErrRecordTooLarge},
	} {
		p := follower
		if tc.err == ErrRecordTooLarge {
			was := p.config().MaxMessageBytes
			p.editConfig(func(c *TopicConfig) { c.MaxMessageBytes = big.MaxMessageBytes })
			big.MaxMessageBytes = was
		}
		_, _, err := p.AppendAsFollower(tc.raw)
		if tc.err == ErrRecordTooLarge {
			p.editConfig(func(c *TopicConfig) { c.MaxMessageBytes = big.MaxMessageBytes })
		}
		require.ErrorIs(t, err, tc.err, tc.name)
		require.Equal(t, want, state(), tc.name)
	}
	// Nothing to append: nothing happens.
	first, next, err := follower.AppendAsFollower(nil)
	require.NoError(t, err)
	require.Equal(t, follower.EndOffset(), first)
	require.Equal(t, first, next)
	// The good batches still go in.
	_, _, err = follower.AppendAsFollower(bytes.Join(bs[2:], nil))
	require.NoError(t, err)
	require.Equal(t, raw, allBatches(t, follower))
}

// TestAppendAsFollowerReplacesEmptyEpochs: an epoch this replica led
// without appending anything is dropped when the new leader's batches come
// with a lower epoch (Kafka keeps such an entry only until it is truncated).
func TestAppendAsFollowerReplacesEmptyEpochs(t *testing.T) {
	ls := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer ls.Close()
	fs := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer fs.Close()
	leader, err := ls.CreatePartition("t", 0, small)
	require.NoError(t, err)
	follower, err := fs.CreatePartition("t", 0, small)
	require.NoError(t, err)
	require.NoError(t, leader.SetLeaderEpoch(1))
	appendN(t, leader, 3, 1)
	_, _, err = follower.AppendAsFollower(allBatches(t, leader))
	require.NoError(t, err)
	// The follower was briefly leader at epoch 4, and appended nothing.
	require.NoError(t, follower.SetLeaderEpoch(4))
	require.Equal(t, []EpochEntry{{1, 0}, {4, 3}}, follower.EpochEntries())
	// The old leader (epoch 1) goes on: the follower accepts its batches.
	appendN(t, leader, 2, 1)
	raw, err := leader.ReadBatches(3, 1<<20, leader.EndOffset())
	require.NoError(t, err)
	_, _, err = follower.AppendAsFollower(raw)
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{1, 0}}, follower.EpochEntries())
	require.Equal(t, allBatches(t, leader), allBatches(t, follower))
}

// TestTruncateTo: a truncation inside a batch cuts at its start, removes
// the later segments' files, moves the high watermark back and truncates
// the epoch cache; appends continue at the new end.
func TestTruncateTo(t *testing.T) {
	leaktest.Check(t)
	mem := vfs.NewMem()
	var notified atomic.Int64
	s := openStoreT(t, mem, StoreConfig{Notify: func(*Partition) { notified.Add(1) }})
	defer s.Close()
	p, err := s.CreatePartition("t", 0, small)
	require.NoError(t, err)
	appendN(t, p, 20, 3) // offsets 0..59, epoch 0
	require.NoError(t, p.SetLeaderEpoch(2))
	appendN(t, p, 20, 3) // 60..119, epoch 2
	require.NoError(t, p.SetLeaderEpoch(3))
	appendN(t, p, 20, 3) // 120..179, epoch 3
	_, err = p.SetHighWatermark(150)
	require.NoError(t, err)
	raw := allBatches(t, p)
	segsBefore := p.Segments()
	require.Greater(t, segsBefore, 2)

	before := notified.Load()
	require.NoError(t, p.TruncateTo(100)) // inside the batch 99..101
	require.EqualValues(t, 99, p.EndOffset())
	require.EqualValues(t, 99, p.HighWatermark())
	require.Greater(t, notified.Load(), before)
	require.Less(t, p.Segments(), segsBefore)
	require.Equal(t, []EpochEntry{{0, 0}, {2, 60}}, p.EpochEntries())
	ep, end := p.EndOffsetForEpoch(2)
	require.EqualValues(t, 2, ep)
	require.EqualValues(t, 99, end)
	got := allBatches(t, p)
	require.Equal(t, raw[:len(got)], got)
	// Only the kept segments' files are left.
	names, err := mem.ReadDir("/d/t-0")
	require.NoError(t, err)
	logs := 0
	for _, n := range names {
		if filepath.Ext(n) == ".log" {
			logs++
		}
	}
	require.Equal(t, p.Segments(), logs)
	// The leader epoch stays (a follower's truncation does not change who
	// leads); appends continue at 99.
	off, err := p.Append(Record{Value: []byte("after")})
	require.NoError(t, err)
	require.EqualValues(t, 99, off)
	require.Equal(t, []EpochEntry{{0, 0}, {2, 60}, {3, 99}}, p.EpochEntries())

	// At or past the end: no record goes, but an epoch with no record does.
	require.NoError(t, p.SetLeaderEpoch(7))
	require.Equal(t, EpochEntry{7, 100}, p.EpochEntries()[3])
	require.NoError(t, p.TruncateTo(1000))
	require.EqualValues(t, 100, p.EndOffset())
	require.Equal(t, []EpochEntry{{0, 0}, {2, 60}, {3, 99}}, p.EpochEntries())

	// Negative: refused, nothing changes.
	require.ErrorIs(t, p.TruncateTo(-1), ErrInvalidOffset)
	require.ErrorIs(t, p.TruncateFullyAndStartAt(-5), ErrInvalidOffset)
	require.EqualValues(t, 100, p.EndOffset())

	// Truncate fully and start at a new offset.
	require.NoError(t, p.TruncateFullyAndStartAt(5000))
	require.EqualValues(t, 5000, p.StartOffset())
	require.EqualValues(t, 5000, p.EndOffset())
	require.EqualValues(t, 5000, p.HighWatermark())
	require.Empty(t, p.EpochEntries())
	require.Equal(t, 1, p.Segments())
	_, err = p.Read(4999, 100)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	off, err = p.Append(Record{Value: []byte("new")})
	require.NoError(t, err)
	require.EqualValues(t, 5000, off)
	require.Equal(t, []EpochEntry{{7, 5000}}, p.EpochEntries())

	// Truncating below the first segment is a full truncation.
	require.NoError(t, p.TruncateTo(10))
	require.EqualValues(t, 10, p.StartOffset())
	require.EqualValues(t, 10, p.EndOffset())
	require.Empty(t, p.EpochEntries())
}

// TestStandaloneStampsAndFollowsEnd: on a standalone broker the high
// watermark is the end offset and batches carry epoch 0.
func TestStandaloneStampsAndFollowsEnd(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", small)
	appendN(t, p, 3, 2)
	require.EqualValues(t, 6, p.HighWatermark())
	require.Equal(t, []int32{0, 0, 0}, epochsOf(t, allBatches(t, p)))
	require.Equal(t, []EpochEntry{{0, 0}}, p.EpochEntries())
}

// TestRetentionStopsAtHighWatermark: retention deletes only segments below
// the high watermark (Kafka's rule), and the epoch cache loses the epochs
// below the new log start offset.
func TestRetentionStopsAtHighWatermark(t *testing.T) {
	s := openStoreT(t, vfs.NewMem(), StoreConfig{})
	defer s.Close()
	cfg := small
	cfg.RetentionBytes = 1
	p, err := s.CreatePartition("t", 0, cfg)
	require.NoError(t, err)
	appendN(t, p, 20, 3)
	require.NoError(t, p.SetLeaderEpoch(1))
	appendN(t, p, 20, 3)
	require.NoError(t, p.SetLeaderEpoch(2))
	appendN(t, p, 20, 3)
	segs := p.Segments()
	require.Greater(t, segs, 3)
	n, err := p.enforceRetention(time.Now())
	require.NoError(t, err)
	require.Zero(t, n, "nothing is below the high watermark")
	_, err = p.SetHighWatermark(100)
	require.NoError(t, err)
	n, err = p.enforceRetention(time.Now())
	require.NoError(t, err)
	require.Positive(t, n)
	start := p.StartOffset()
	require.LessOrEqual(t, start, int64(100))
	require.Positive(t, start)
	want := []EpochEntry{{0, start}, {1, 60}, {2, 120}}
	if start >= 60 {
		want = []EpochEntry{{1, start}, {2, 120}}
	}
	require.Equal(t, want, p.EpochEntries())
	_, err = p.SetHighWatermark(p.EndOffset())
	require.NoError(t, err)
	_, err = p.enforceRetention(time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, p.Segments())
	require.Equal(t, []EpochEntry{{2, p.StartOffset()}}, p.EpochEntries())
}

// TestFlushDuringTruncation: a truncation in the middle of a flush (here
// at the flush's first fsync) neither lets the flush move the recovery
// point past the new end offset nor makes it wait for offsets the
// truncation removed.
func TestFlushDuringTruncation(t *testing.T) {
	leaktest.Check(t)
	mem := vfs.NewMem()
	efs, hook := injectable(mem)
	s := openStoreT(t, efs, StoreConfig{})
	defer s.Close()
	p, err := s.CreatePartition("t", 0, small)
	require.NoError(t, err)
	appendN(t, p, 4, 2)
	require.NoError(t, p.Flush())
	// Only this test's flush: held before the appends, whose rolls wake
	// the background loop to fsync the sealed segments, which would leave
	// the flush below nothing to sync and the hook never called.
	s.roundMu.Lock()
	appendN(t, p, 30, 2) // 8..67, not flushed
	truncated := make(chan error, 1)
	hook.set(func(op vfs.Op, path string) error {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			hook.f = nil // the truncation's own operations go through
			go func() { truncated <- p.TruncateTo(20) }()
			// The truncation waits for nothing the flush holds; let it
			// finish before the flush goes on.
			hook.mu.Unlock()
			err := <-truncated
			hook.mu.Lock()
			truncated <- err
		}
		return nil
	})
	require.NoError(t, p.Flush())
	hook.set(nil)
	s.roundMu.Unlock()
	select {
	case err := <-truncated: // put back by the hook before the flush went on
		require.NoError(t, err)
	default:
		t.Fatal("the flush synced nothing: the truncation never ran in it")
	}
	require.EqualValues(t, 20, p.EndOffset())
	require.LessOrEqual(t, p.RecoveryPoint(), p.EndOffset())
	require.NoError(t, p.Flush())
	require.EqualValues(t, 20, p.RecoveryPoint())
}
