package log

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
)

// idemBatch is a batch of n records of producer pid.
func idemBatch(pid int64, epoch int16, seq int32, n int32, ts int64) ProducerBatch {
	return ProducerBatch{ProducerID: pid, Epoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1, MaxTimestamp: ts}
}

// psAppend checks b against s and, if accepted and not a duplicate, appends
// it at *next as a partition would: the offsets it got, or the error.
func psAppend(s *ProducerState, next *int64, b ProducerBatch) (AppendCheck, error) {
	c, err := s.Check(b)
	if err != nil || c.Duplicate {
		return c, err
	}
	base := *next
	s.Update(b, base)
	*next = base + int64(b.LastOffsetDelta) + 1
	return AppendCheck{FirstOffset: base, LastOffset: *next - 1, MaxTimestamp: b.MaxTimestamp}, nil
}

func TestProducerStateCheck(t *testing.T) {
	const p = 7
	cases := []struct {
		name    string
		history []ProducerBatch // appended first, each must be accepted
		batch   ProducerBatch
		want    error // nil: accepted (or duplicate)
		dup     bool
		first   int64 // for a duplicate: its first offset
	}{
		{name: "no producer id, no state", batch: idemBatch(NoProducerID, -1, -1, 3, 0)},
		{name: "no producer id ignores state", history: []ProducerBatch{idemBatch(p, 0, 0, 1, 0)}, batch: idemBatch(NoProducerID, -1, -1, 1, 0)},
		{name: "unknown producer at 0", batch: idemBatch(p, 0, 0, 2, 0)},
		{name: "unknown producer at a later epoch at 0", batch: idemBatch(p, 5, 0, 2, 0)},
		{name: "unknown producer at 5", batch: idemBatch(p, 0, 5, 2, 0), want: ErrUnknownProducerID},
		{name: "other producer's state does not count", history: []ProducerBatch{idemBatch(p+1, 0, 0, 5, 0)}, batch: idemBatch(p, 0, 5, 1, 0), want: ErrUnknownProducerID},
		{name: "next in order", history: []ProducerBatch{idemBatch(p, 0, 0, 3, 0)}, batch: idemBatch(p, 0, 3, 1, 0)},
		{name: "gap", history: []ProducerBatch{idemBatch(p, 0, 0, 3, 0)}, batch: idemBatch(p, 0, 4, 1, 0), want: ErrOutOfOrderSequence},
		{name: "overlap, not a duplicate", history: []ProducerBatch{idemBatch(p, 0, 0, 3, 0)}, batch: idemBatch(p, 0, 2, 1, 0), want: ErrOutOfOrderSequence},
		{name: "same base, other count, not a duplicate", history: []ProducerBatch{idemBatch(p, 0, 0, 3, 0)}, batch: idemBatch(p, 0, 0, 2, 0), want: ErrOutOfOrderSequence},
		{name: "duplicate of the last", history: []ProducerBatch{idemBatch(p, 0, 0, 3, 10), idemBatch(p, 0, 3, 2, 11)}, batch: idemBatch(p, 0, 3, 2, 99), dup: true, first: 3},
		{
			name:    "duplicate of the 5th last",
			history: []ProducerBatch{idemBatch(p, 0, 0, 1, 0), idemBatch(p, 0, 1, 2, 0), idemBatch(p, 0, 3, 1, 0), idemBatch(p, 0, 4, 1, 0), idemBatch(p, 0, 5, 1, 0)},
			batch:   idemBatch(p, 0, 0, 1, 0), dup: true, first: 0,
		},
		{
			name:    "6th last is forgotten: out of order",
			history: []ProducerBatch{idemBatch(p, 0, 0, 1, 0), idemBatch(p, 0, 1, 2, 0), idemBatch(p, 0, 3, 1, 0), idemBatch(p, 0, 4, 1, 0), idemBatch(p, 0, 5, 1, 0), idemBatch(p, 0, 6, 1, 0)},
			batch:   idemBatch(p, 0, 0, 1, 0), want: ErrOutOfOrderSequence,
		},
		{name: "older epoch", history: []ProducerBatch{idemBatch(p, 2, 0, 1, 0)}, batch: idemBatch(p, 1, 1, 1, 0), want: ErrProducerFenced},
		{name: "older epoch at 0", history: []ProducerBatch{idemBatch(p, 2, 0, 1, 0)}, batch: idemBatch(p, 1, 0, 1, 0), want: ErrProducerFenced},
		{name: "older epoch, duplicate sequence range", history: []ProducerBatch{idemBatch(p, 1, 0, 1, 0), idemBatch(p, 2, 0, 1, 0)}, batch: idemBatch(p, 1, 0, 1, 0), want: ErrProducerFenced},
		{name: "new epoch at 0", history: []ProducerBatch{idemBatch(p, 0, 0, 10, 0)}, batch: idemBatch(p, 1, 0, 1, 0)},
		{name: "new epoch not at 0", history: []ProducerBatch{idemBatch(p, 0, 0, 10, 0)}, batch: idemBatch(p, 1, 10, 1, 0), want: ErrOutOfOrderSequence},
		{name: "new epoch forgets the old batches", history: []ProducerBatch{idemBatch(p, 0, 0, 2, 0), idemBatch(p, 1, 0, 1, 0)}, batch: idemBatch(p, 1, 1, 1, 0)},
		{name: "negative sequence", batch: idemBatch(p, 0, -1, 1, 0), want: ErrInvalidSequence},
		{name: "negative epoch", batch: idemBatch(p, -1, 0, 1, 0), want: ErrInvalidSequence},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewProducerState(0)
			var next int64
			for _, h := range c.history {
				_, err := psAppend(s, &next, h)
				require.NoError(t, err, "history %+v", h)
			}
			before := s.Clone()
			got, err := s.Check(c.batch)
			require.Equal(t, before, s, "Check changed the state")
			if c.want != nil {
				require.ErrorIs(t, err, c.want)
				for _, other := range []error{ErrOutOfOrderSequence, ErrProducerFenced, ErrUnknownProducerID, ErrInvalidSequence} {
					if other != c.want && (c.want != ErrUnknownProducerID || other != ErrOutOfOrderSequence) {
						require.False(t, errors.Is(err, other), "%v is also %v", err, other)
					}
				}
				if c.want == ErrUnknownProducerID {
					require.ErrorIs(t, err, ErrOutOfOrderSequence, "as Kafka's UnknownProducerIdException")
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.dup, got.Duplicate)
			if c.dup {
				require.Equal(t, c.first, got.FirstOffset)
				require.Equal(t, c.first+int64(c.batch.LastOffsetDelta), got.LastOffset)
			}
		})
	}
}

