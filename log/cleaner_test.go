package log

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func TestPlanCleaning(t *testing.T) {
	ms := func(d time.Duration) int64 { return t0.Add(-d).UnixMilli() }
	// Four sealed segments of 100 bytes at offsets 0, 10, 20, 30, the active
	// one at 40.
	segs := func(ages ...time.Duration) []segInfo {
		var out []segInfo
		for i, a := range ages {
			out = append(out, segInfo{base: int64(10 * i), next: int64(10*i + 10), size: 100, maxTs: ms(a)})
		}
		return out
	}
	old := segs(time.Hour, time.Hour, time.Hour, time.Hour, 0)
	for _, tc := range []struct {
		name     string
		in       cleanInput
		due      bool
		ratio    float64
		end      int64
		forced   bool
		firstDty int64
	}{
		{name: "all dirty", in: cleanInput{segs: old, minRatio: 0.5}, due: true, ratio: 1, end: 40},
		{name: "half dirty", in: cleanInput{segs: old, firstDirty: 20, minRatio: 0.5}, due: true, ratio: 0.5, end: 40, firstDty: 20},
		{name: "a quarter dirty", in: cleanInput{segs: old, firstDirty: 30, minRatio: 0.5}, ratio: 0.25, end: 40, firstDty: 30},
		{name: "mid-segment first dirty counts the segment dirty", in: cleanInput{segs: old, firstDirty: 25, minRatio: 0.5}, due: true, ratio: 0.5, end: 40, firstDty: 25},
		{name: "clean", in: cleanInput{segs: old, firstDirty: 40, minRatio: 0.5}, end: 40, firstDty: 40},
		{name: "first dirty past the end is clamped", in: cleanInput{segs: old, firstDirty: 99, minRatio: 0.5}, end: 40, firstDty: 40},
		{name: "first dirty below the log start", in: cleanInput{segs: old, start: 20, firstDirty: 0, minRatio: 0.5}, due: true, ratio: 0.5, end: 40, firstDty: 20},
		{name: "min lag stops at a young segment", in: cleanInput{segs: segs(time.Hour, time.Hour, time.Minute, time.Hour, 0), minLag: 10 * time.Minute, minRatio: 0.5}, due: true, ratio: 1, end: 20},
		{name: "min lag: nothing old enough", in: cleanInput{segs: segs(time.Minute, time.Hour, 0), minLag: 10 * time.Minute, minRatio: 0.5}, end: 0},
		{name: "max lag forces a pass below the ratio", in: cleanInput{segs: old, firstDirty: 30, firstDirtyTs: ms(2 * time.Hour), maxLag: time.Hour, minRatio: 0.5}, due: true, forced: true, ratio: 0.25, end: 40, firstDty: 30},
		{name: "max lag not reached", in: cleanInput{segs: old, firstDirty: 30, firstDirtyTs: ms(30 * time.Minute), maxLag: time.Hour, minRatio: 0.5}, ratio: 0.25, end: 40, firstDty: 30},
		{name: "the high watermark stops the cleanable part", in: cleanInput{segs: old, hw: 25, minRatio: 0.5}, due: true, ratio: 1, end: 20},
		{name: "only the active segment", in: cleanInput{segs: segs(0), minRatio: 0.01}, end: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.now = t0
			if tc.in.hw == 0 {
				tc.in.hw = -1
			}
			if tc.in.firstDirtyTs == 0 {
				tc.in.firstDirtyTs = -1
			}
			p := planCleaning(tc.in)
			require.Equal(t, tc.due, p.due, "due")
			require.InDelta(t, tc.ratio, p.ratio, 1e-9, "ratio")
			require.Equal(t, tc.end, p.end, "end")
			require.Equal(t, tc.forced, p.forced, "forced")
			require.Equal(t, tc.firstDty, p.firstDirty, "first dirty")
		})
	}
}

