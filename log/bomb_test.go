package log

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/segment/batch/batchtest"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// Decompression bombs (issue 25): a small compressed batch whose records
// inflate to far more than the broker should hold. Every path that
// decompresses stops at MaxDecompressedBytes (or a topic's MaxMessageBytes
// where that bounds the result), with ErrRecordTooLarge, and changes
// nothing.

// allocated is the heap allocated while fn ran, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// codecState is what a codec may allocate whatever the limit (an lz4
// reader's 4 MiB blocks, a zstd decoder's 8 MiB window), and a pass or a
// read its own buffers.
const codecState = 12 << 20

func mustBomb(t testing.TB, codec int, n int64) []byte {
	t.Helper()
	b, err := batchtest.Bomb(codec, n)
	require.NoError(t, err)
	return b
}

// requireBombRefused fails t unless err says the records decompress past a
// limit (ErrRecordTooLarge for a broker's caller; batch.ErrTooLarge under
// it) and not that they are corrupt, and the call allocated less than 3
// times the limit.
func requireBombRefused(t *testing.T, what string, err error, alloc uint64, limit int, tooLarge bool) {
	t.Helper()
	require.ErrorIs(t, err, batch.ErrTooLarge, what)
	if tooLarge {
		require.ErrorIs(t, err, ErrRecordTooLarge, what)
	}
	require.NotErrorIs(t, err, ErrCorrupt, what)
	t.Logf("%s: %d KiB allocated, limit %d KiB: %v", what, alloc>>10, limit>>10, err)
	require.Less(t, alloc, 3*uint64(limit)+codecState, "%s: allocated under a limit of %d bytes", what, limit)
}

// TestProduceBomb: a produced bomb of each codec is refused whatever the
// topic does with it (stores it as it is, recompresses it, stores it
// uncompressed), having decompressed no more than the limit, and nothing
// is appended.
func TestProduceBomb(t *testing.T) {
	const limit = 16 << 20
	bombs := []struct {
		codec int
		n     int64
	}{
		{batch.CompressionZstd, 1000 << 20}, // 32 KB
		{batch.CompressionGzip, 300 << 20},  // 300 KB
		{batch.CompressionLz4, 200 << 20},   // 800 KB
	}
	b, err := Open("/d", Config{FS: vfs.NewMem(), MaxDecompressedBytes: limit})
	require.NoError(t, err)
	defer b.Close()
	topics := map[string]TopicCompression{
		"producer": TopicCompressionProducer, "none": TopicCompressionNone,
		"gzip": TopicCompressionGzip, "snappy": TopicCompressionSnappy, "lz4": TopicCompressionLz4, "zstd": TopicCompressionZstd,
	}
	raws := make([][]byte, len(bombs))
	for i, bm := range bombs {
		raws[i] = mustBomb(t, bm.codec, bm.n)
	}
	for name, tc := range topics {
		p := createT(t, b, name, TopicConfig{Compression: tc})
		for i, bm := range bombs {
			raw := slices.Clone(raws[i]) // AppendBatch sets its base offset
			var err error
			alloc := allocated(func() { _, _, err = p.AppendBatch(raw) })
			lim := limit
			if tc == TopicCompressionNone {
				lim = p.config().MaxMessageBytes // stored uncompressed: bounded by what may be stored
			}
			requireBombRefused(t, fmt.Sprintf("topic %s, codec %d", name, bm.codec), err, alloc, lim, true)
			require.Zero(t, p.EndOffset())
		}
		// A batch within the limits still goes in.
		ok := mustBomb(t, batch.CompressionZstd, 512<<10)
		_, _, err := p.AppendBatch(ok)
		require.NoError(t, err, name)
		recs, err := p.Read(0, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Len(t, recs[0].Value, 512<<10)
	}
	// Kafka's answer through the Client API too.
	_, err = b.ProduceBatch(context.Background(), TopicPartition{Topic: "lz4"}, raws[0], AcksLeader)
	require.ErrorIs(t, err, ErrRecordTooLarge)
}

// TestProduceSnappyBomb: snappy inflates 21:1 at most, so its bomb is
// small; a raw block that says it holds more than the limit is refused
// before it is decoded.
func TestProduceSnappyBomb(t *testing.T) {
	const limit = 4 << 20
	b, err := Open("/d", Config{FS: vfs.NewMem(), MaxDecompressedBytes: limit})
	require.NoError(t, err)
	defer b.Close()
	for _, tc := range []TopicCompression{TopicCompressionProducer, TopicCompressionZstd} {
		p := createT(t, b, tc.String(), TopicConfig{Compression: tc, MaxMessageBytes: 2 << 20})
		raw := mustBomb(t, batch.CompressionSnappy, 32<<20) // 1.6 MB
		var err error
		alloc := allocated(func() { _, _, err = p.AppendBatch(raw) })
		requireBombRefused(t, tc.String(), err, alloc, limit, true)
		require.Zero(t, p.EndOffset())
	}
}

// storeBomb appends a zstd bomb of n bytes and then one small record to
// topic t of a broker on fs that accepts it (MaxDecompressedBytes above n),
// and closes the broker.
func storeBomb(t *testing.T, fs vfs.FS, cfg TopicConfig, n int64) {
	t.Helper()
	b, err := Open("/d", Config{FS: fs, MaxDecompressedBytes: int(n) + 1<<20})
	require.NoError(t, err)
	p := createT(t, b, "t", cfg)
	_, _, err = p.AppendBatch(mustBomb(t, batch.CompressionZstd, n))
	require.NoError(t, err)
	_, err = p.Append(Record{Key: []byte("k"), Value: []byte("after")})
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// TestReadBomb: a bomb in the log (stored under a larger limit, or
// replicated from a leader that took it) is refused by every reader that
// decompresses, at the limit: Partition.Read and Records at the broker's,
// a Consumer and DecodeRecords at batch.DefaultMaxDecompressed. The records
// after it are read.
func TestReadBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 128 MiB twice")
	}
	const limit = 16 << 20
	fs := vfs.NewMem()
	n := int64(200 << 20) // past batch.DefaultMaxDecompressed too
	if raceEnabled {
		n = 64 << 20 // only the broker's limit is tested
	}
	storeBomb(t, fs, TopicConfig{}, n)
	b, err := Open("/d", Config{FS: fs, MaxDecompressedBytes: limit})
	require.NoError(t, err)
	defer b.Close()
	p, err := b.Partition("t", 0)
	require.NoError(t, err)

	alloc := allocated(func() { _, err = p.Read(0, 1<<20) })
	requireBombRefused(t, "Partition.Read", err, alloc, limit, false)
	recs, err := p.Read(1, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "after", string(recs[0].Value))

	alloc = allocated(func() {
		for _, err = range p.Records(0) {
			if err != nil {
				break
			}
		}
	})
	requireBombRefused(t, "Partition.Records", err, alloc, limit, false)

	if raceEnabled {
		return // 128 MiB decoded twice more: minutes under the race detector
	}
	raw, err := p.ReadBatches(0, 1<<20, p.HighWatermark())
	require.NoError(t, err)
	alloc = allocated(func() { _, err = DecodeRecords(raw) })
	requireBombRefused(t, "DecodeRecords", err, alloc, batch.DefaultMaxDecompressed, false)

	c, err := NewConsumer(b, ConsumerConfig{Topics: []string{"t"}, MaxWait: time.Second})
	require.NoError(t, err)
	defer c.Close()
	alloc = allocated(func() { _, err = c.Poll(context.Background()) })
	requireBombRefused(t, "Consumer.Poll", err, alloc, batch.DefaultMaxDecompressed, false)
}