func TestProducerStateDuplicateAnswer(t *testing.T) {
	s := NewProducerState(100)
	next := int64(100)
	first, err := psAppend(s, &next, idemBatch(1, 0, 0, 4, 1000))
	require.NoError(t, err)
	_, err = psAppend(s, &next, idemBatch(2, 0, 0, 1, 1001)) // another producer between
	require.NoError(t, err)
	again, err := s.Check(idemBatch(1, 0, 0, 4, 5000))
	require.NoError(t, err)
	require.Equal(t, AppendCheck{Duplicate: true, FirstOffset: 100, LastOffset: 103, MaxTimestamp: 1000}, again)
	require.Equal(t, AppendCheck{FirstOffset: 100, LastOffset: 103, MaxTimestamp: 1000}, first)
	require.Equal(t, int64(105), s.EndOffset())
}

func TestProducerStateSequenceWrap(t *testing.T) {
	cases := []struct {
		base, n  int32
		wantLast int32
	}{
		{0, 1, 0},
		{10, 5, 14},
		{math.MaxInt32, 1, math.MaxInt32},
		{math.MaxInt32, 2, 0},
		{math.MaxInt32 - 2, 5, 1},
		{math.MaxInt32 - 4, 5, math.MaxInt32},
	}
	for _, c := range cases {
		b := idemBatch(1, 0, c.base, c.n, 0)
		require.Equal(t, c.wantLast, b.LastSequence(), "base %d n %d", c.base, c.n)
		require.Equal(t, c.base, decrementSequence(b.LastSequence(), c.n-1))
	}

	// A producer near the end of the sequence space: the state is seeded by
	// Update (as a replay of the log would), then batches cross the wrap.
	s := NewProducerState(0)
	var next int64
	s.Update(idemBatch(1, 0, math.MaxInt32-5, 3, 0), next) // up to MaxInt32-3
	next = 3
	for _, b := range []ProducerBatch{idemBatch(1, 0, math.MaxInt32-2, 5, 0), idemBatch(1, 0, 2, 1, 0)} { // -2..1, then 2
		_, err := psAppend(s, &next, b)
		require.NoError(t, err, "%+v", b)
	}
	dup, err := s.Check(idemBatch(1, 0, math.MaxInt32-2, 5, 0))
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, int64(3), dup.FirstOffset)
	_, err = s.Check(idemBatch(1, 0, 4, 1, 0))
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
	_, err = s.Check(idemBatch(1, 0, 3, 1, 0))
	require.NoError(t, err)
	// MaxInt32 is followed by 0, not by MaxInt32+1 in int64.
	s.Update(idemBatch(2, 0, math.MaxInt32, 1, 0), next)
	_, err = s.Check(idemBatch(2, 0, 0, 1, 0))
	require.NoError(t, err)
	_, err = s.Check(idemBatch(2, 0, 1, 1, 0))
	require.ErrorIs(t, err, ErrOutOfOrderSequence)
}