func TestGroupSegments(t *testing.T) {
	seg := func(base, next, size int64) segInfo { return segInfo{base: base, next: next, size: size} }
	l := groupLimits{maxBytes: 1000, maxIndexBytes: 1 << 20, indexInterval: 4096}
	require.Equal(t, []int{3, 2}, groupSegments([]segInfo{seg(0, 10, 400), seg(10, 20, 300), seg(20, 30, 300), seg(30, 40, 600), seg(40, 50, 400)}, l))
	require.Equal(t, []int{1, 1}, groupSegments([]segInfo{seg(0, 10, 2000), seg(10, 20, 1)}, l), "an oversized segment is a group of its own")
	// The index bound: 12 bytes an estimated entry.
	l2 := groupLimits{maxBytes: 1 << 30, maxIndexBytes: 48, indexInterval: 100}
	require.Equal(t, []int{2, 1}, groupSegments([]segInfo{seg(0, 1, 50), seg(1, 2, 50), seg(2, 3, 250)}, l2))
	// Relative offsets must fit in 32 bits.
	require.Equal(t, []int{1, 1}, groupSegments([]segInfo{seg(0, 10, 1), seg(10, 1<<32, 1)}, l))
	require.Empty(t, groupSegments(nil, l))
}

func TestPickDirtiest(t *testing.T) {
	require.Equal(t, -1, pickDirtiest([]cleanPlan{{ratio: 0.9}}))
	require.Equal(t, 1, pickDirtiest([]cleanPlan{{due: true, ratio: 0.6}, {due: true, ratio: 0.9}, {ratio: 1}}))
	require.Equal(t, 0, pickDirtiest([]cleanPlan{{due: true, forced: true, ratio: 0.1}, {due: true, ratio: 0.9}}))
}

// TestOffsetMap checks the map against a Go map, through growth, and that
// it refuses new keys, changing nothing, once its bytes are used up.
func TestOffsetMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := newOffsetMap(24<<10, 1) // 1024 slots at most: 921 keys
	model := map[string]int64{}
	refused := 0
	for off := int64(0); off < 20000; off++ {
		k := fmt.Sprint("key-", rng.IntN(3000))
		if m.put([]byte(k), off) {
			model[k] = off
		} else {
			_, had := model[k]
			require.False(t, had, "a key already in the map is updated")
			refused++
		}
	}
	require.Positive(t, refused)
	require.Len(t, model, 921)
	require.LessOrEqual(t, m.bytes(), int64(24<<10))
	for k, off := range model {
		require.Equal(t, off, m.get([]byte(k)), k)
	}
	require.EqualValues(t, -1, m.get([]byte("absent")))
}

// compacted opens a broker on a MemFS with a compacted topic whose
// segments roll every few batches.
func compacted(t *testing.T, fs vfs.FS, cfg TopicConfig, bcfg Config) (*Broker, *Partition) {
	t.Helper()
	bcfg.FS = fs
	bcfg.RetentionCheckInterval = time.Hour // the tests run the cleaner
	bcfg.Logger = testLogger(t)
	b, err := Open("/d", bcfg)
	require.NoError(t, err)
	if cfg.Cleanup == CleanupDelete {
		cfg.Cleanup = CleanupCompact
	}
	if cfg.MaxIndexBytes == 0 {
		cfg.MaxIndexBytes = 4096 // not 10 MiB a file in memory
	}
	if _, err := b.Topic("c"); err != nil {
		createT(t, b, "c", cfg)
	}
	p, err := b.Partition("c", 0)
	require.NoError(t, err)
	return b, p
}

// scan reads the whole partition, one record at a time at every offset as
// well as in one long read, and returns the records in order.
func scan(t *testing.T, p *Partition) []Record {
	t.Helper()
	var out []Record
	for off := p.StartOffset(); off < p.EndOffset(); {
		recs, err := p.Read(off, 1<<20)
		require.NoError(t, err)
		require.NotEmpty(t, recs, "read at %d of [%d, %d)", off, p.StartOffset(), p.EndOffset())
		for _, r := range recs {
			require.GreaterOrEqual(t, r.Offset, off)
			off = r.Offset + 1
			out = append(out, r)
		}
	}
	return out
}