// countHandler counts the log records whose message starts with prefix.
type countHandler struct {
	prefix string
	n      *atomic.Int32
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestCleanerBomb: a bomb the cleaner cannot decompress within
// MaxDecompressedBytes makes its partition uncleanable, with one log line,
// its segments as they were; another compacted partition is cleaned; a
// restart does the same again, and nothing dies.
func TestCleanerBomb(t *testing.T) {
	const limit = 16 << 20
	fs := vfs.NewMem()
	cfg := TopicConfig{Cleanup: CleanupCompact, SegmentBytes: 16 << 10, MaxIndexBytes: 4096, MinCleanableDirtyRatio: 1e-9}
	storeBomb(t, fs, cfg, 64<<20)
	for restart := range 2 {
		var lines atomic.Int32
		b, err := Open("/d", Config{FS: fs, MaxDecompressedBytes: limit, RetentionCheckInterval: time.Hour,
			Logger: slog.New(countHandler{prefix: "log cleaner: partition marked uncleanable", n: &lines})})
		require.NoError(t, err)
		p, err := b.Partition("t", 0)
		require.NoError(t, err)
		// Another compacted topic, dirty: cleaned all the same.
		q := createOrGet(t, b, "other", cfg)
		for i := range 300 {
			_, err := q.Append(Record{Key: fmt.Appendf(nil, "k%d", i%3), Value: make([]byte, 200)})
			require.NoError(t, err)
		}
		require.NoError(t, q.Roll())
		require.NoError(t, p.Roll())
		pSize, qSize := p.Size(), q.Size()

		var passes int
		alloc := allocated(func() { passes, err = b.cleaner.run(t0) })
		require.NoError(t, err)
		require.GreaterOrEqual(t, passes, 1, "restart %d: the other partition was not cleaned", restart)
		require.Less(t, q.Size(), qSize/4, "restart %d", restart)
		require.Equal(t, pSize, p.Size(), "restart %d: the bomb's partition changed", restart)
		perr := b.cleaner.uncleanable[p]
		require.ErrorIs(t, perr, batch.ErrTooLarge, "restart %d", restart)
		require.ErrorIs(t, perr, ErrRecordTooLarge)
		require.Equal(t, int32(1), lines.Load(), "restart %d: log lines", restart)
		t.Logf("restart %d: pass allocated %d KiB, limit %d KiB: %v", restart, alloc>>10, limit>>10, perr)
		require.Less(t, alloc, 3*uint64(limit)+codecState+uint64(qSize)*4)
		// A second run does not try again, nor log again.
		_, err = b.cleaner.run(t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, int32(1), lines.Load())
		// The record after the bomb is still there.
		recs, err := p.Read(1, 1<<20)
		require.NoError(t, err)
		require.Equal(t, "after", string(recs[0].Value))
		require.NoError(t, b.Close())
	}
}

func createOrGet(t *testing.T, b *Broker, name string, cfg TopicConfig) *Partition {
	t.Helper()
	if p, err := b.Partition(name, 0); err == nil {
		return p
	}
	return createT(t, b, name, cfg)
}

const bombChildEnv = "STRATA_BOMB_CHILD"

// TestBombPeakRSS is issue 25's reproduction in a child process limited to
// 1 GiB of address space more than it starts with: a Produce of a 32 KB zstd batch of 1000 MiB of zeros to a
// topic that recompresses (was: 3.9 GB of RSS, death under the limit), and
// a cleaner pass over such a batch stored by a broker that accepted it
// (was: 5.7 GB), twice, as after a restart. With the default
// MaxDecompressedBytes (128 MiB) each stays far below.
func TestBombPeakRSS(t *testing.T) {
	if mode := os.Getenv(bombChildEnv); mode != "" {
		bombChild(t, mode)
		return
	}
	if testing.Short() {
		t.Skip("child processes")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory is most of the RSS, and 1000 MiB take minutes to compress")
	}
	for _, mode := range []string{"produce", "clean"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBombPeakRSS$", "-test.v")
		cmd.Env = append(os.Environ(), bombChildEnv+"="+mode+":"+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s child: %s", mode, out)
		require.Contains(t, string(out), "bomb child ok", "%s child: %s", mode, out)
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
		t.Logf("%s: child peak RSS %d MiB", mode, rss>>20)
		require.Less(t, rss, int64(640<<20), "%s: peak RSS", mode)
	}
}

// vmSize is the process's address space (VmSize), in bytes.
func vmSize(t *testing.T) uint64 {
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			var kb uint64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}

// bombChild is TestBombPeakRSS's child: mode "produce:dir" or "clean:dir".
func bombChild(t *testing.T, env string) {
	mode, dir, _ := strings.Cut(env, ":")
	// 1 GiB of address space more than the process maps now (the Go
	// runtime reserves some up front).
	lim := syscall.Rlimit{Cur: vmSize(t) + 1<<30, Max: vmSize(t) + 1<<30}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &lim))
	bomb := mustBomb(t, batch.CompressionZstd, 1000<<20)
	switch mode {
	case "produce":
		b, err := Open(dir, Config{})
		require.NoError(t, err)
		createT(t, b, "t", TopicConfig{Compression: TopicCompressionLz4})
		start := time.Now()
		_, err = b.ProduceBatch(context.Background(), TopicPartition{Topic: "t"}, bomb, AcksLeader)
		require.ErrorIs(t, err, ErrRecordTooLarge)
		t.Logf("produce refused in %v: %v", time.Since(start), err)
		require.NoError(t, b.Close())
	case "clean":
		cfg := TopicConfig{Cleanup: CleanupCompact, SegmentBytes: 16 << 10}
		b, err := Open(dir, Config{MaxDecompressedBytes: 1 << 30}) // takes it: validation streams
		require.NoError(t, err)
		p := createT(t, b, "t", cfg)
		_, _, err = p.AppendBatch(bomb)
		require.NoError(t, err)
		_, err = p.Append(Record{Key: []byte("k"), Value: []byte("v")})
		require.NoError(t, err)
		require.NoError(t, b.Close())
		for range 2 { // and again, as after a restart
			b, err := Open(dir, Config{RetentionCheckInterval: time.Hour})
			require.NoError(t, err)
			p, err := b.Partition("t", 0)
			require.NoError(t, err)
			require.NoError(t, p.Roll())
			start := time.Now()
			_, err = b.cleaner.run(time.Now())
			require.NoError(t, err)
			require.ErrorIs(t, b.cleaner.uncleanable[p], ErrRecordTooLarge)
			t.Logf("cleaner pass refused in %v: %v", time.Since(start), b.cleaner.uncleanable[p])
			require.NoError(t, b.Close())
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	fmt.Println("bomb child ok")
}