func TestProducerStateKeepsLastFive(t *testing.T) {
	s := NewProducerState(0)
	var next int64
	for i := range int32(8) {
		_, err := psAppend(s, &next, idemBatch(1, 3, i*2, 2, int64(i)))
		require.NoError(t, err)
	}
	info, ok := s.Producer(1)
	require.True(t, ok)
	require.Equal(t, int16(3), info.Epoch)
	require.Equal(t, int32(15), info.LastSequence)
	require.Equal(t, int64(7), info.LastTimestamp)
	require.Len(t, info.Batches, producerBatchesKept)
	for i, m := range info.Batches {
		k := int32(i + 3)
		require.Equal(t, BatchMetadata{FirstSeq: 2 * k, LastSeq: 2*k + 1, LastOffset: int64(2*k + 1), OffsetDelta: 1, MaxTimestamp: int64(k)}, m)
		require.Equal(t, int64(2*k), m.FirstOffset())
	}
	_, ok = s.Producer(2)
	require.False(t, ok)
}

// A producer whose timestamps run ahead of the clock (a skewed or made-up
// one) still expires by the clock that calls Expire: the first Expire
// brings its last timestamp back to now, and it goes once silent for the
// expiration from then.
func TestProducerStateExpireFutureTimestamp(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	s := NewProducerState(0)
	var next int64
	_, err := psAppend(s, &next, idemBatch(1, 0, 0, 1, t0.Add(100*365*24*time.Hour).UnixMilli()))
	require.NoError(t, err)
	require.Zero(t, s.Expire(t0, time.Hour))
	info, ok := s.Producer(1)
	require.True(t, ok)
	require.Equal(t, t0.UnixMilli(), info.LastTimestamp)
	require.Equal(t, t0.Add(100*365*24*time.Hour).UnixMilli(), info.Batches[0].MaxTimestamp, "the batch's own timestamp is kept for duplicates")
	require.Zero(t, s.Expire(t0.Add(time.Hour-time.Millisecond), time.Hour))
	require.Equal(t, 1, s.Expire(t0.Add(time.Hour), time.Hour))
	require.Zero(t, s.Len())
}