func TestCompactionKeepsLatestAndDropsTombstonesAfterRetention(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	cfg := TopicConfig{SegmentBytes: 1500, DeleteRetention: time.Minute, MinCleanableDirtyRatio: 0.01}
	b, p := compacted(t, fs, cfg, Config{})
	defer func() { require.NoError(t, b.Close()) }()
	for i := range 400 {
		k := fmt.Sprint("k", i%10)
		var v []byte
		if i%10 != 3 || i < 390 { // k3's last record is a tombstone
			v = []byte(fmt.Sprint("v", i))
		}
		_, err := p.Append(Record{Key: []byte(k), Value: v})
		require.NoError(t, err)
	}
	_, err := p.Append(Record{Key: []byte("other"), Value: []byte("x")}) // in the active segment
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	sizeBefore, segsBefore := p.Size(), p.Segments()
	passes, err := b.cleaner.run(t0)
	require.NoError(t, err)
	require.Equal(t, 1, passes)
	require.Less(t, p.Size(), sizeBefore/5, "most records were superseded")
	got := map[string]string{}
	var tombstones int
	for _, r := range scan(t, p) {
		if r.Value == nil {
			tombstones++
		}
		_, dup := got[string(r.Key)]
		require.False(t, dup, "key %s twice after a full pass", r.Key)
		got[string(r.Key)] = string(r.Value)
	}
	want := map[string]string{"other": "x", "k3": ""}
	for i := 390; i < 400; i++ {
		if i%10 != 3 {
			want[fmt.Sprint("k", i%10)] = fmt.Sprint("v", i)
		}
	}
	require.Equal(t, want, got)
	require.Equal(t, 1, tombstones, "the tombstone is kept DeleteRetention after the pass")

	// Nothing new is dirty: no pass. A new dirty segment after the
	// retention brings a pass that drops the tombstone.
	passes, err = b.cleaner.run(t0.Add(2 * time.Minute))
	require.NoError(t, err)
	require.Zero(t, passes)
	_, err = p.Append(Record{Key: []byte("k1"), Value: []byte("new")})
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	passes, err = b.cleaner.run(t0.Add(59 * time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, passes)
	require.Contains(t, valuesOf(scan(t, p)), "k3", "within DeleteRetention the tombstone stays")
	require.Less(t, p.Segments(), segsBefore/4, "cleaned segments, now small, were grouped")
	_, err = p.Append(Record{Key: []byte("k2"), Value: []byte("new")})
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	passes, err = b.cleaner.run(t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, passes)
	vals := valuesOf(scan(t, p))
	require.NotContains(t, vals, "k3", "past DeleteRetention the tombstone is gone")
	require.Equal(t, "new", vals["k1"])
	require.Equal(t, "new", vals["k2"])
	require.Equal(t, "x", vals["other"])

	// The same after a clean reopen and after a crash.
	end := p.EndOffset()
	require.NoError(t, b.Close())
	for _, crash := range []bool{false, true} {
		target := vfs.FS(fs)
		if crash {
			target = fs.CrashClone()
		}
		b, p = compacted(t, target, cfg, Config{})
		require.Equal(t, end, p.EndOffset())
		require.Equal(t, vals, valuesOf(scan(t, p)))
		if !crash {
			require.NoError(t, b.Close())
		}
	}
}

func valuesOf(recs []Record) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			out[string(r.Key)] = "<tombstone>"
		} else {
			out[string(r.Key)] = string(r.Value)
		}
	}
	return out
}

