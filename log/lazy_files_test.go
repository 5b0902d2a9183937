package log

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// peakFS counts the files open through it.
type peakFS struct {
	vfs.FS
	open atomic.Int64
	peak atomic.Int64
}

type peakFile struct {
	vfs.File
	fs   *peakFS
	once sync.Once
}

func (f *peakFile) Close() error {
	f.once.Do(func() { f.fs.open.Add(-1) })
	return f.File.Close()
}

// peakFdFile keeps the descriptor of an OS file visible (mmap, sendfile).
type peakFdFile struct{ *peakFile }

func (f peakFdFile) Fd() uintptr { return f.File.(vfs.Fder).Fd() }

func (c *peakFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	if n := c.open.Add(1); n > c.peak.Load() {
		c.peak.Store(n) // opens run under locks or one at a time here
	}
	cf := &peakFile{File: f, fs: c}
	if _, ok := f.(vfs.Fder); ok {
		return peakFdFile{cf}, nil
	}
	return cf, nil
}

func (c *peakFS) Create(name string) (vfs.File, error)     { return c.wrap(c.FS.Create(name)) }
func (c *peakFS) Open(name string) (vfs.File, error)       { return c.wrap(c.FS.Open(name)) }
func (c *peakFS) OpenReadWrite(n string) (vfs.File, error) { return c.wrap(c.FS.OpenReadWrite(n)) }

// tinySegments makes every batch of one small record a segment of its own:
// what segment.bytes=100 does.
var tinySegments = TopicConfig{SegmentBytes: 100, IndexIntervalBytes: 14, MaxIndexBytes: 1024}

// appendOneByOne appends n records, one a batch, whose values name their
// offsets, and calls check every 100.
func appendOneByOne(t *testing.T, p *Partition, n int, check func()) {
	t.Helper()
	for range n {
		off := p.EndOffset()
		got, err := p.Append(Record{Value: []byte(fmt.Sprintf("v%d", off))})
		require.NoError(t, err)
		require.Equal(t, off, got)
		if got%100 == 0 {
			check()
		}
	}
}

// checkRecords reads the partition from offset 0, a little at a time, and
// checks every record, then reads some offsets at random.
func checkRecords(t *testing.T, p *Partition, rng *rand.Rand) {
	t.Helper()
	for off := int64(0); off < p.EndOffset(); {
		recs, err := p.Read(off, 400)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		for _, r := range recs {
			require.Equal(t, off, r.Offset)
			require.Equal(t, fmt.Sprintf("v%d", off), string(r.Value))
			off++
		}
	}
	for range 200 {
		off := rng.Int64N(p.EndOffset())
		recs, err := p.Read(off, 1)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("v%d", off), string(recs[0].Value))
	}
}

// TestManyTinySegmentsBoundedFiles: 3,000 one-record segments (Kafka's
// segment.bytes at a tiny size) hold the files of at most MaxOpenSegments
// sealed segments open, as they are written, read from end to end and at
// random, after a clean reopen (which opens none of their indexes) and
// after a crash (which recovers from the recovery point).
func TestManyTinySegmentsBoundedFiles(t *testing.T) {
	const n, bound = 3000, 8
	// The sealed segments' files; the active segment's; for a moment, the
	// next active segment's (a roll creates it before it seals the old
	// one), those of a sealed segment opened again to be flushed or read
	// before the Cache closes another's, and a checkpoint or a snapshot.
	const limit = 3*bound + 3*3 + 4
	mem := vfs.NewMem()
	cfs := &peakFS{FS: mem}
	cfg := StoreConfig{FS: cfs, MaxOpenSegments: bound, HighWatermarkFollowsEnd: true, Logger: testLogger(t)}
	s, err := OpenStore("/d", cfg)
	require.NoError(t, err)
	p, err := s.CreatePartition("t", 0, tinySegments)
	require.NoError(t, err)
	bounded := func() {
		t.Helper()
		require.LessOrEqual(t, cfs.open.Load(), int64(limit))
	}
	appendOneByOne(t, p, n, bounded)
	require.Equal(t, n, p.Segments())
	require.NoError(t, p.Flush())
	checkRecords(t, p, rand.New(rand.NewPCG(1, 2)))
	bounded()
	require.LessOrEqual(t, cfs.peak.Load(), int64(limit))
	require.NoError(t, s.Close())
	require.Zero(t, cfs.open.Load(), "close closes every file")

	// A clean reopen opens no sealed segment's files, and holds none
	// open: only the active segment's.
	cfs.peak.Store(0)
	s, err = OpenStore("/d", cfg)
	require.NoError(t, err)
	p, err = s.OpenPartition("t", 0, tinySegments)
	require.NoError(t, err)
	require.Equal(t, n, p.Segments())
	require.LessOrEqual(t, cfs.open.Load(), int64(3+2))
	require.LessOrEqual(t, cfs.peak.Load(), int64(3+3+2), "the files of a segment at a time")
	checkRecords(t, p, rand.New(rand.NewPCG(3, 4)))
	bounded()
	appendOneByOne(t, p, 300, bounded)

	// A crash: the clone holds what was synced (all but the last appends).
	require.NoError(t, p.Flush())
	appendOneByOne(t, p, 50, bounded)
	crashed := mem.CrashClone()
	require.NoError(t, s.Close())

	cfs = &peakFS{FS: crashed}
	cfg.FS = cfs
	s, err = OpenStore("/d", cfg)
	require.NoError(t, err)
	defer s.Close()
	p, err = s.OpenPartition("t", 0, tinySegments)
	require.NoError(t, err)
	require.GreaterOrEqual(t, p.EndOffset(), int64(n+300))
	require.LessOrEqual(t, cfs.peak.Load(), int64(limit))
	checkRecords(t, p, rand.New(rand.NewPCG(5, 6)))
	bounded()
	appendOneByOne(t, p, 100, bounded)
	checkRecords(t, p, rand.New(rand.NewPCG(7, 8)))
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(names)
}