// Past maxProducers a new producer evicts the tenth of them heard of the
// longest ago — by the order of their batches, whatever their timestamps
// say — and an evicted producer is unknown: its next batch past sequence 0
// is ErrUnknownProducerID, a new epoch from 0 is accepted.
func TestProducerStateEvictsSilentLongest(t *testing.T) {
	s := NewProducerState(0)
	s.maxProducers = 20
	var next int64
	for id := range int64(20) {
		// Made-up timestamps: the first producers claim the latest ones.
		_, err := psAppend(s, &next, idemBatch(id, 0, 0, 1, 1_000_000-id))
		require.NoError(t, err)
	}
	// Producers 0 and 1 write again: heard of the latest now.
	for id := range int64(2) {
		_, err := psAppend(s, &next, idemBatch(id, 0, 1, 1, 1))
		require.NoError(t, err)
	}
	_, err := psAppend(s, &next, idemBatch(100, 0, 0, 1, 1))
	require.NoError(t, err)
	require.Equal(t, 19, s.Len(), "20 - 2 evicted + 1")
	require.EqualValues(t, 2, s.Evicted())
	for _, id := range []int64{2, 3} {
		_, ok := s.Producer(id)
		require.False(t, ok, "producer %d, silent the longest, evicted", id)
	}
	for _, id := range []int64{0, 1, 4, 19, 100} {
		_, ok := s.Producer(id)
		require.True(t, ok, "producer %d kept", id)
	}
	_, err = s.Check(idemBatch(2, 0, 1, 1, 1))
	require.ErrorIs(t, err, ErrUnknownProducerID)
	_, err = psAppend(s, &next, idemBatch(2, 1, 0, 1, 1))
	require.NoError(t, err)
	// A clone carries the bound and the order on.
	c := s.Clone()
	requireSameState(t, s, c)
	for id := int64(200); c.Len() < 20; id++ {
		_, err := psAppend(c, &next, idemBatch(id, 0, 0, 1, 1))
		require.NoError(t, err)
	}
	_, err = psAppend(c, &next, idemBatch(300, 0, 0, 1, 1))
	require.NoError(t, err)
	_, ok := c.Producer(4)
	require.False(t, ok, "the next silent the longest")
	_, ok = s.Producer(4)
	require.True(t, ok, "the original is not touched")
}

func TestProducerStateExpire(t *testing.T) {
	day := DefaultProducerIDExpiration
	t0 := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		name       string
		now        time.Time
		expiration time.Duration
		left       []int64
	}{
		{"none yet", t0.Add(day - time.Millisecond), 0, []int64{1, 2}},
		{"exactly the expiration", t0.Add(day), 0, []int64{2}},
		{"custom expiration", t0.Add(90 * time.Minute), time.Hour, []int64{2}},
		{"both", t0.Add(day + time.Hour), 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewProducerState(0)
			var next int64
			_, err := psAppend(s, &next, idemBatch(1, 0, 0, 1, t0.UnixMilli()))
			require.NoError(t, err)
			_, err = psAppend(s, &next, idemBatch(2, 0, 0, 1, t0.Add(time.Hour).UnixMilli()))
			require.NoError(t, err)
			n := s.Expire(c.now, c.expiration)
			require.Equal(t, 2-len(c.left), n)
			require.Equal(t, len(c.left), s.Len())
			for _, id := range c.left {
				_, ok := s.Producer(id)
				require.True(t, ok, "producer %d", id)
			}
			// An expired producer is unknown: only sequence 0 is accepted.
			if len(c.left) < 2 {
				_, err := s.Check(idemBatch(1, 0, 1, 1, 0))
				require.ErrorIs(t, err, ErrUnknownProducerID)
			}
		})
	}
}