// TestCompactionKeepsProducersLastBatch: the last batch of an idempotent
// producer survives, emptied, when every record in it is superseded, so its
// producer id, epoch and sequence stay in the log.
func TestCompactionKeepsProducersLastBatch(t *testing.T) {
	fs := vfs.NewMem()
	b, p := compacted(t, fs, TopicConfig{SegmentBytes: 1000}, Config{})
	defer b.Close()
	var bd batch.Builder
	send := func(pid int64, seq int32, k, v string) {
		bd.Reset(t0.UnixMilli())
		if pid >= 0 {
			bd.SetProducer(pid, 3, seq)
		}
		bd.Append(t0.UnixMilli(), []byte(k), []byte(v), nil)
		_, _, err := p.AppendBatch(append([]byte(nil), bd.Bytes()...))
		require.NoError(t, err)
	}
	send(7, 0, "a", "1")
	send(7, 1, "b", "1") // producer 7's last batch
	send(-1, 0, "c", "1")
	for i := range 40 {
		send(-1, 0, []string{"a", "b", "c"}[i%3], fmt.Sprint(i+2))
	}
	require.NoError(t, p.Roll())
	_, err := b.cleaner.run(t0)
	require.NoError(t, err)
	raw, err := p.ReadBatches(0, 1<<20, p.EndOffset())
	require.NoError(t, err)
	var pidBatches []batch.Header
	require.NoError(t, batch.Batches(raw, func(_ []byte, h batch.Header) error {
		if h.ProducerID == 7 {
			pidBatches = append(pidBatches, h)
		}
		return nil
	}))
	require.Len(t, pidBatches, 1, "only producer 7's last batch is kept")
	h := pidBatches[0]
	require.EqualValues(t, 1, h.BaseOffset)
	require.EqualValues(t, 1, h.BaseSequence)
	require.EqualValues(t, 3, h.ProducerEpoch)
	require.Zero(t, h.NumRecords, "its superseded record is gone")
	require.Equal(t, map[string]string{"a": "41", "b": "39", "c": "40"}, valuesOf(scan(t, p)))
}

// TestCompactionMultiplePasses: with an offset map too small for the
// dirty keys, a run makes several passes, each up to where the map filled.
func TestCompactionMultiplePasses(t *testing.T) {
	fs := vfs.NewMem()
	b, p := compacted(t, fs, TopicConfig{SegmentBytes: 4000, MinCleanableDirtyRatio: 0.01}, Config{CleanerBufferBytes: 1 << 10})
	defer b.Close()
	want := map[string]string{}
	for i := range 3000 {
		k := fmt.Sprint("key", i%500)
		v := fmt.Sprint(i)
		want[k] = v
		_, err := p.Append(Record{Key: []byte(k), Value: []byte(v)})
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	passes, err := b.cleaner.run(t0)
	require.NoError(t, err)
	require.Greater(t, passes, 10, "a 1 KiB map holds 39 keys: many passes")
	require.LessOrEqual(t, b.cleaner.maxMapBytes, int64(1<<10))
	recs := scan(t, p)
	require.Equal(t, want, valuesOf(recs))
	require.Len(t, recs, 500, "each key once")
}

// signalHandler is a slog handler that tells ch about every record whose
// message is msg.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// TestCleanerRunsInTheBackground: the broker's own cleaner goroutine cleans
// every RetentionCheckInterval, and Close stops and joins it, also when it
// is busy.
func TestCleanerRunsInTheBackground(t *testing.T) {
	leaktest.Check(t)
	passed := make(chan struct{}, 1)
	b, err := Open("/d", Config{FS: vfs.NewMem(), RetentionCheckInterval: 5 * time.Millisecond,
		Logger: slog.New(signalHandler{msg: "log cleaner pass", ch: passed})})
	require.NoError(t, err)
	p := createT(t, b, "c", TopicConfig{Cleanup: CleanupCompact, SegmentBytes: 1000, MaxIndexBytes: 4096})
	for i := range 200 {
		_, err := p.Append(Record{Key: []byte(fmt.Sprint("k", i%3)), Value: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	before := p.Size()
	require.NoError(t, p.Roll())
	// Passes may have run during the appends (segments rolled): await those
	// that follow until one has cleaned everything sealed.
	deadline := time.After(10 * time.Second)
	for p.Size() >= before/4 {
		select {
		case <-passed:
		case <-deadline:
			b.Close()
			t.Fatalf("not cleaned within 10 s: %d bytes of %d", p.Size(), before)
		}
	}
	require.Equal(t, map[string]string{"k0": "198", "k1": "199", "k2": "197"}, valuesOf(scan(t, p)))
	// Keep it busy, and close.
	for i := range 2000 {
		_, err := p.Append(Record{Key: []byte(fmt.Sprint("k", i%50)), Value: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
}