// TestManyTinySegmentsBoundedFDs: the same on the operating system's file
// system, counting the process's descriptors.
func TestManyTinySegmentsBoundedFDs(t *testing.T) {
	const n, bound = 1500, 8
	dir := t.TempDir()
	before := openFDs(t)
	cfg := StoreConfig{MaxOpenSegments: bound, HighWatermarkFollowsEnd: true, Logger: testLogger(t)}
	s, err := OpenStore(dir, cfg)
	require.NoError(t, err)
	p, err := s.CreatePartition("t", 0, tinySegments)
	require.NoError(t, err)
	// The sealed segments' files, the active one's, the store's lock, and
	// a few for a moment; the runtime's own descriptors (the poller) may
	// come and go.
	const slack = 3*bound + 3 + 1 + 8
	bounded := func() {
		t.Helper()
		require.LessOrEqual(t, openFDs(t)-before, slack)
	}
	appendOneByOne(t, p, n, bounded)
	checkRecords(t, p, rand.New(rand.NewPCG(9, 10)))
	bounded()
	require.NoError(t, s.Close())

	s, err = OpenStore(dir, cfg)
	require.NoError(t, err)
	defer s.Close()
	p, err = s.OpenPartition("t", 0, tinySegments)
	require.NoError(t, err)
	require.LessOrEqual(t, openFDs(t)-before, 3+1+8, "a clean open holds the active segment's files only")
	checkRecords(t, p, rand.New(rand.NewPCG(11, 12)))
	bounded()
}

// TestOutOfFilesIsNotSticky: running out of file descriptors while a roll
// creates the next segment, while the leader-epoch checkpoint is written,
// while a flush opens the directory, and while a read opens a closed
// segment's files is an error for that call only: once descriptors are
// free, the same partition appends, flushes and reads again, without a
// reopen. Any other write error still makes it read-only.
func TestOutOfFilesIsNotSticky(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	var eio atomic.Bool // fail writes with EIO
	fs := vfs.WithErrors(mem, func(op vfs.Op, path string) error {
		if full.Load() && (op == vfs.OpCreate || op == vfs.OpOpen || op == vfs.OpSyncDir) {
			return syscall.EMFILE
		}
		if eio.Load() && op == vfs.OpWrite {
			return syscall.EIO
		}
		return nil
	})
	s, err := OpenStore("/d", StoreConfig{FS: fs, MaxOpenSegments: 2, HighWatermarkFollowsEnd: true, Logger: testLogger(t)})
	require.NoError(t, err)
	defer s.Close()
	p, err := s.CreatePartition("t", 0, tinySegments)
	require.NoError(t, err)
	// The store's loop flushes after every roll: held off until the flush
	// below, so that the directory is still to be synced when it runs
	// (under the race detector the loop often got there first).
	s.roundMu.Lock()
	held := true
	defer func() {
		if held { // a failed assertion: Close waits for the loop
			s.roundMu.Unlock()
		}
	}()
	appendOneByOne(t, p, 20, func() {})
	segs := p.Segments()

	// The next append rolls: creating the segment fails.
	full.Store(true)
	for range 3 {
		_, err = p.Append(Record{Value: []byte("x")})
		require.ErrorIs(t, err, syscall.EMFILE)
	}
	require.Equal(t, int64(20), p.EndOffset())
	require.Equal(t, segs, p.Segments())
	// A new leader epoch is checkpointed before its first batch.
	require.ErrorIs(t, p.SetLeaderEpoch(3), syscall.EMFILE)
	require.ErrorIs(t, p.Roll(), syscall.EMFILE)
	// A flush opens the directory.
	err = p.Flush()
	require.ErrorIs(t, err, syscall.EMFILE)
	held = false
	s.roundMu.Unlock()
	// A read of an old segment whose files the Cache closed opens them.
	_, err = p.Read(0, 1)
	require.ErrorIs(t, err, syscall.EMFILE)

	full.Store(false)
	require.NoError(t, p.SetLeaderEpoch(3))
	appendOneByOne(t, p, 20, func() {})
	require.NoError(t, p.Flush())
	require.Equal(t, int64(40), p.EndOffset())
	checkRecords(t, p, rand.New(rand.NewPCG(13, 14)))

	// Any other error writing the log stays: the partition is read-only
	// until reopened.
	eio.Store(true)
	_, err = p.Append(Record{Value: []byte("x")})
	require.ErrorIs(t, err, syscall.EIO)
	eio.Store(false)
	_, err = p.Append(Record{Value: []byte("x")})
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.EIO), "the sticky error names its cause: %v", err)
}

// TestDefaultMaxOpenSegments: by default sealed segments (three
// descriptors each) take at most 30% of the process's limit on open files,
// and at most 1000.
func TestDefaultMaxOpenSegments(t *testing.T) {
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	n := StoreConfig{}.withDefaults().MaxOpenSegments
	require.LessOrEqual(t, n, 1000)
	require.GreaterOrEqual(t, n, 16)
	if lim.Cur >= 160 {
		require.LessOrEqual(t, uint64(3*n), lim.Cur*3/10)
	}
	require.Equal(t, 5, StoreConfig{MaxOpenSegments: 5}.withDefaults().MaxOpenSegments)
}