func TestProducerStateCloneReset(t *testing.T) {
	s := NewProducerState(0)
	var next int64
	_, err := psAppend(s, &next, idemBatch(1, 0, 0, 2, 0))
	require.NoError(t, err)
	c := s.Clone()
	_, err = psAppend(s, &next, idemBatch(1, 0, 2, 2, 0))
	require.NoError(t, err)
	info, _ := c.Producer(1)
	require.Len(t, info.Batches, 1, "the clone shares the original's batches")
	require.Equal(t, int64(2), c.EndOffset())
	require.Equal(t, int64(4), s.EndOffset())

	s.Reset(50)
	require.Equal(t, 0, s.Len())
	require.Equal(t, int64(50), s.EndOffset())
	_, err = s.Check(idemBatch(1, 0, 4, 1, 0))
	require.ErrorIs(t, err, ErrUnknownProducerID)
	require.Equal(t, 1, c.Len())
}

// producerLog builds the bytes of a log of the given batches starting at base,
// as a segment holds them, with one record per offset.
func producerLog(t testing.TB, base int64, batches []ProducerBatch) []byte {
	t.Helper()
	var bd batch.Builder
	var out []byte
	for _, b := range batches {
		bd.Reset(b.MaxTimestamp)
		if b.Idempotent() {
			bd.SetProducer(b.ProducerID, b.Epoch, b.BaseSequence)
		}
		for range b.LastOffsetDelta + 1 {
			bd.Append(b.MaxTimestamp, nil, []byte("v"), nil)
		}
		raw := append([]byte(nil), bd.Bytes()...)
		batch.SetBaseOffset(raw, base)
		base += int64(b.LastOffsetDelta) + 1
		out = append(out, raw...)
	}
	return out
}

func TestProducerStateReplay(t *testing.T) {
	history := []ProducerBatch{
		idemBatch(1, 0, 0, 3, 10),
		idemBatch(NoProducerID, -1, -1, 2, 11),
		idemBatch(2, 4, 0, 1, 12),
		idemBatch(1, 0, 3, 1, 13),
		idemBatch(1, 1, 0, 2, 14), // epoch bump
		idemBatch(2, 4, 1, 5, 15),
	}
	want := NewProducerState(0)
	var next int64
	for _, b := range history {
		_, err := psAppend(want, &next, b)
		require.NoError(t, err)
	}
	data := producerLog(t, 0, history)

	t.Run("whole log", func(t *testing.T) {
		got := NewProducerState(0)
		n, err := got.ReplayBatches(data)
		require.NoError(t, err)
		require.Equal(t, len(data), n)
		requireSameState(t, want, got)
	})
	t.Run("from a clone taken midway, replaying from the start", func(t *testing.T) {
		mid := NewProducerState(0)
		next := int64(0)
		for _, b := range history[:3] {
			_, err := psAppend(mid, &next, b)
			require.NoError(t, err)
		}
		n, err := mid.ReplayBatches(data) // the first 3 are skipped: already reflected
		require.NoError(t, err)
		require.Equal(t, len(data), n)
		requireSameState(t, want, mid)
	})
	t.Run("torn tail", func(t *testing.T) {
		got := NewProducerState(0)
		n, err := got.ReplayBatches(data[:len(data)-7])
		require.NoError(t, err)
		require.Less(t, n, len(data))
		n2, err := got.ReplayBatches(data[n:])
		require.NoError(t, err)
		require.Equal(t, len(data)-n, n2)
		requireSameState(t, want, got)
	})
	t.Run("corrupt header", func(t *testing.T) {
		bad := append([]byte(nil), data...)
		bad[16] = 1 // magic
		_, err := NewProducerState(0).ReplayBatches(bad)
		require.ErrorIs(t, err, ErrCorrupt)
	})
}

// TestProducerStateRandom drives a partition's producer state with several
// idempotent producers, each with up to 5 batches in flight, every batch
// delivered 1-3 times in random order within the window, epoch bumps with
// zombie batches of the old epoch, non-idempotent batches between, and
// restarts that rebuild the state from the newest snapshot and the log.
// It checks every answer against a model and, at the end, that the log
// holds every batch exactly once, in sequence order. Replay a failure with
// its seed.
func TestProducerStateRandom(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run("", func(t *testing.T) {
			for k, n := range producerStateRandom(t, seed, 1500) {
				seen[k] += n
			}
		})
	}
	// Every path was taken.
	for _, k := range []string{"append", "duplicate", "duplicate of the 5th last", "out of order", "unknown producer", "fenced", "restart", "snapshot", "wrapped"} {
		require.Positive(t, seen[k], "%s never happened: %v", k, seen)
	}
}

type inflightBatch struct {
	b     ProducerBatch
	sends int // successful deliveries still to make
}

type storedAt struct{ first, last int64 }

type producerModel struct {
	id      int64
	epoch   int16
	nextSeq int32 // the sequence of the next batch to create
	// inflight is the producer's window: its batches from the oldest not
	// yet done (delivered as many times as it will be), at most 5, as a
	// client that stops sending new batches while an old one is unresolved.
	inflight []*inflightBatch
	stored   bool           // the partition has a batch of it
	newest   int16          // the newest epoch stored
	zombie   *ProducerBatch // a batch of an older epoch, to deliver late
}

func producerStateRandom(t *testing.T, seed uint64, steps int) (seen map[string]int) {
	seen = map[string]int{}
	rng := rand.New(rand.NewPCG(seed, 99))
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	fs := vfs.NewMem()
	const dir = "/d/t-0"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		fail("%v", err)
	}
	s := NewProducerState(0)
	var (
		next   int64
		data   []byte  // the log's bytes
		starts []int64 // base offset of each batch in the log
		poss   []int   // its byte position in data
		log    []ProducerBatch
		stored = map[[3]int64]storedAt{} // (id, epoch, base sequence) → offsets
	)
	appendBatch := func(b ProducerBatch) {
		starts, poss = append(starts, next), append(poss, len(data))
		data = append(data, producerLog(t, next, []ProducerBatch{b})...)
		log = append(log, b)
		s.Update(b, next)
		next += int64(b.LastOffsetDelta) + 1
	}
	producers := []*producerModel{{id: 10}, {id: 11}, {id: 12}}
	// Producer 12 has written before, near the end of the sequence space:
	// its sequences wrap during the run.
	appendBatch(idemBatch(12, 0, math.MaxInt32-6, 2, 0))
	producers[2].nextSeq = math.MaxInt32 - 4
	producers[2].stored = true
	stored[[3]int64{12, 0, math.MaxInt32 - 6}] = storedAt{0, 1}

	for step := range steps {
		p := producers[rng.IntN(len(producers))]
		ts := int64(step)
		switch r := rng.IntN(100); {
		case r < 3: // a non-idempotent batch
			b := idemBatch(NoProducerID, -1, -1, int32(1+rng.IntN(3)), ts)
			if c, err := s.Check(b); err != nil || c.Duplicate {
				fail("non-idempotent batch: %+v, %v", c, err)
			}
			appendBatch(b)
		case r < 5: // a restart, maybe after a snapshot
			seen["restart"]++
			if rng.IntN(2) == 0 {
				seen["snapshot"]++
				if _, err := WriteProducerSnapshot(fs, dir, s); err != nil {
					fail("%v", err)
				}
			}
			got, err := loadProducerStateDir(fs, dir, 0, next)
			if err != nil {
				fail("%v", err)
			}
			i, _ := slices.BinarySearch(starts, got.EndOffset())
			from := len(data)
			if i < len(poss) {
				from = poss[i]
			}
			if n, err := got.ReplayBatches(data[from:]); err != nil || n != len(data)-from {
				fail("replay: %d of %d bytes, %v", n, len(data)-from, err)
			}
			if !reflect.DeepEqual(s.Producers(), got.Producers()) || s.EndOffset() != got.EndOffset() {
				fail("step %d: rebuilt state differs:\n%+v\nwant\n%+v", step, got, s)
			}
			s = got
		case r < 7 && len(p.inflight) == 0: // the producer bumps its epoch
			old := idemBatch(p.id, p.epoch, p.nextSeq, 1, ts)
			p.zombie = &old
			p.epoch++
			p.nextSeq = 0
		case r < 9 && p.zombie != nil && p.newest > p.zombie.Epoch: // a batch of an old epoch arrives late
			if _, err := s.Check(*p.zombie); !errors.Is(err, ErrProducerFenced) {
				fail("zombie %+v: %v, want fenced", *p.zombie, err)
			}
			p.zombie = nil
			seen["fenced"]++
		case r < 40 && len(p.inflight) < 5: // a new batch; 5: Kafka's max.in.flight.requests.per.connection
			n := int32(1 + rng.IntN(4))
			b := idemBatch(p.id, p.epoch, p.nextSeq, n, ts)
			p.nextSeq = incrementSequence(p.nextSeq, n)
			p.inflight = append(p.inflight, &inflightBatch{b: b, sends: 1 + rng.IntN(3)})
		default: // deliver one of the batches in flight, in any order
			if len(p.inflight) == 0 {
				continue
			}
			var live []*inflightBatch
			for _, g := range p.inflight {
				if g.sends > 0 {
					live = append(live, g)
				}
			}
			f := live[rng.IntN(len(live))]
			key := [3]int64{f.b.ProducerID, int64(f.b.Epoch), int64(f.b.BaseSequence)}
			prev, isStored := stored[key]
			// The next batch the partition expects from p: the oldest
			// not stored.
			var expected *inflightBatch
			for _, g := range p.inflight {
				if _, ok := stored[[3]int64{g.b.ProducerID, int64(g.b.Epoch), int64(g.b.BaseSequence)}]; !ok {
					expected = g
					break
				}
			}
			c, err := s.Check(f.b)
			switch {
			case isStored:
				if err != nil || !c.Duplicate || c.FirstOffset != prev.first || c.LastOffset != prev.last {
					fail("step %d: resend of %+v stored at %v: %+v, %v", step, f.b, prev, c, err)
				}
				seen["duplicate"]++
				if info, _ := s.Producer(p.id); info.Batches[0].FirstSeq == f.b.BaseSequence && len(info.Batches) == 5 {
					seen["duplicate of the 5th last"]++
				}
			case f == expected:
				if err != nil || c.Duplicate {
					fail("step %d: %+v is next: %+v, %v", step, f.b, c, err)
				}
				stored[key] = storedAt{next, next + int64(f.b.LastOffsetDelta)}
				appendBatch(f.b)
				p.stored, p.newest = true, max(p.newest, f.b.Epoch)
				seen["append"]++
				if f.b.LastSequence() < f.b.BaseSequence {
					seen["wrapped"]++
				}
			default:
				want := ErrOutOfOrderSequence
				if !p.stored {
					want = ErrUnknownProducerID
				}
				seen[map[error]string{ErrOutOfOrderSequence: "out of order", ErrUnknownProducerID: "unknown producer"}[want]]++
				if !errors.Is(err, want) || (p.stored && errors.Is(err, ErrUnknownProducerID)) {
					fail("step %d: %+v ahead of its turn: %+v, %v, want %v", step, f.b, c, err, want)
				}
				continue // refused: the producer sends it again later
			}
			f.sends--
			for len(p.inflight) > 0 && p.inflight[0].sends == 0 {
				p.inflight = p.inflight[1:]
			}
		}
	}

	// The log holds each producer's batches of each epoch once, in order.
	type pe struct {
		id    int64
		epoch int16
	}
	last := map[pe]int32{}
	counted := 0
	for _, b := range log {
		if !b.Idempotent() {
			continue
		}
		k := pe{b.ProducerID, b.Epoch}
		if l, ok := last[k]; ok && !inSequence(l, b.BaseSequence) {
			fail("log: %+v follows sequence %d", b, l)
		}
		if _, ok := last[k]; !ok && b.BaseSequence != 0 && b.ProducerID != 12 {
			fail("log: epoch %d of %d starts at %d", b.Epoch, b.ProducerID, b.BaseSequence)
		}
		last[k] = b.LastSequence()
		counted++
	}
	if counted != len(stored) {
		fail("log has %d idempotent batches, %d were accepted", counted, len(stored))
	}
	return seen
}
