package log

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestRandomOpsAgainstModel runs random sequences of appends, reads, rolls,
// retention, flushes, clean reopens and crashes against a trivial model: a
// slice of values and a start offset. Some appends are idempotent producers'
// batches, some of them sent again (duplicates answered with their first
// offsets, stale or fenced ones refused), checked against the list of the
// producers' batches in the log. Replay a failure with STRATA_SEED.
func TestRandomOpsAgainstModel(t *testing.T) {
	s := seed(t)
	runs, steps := 12, 300
	switch {
	case testing.Short():
		runs = 4
	case os.Getenv("STRATA_SOAK") != "":
		runs, steps = 300, 1000
	}
	for run := 0; run < runs; run++ {
		rng := rand.New(rand.NewPCG(s, uint64(run)))
		fs := vfs.NewMem()
		cfg := TopicConfig{
			SegmentBytes:       int64(500 + rng.IntN(4000)),
			IndexIntervalBytes: rng.IntN(1000),
			MaxIndexBytes:      24 + 12*rng.IntN(40),
			RetentionTime:      -1,
			FlushMessages:      []int64{0, 1, 4}[rng.IntN(3)],
			// The model's clock is in 2001: no producer expires.
			ProducerIDExpiration: 100 * 365 * 24 * time.Hour,
		}
		b, err := Open("/d", Config{FS: fs})
		require.NoError(t, err)
		p := createT(t, b, "m", cfg)

		var model [][]byte // model[i] is the value at offset i
		start, durable := 0, 0
		ts := time.UnixMilli(1_000_000_000)
		// The producers' batches in the log, in order (those below the
		// start too: producers outlive their records).
		var idem []modelBatch
		checkProducers := func(step int) {
			t.Helper()
			ps := p.producers()
			for pid := int64(0); pid < modelProducers; pid++ {
				w := producerWindow(idem, pid)
				info, ok := ps.Producer(pid)
				require.Equal(t, len(w) > 0, ok, "run %d step %d: producer %d known", run, step, pid)
				if !ok {
					continue
				}
				require.Len(t, info.Batches, len(w), "run %d step %d: producer %d", run, step, pid)
				for i, mb := range w {
					got := info.Batches[i]
					require.Equal(t, [3]int64{int64(mb.seq), int64(mb.seq) + int64(mb.n) - 1, mb.base + int64(mb.n) - 1},
						[3]int64{int64(got.FirstSeq), int64(got.LastSeq), got.LastOffset}, "run %d step %d: producer %d batch %d", run, step, pid, i)
				}
				require.Equal(t, w[len(w)-1].epoch, info.Epoch)
			}
		}
		reopen := func(crash bool) {
			target := fs
			if crash {
				target = fs.CrashCloneWithTornWrites(rng)
			}
			b.Close()
			fs = target
			b, err = Open("/d", Config{FS: fs, Logger: testLogger(t)})
			require.NoError(t, err, "run %d", run)
			p, err = b.Partition("m", 0)
			require.NoError(t, err)
			end := int(p.EndOffset())
			require.GreaterOrEqual(t, end, durable, "run %d: durable records lost", run)
			require.LessOrEqual(t, end, len(model))
			model = model[:end]
			durable = end
			start = int(p.StartOffset())
			for len(idem) > 0 && idem[len(idem)-1].base >= int64(end) {
				idem = idem[:len(idem)-1]
			}
			checkProducers(-1)
		}
		idemBatch := func(mb modelBatch) []byte {
			var bd batch.Builder
			bd.Reset(ts.UnixMilli())
			bd.SetProducer(mb.pid, mb.epoch, mb.seq)
			for i := 0; i < mb.n; i++ {
				bd.Append(ts.UnixMilli(), nil, modelIdemValue(mb, i), nil)
			}
			return bytes.Clone(bd.Bytes())
		}
		for step := 0; step < steps; step++ {
			op := rng.IntN(100)
			if testing.Verbose() {
				var bases []int64
				for _, sg := range *p.segs.Load() {
					bases = append(bases, sg.BaseOffset())
				}
				t.Logf("run %d step %d op %d end %d start %d durable %d segs %v", run, step, op, p.EndOffset(), p.StartOffset(), durable, bases)
			}
			switch {
			case op < 45 && op >= 35: // a producer's next batch
				pid := rng.Int64N(modelProducers)
				mb := modelBatch{pid: pid, n: 1 + rng.IntN(4)}
				if w := producerWindow(idem, pid); len(w) > 0 {
					last := w[len(w)-1]
					mb.epoch, mb.seq = last.epoch, last.seq+int32(last.n)
				}
				if rng.IntN(8) == 0 { // a new epoch
					mb.epoch, mb.seq = mb.epoch+1, 0
				}
				ts = ts.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
				base, next, err := p.AppendBatch(idemBatch(mb))
				require.NoError(t, err, "run %d step %d", run, step)
				require.EqualValues(t, len(model), base)
				require.EqualValues(t, len(model)+mb.n, next)
				mb.base = base
				idem = append(idem, mb)
				for i := 0; i < mb.n; i++ {
					model = append(model, modelIdemValue(mb, i))
				}
				if cfg.FlushMessages == 1 {
					durable = len(model)
				}
			case op < 55 && op >= 45: // a producer's batch sent again
				pid := rng.Int64N(modelProducers)
				w := producerWindow(idem, pid)
				if len(w) == 0 {
					break
				}
				k := rng.IntN(len(w) + 1)
				var err error
				switch {
				case k < len(w): // a duplicate
					var base, next int64
					base, next, err = p.AppendBatch(idemBatch(w[k]))
					require.NoError(t, err, "run %d step %d", run, step)
					require.Equal(t, w[k].base, base)
					require.Equal(t, w[k].base+int64(w[k].n), next)
				case len(w) == 5 && w[0].seq > 0: // older than the window
					old := modelBatch{pid: pid, epoch: w[0].epoch, seq: w[0].seq - 1, n: 1}
					_, _, err = p.AppendBatch(idemBatch(old))
					require.ErrorIs(t, err, ErrOutOfOrderSequence, "run %d step %d", run, step)
				case w[0].epoch > 0: // fenced
					old := modelBatch{pid: pid, epoch: w[0].epoch - 1, seq: w[0].seq, n: w[0].n}
					_, _, err = p.AppendBatch(idemBatch(old))
					require.ErrorIs(t, err, ErrProducerFenced, "run %d step %d", run, step)
				}
			case op < 35: // append
				n := 1 + rng.IntN(6)
				recs := make([]Record, n)
				for i := range recs {
					ts = ts.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
					v := bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(200))
					recs[i] = Record{Value: v, Timestamp: ts}
				}
				off, err := p.Append(recs...)
				require.NoError(t, err)
				require.EqualValues(t, len(model), off)
				for _, r := range recs {
					model = append(model, r.Value)
				}
				if cfg.FlushMessages == 1 {
					durable = len(model)
				}
			case op < 80: // read
				from := start + rng.IntN(len(model)-start+1)
				max := 1 + rng.IntN(2000)
				recs, err := p.Read(int64(from), max)
				require.NoError(t, err)
				if from < len(model) && len(recs) == 0 {
					for _, sg := range *p.segs.Load() {
						t.Logf("segment base %d next %d size %d", sg.BaseOffset(), sg.NextOffset(), sg.Size())
					}
					t.Fatalf("run %d step %d: read at %d (max %d) returned nothing; end %d", run, step, from, max, p.EndOffset())
				}
				for i, r := range recs {
					require.EqualValues(t, from+i, r.Offset)
					require.Equal(t, model[from+i], r.Value, "run %d step %d offset %d", run, step, from+i)
				}
				if start > 0 {
					_, err := p.Read(int64(start-1), max)
					require.ErrorIs(t, err, ErrOffsetOutOfRange)
				}
			case op < 85:
				require.NoError(t, p.Roll())
			case op < 89: // retention by time, up to a random point in the past
				cut := ts.Add(-time.Duration(rng.IntN(200)) * time.Second)
				p.editConfig(func(c *TopicConfig) { c.RetentionTime = time.Until(cut) * -1 })
				_, err := p.enforceRetention(time.Now())
				require.NoError(t, err)
				p.editConfig(func(c *TopicConfig) { c.RetentionTime = -1 })
				start = int(p.StartOffset())
			case op < 92:
				require.NoError(t, p.Flush())
				durable = len(model)
			case op < 96:
				reopen(false)
			default:
				reopen(true)
			}
			require.EqualValues(t, len(model), p.EndOffset(), "run %d step %d", run, step)
			require.EqualValues(t, start, p.StartOffset(), "run %d step %d", run, step)
			if step%25 == 0 {
				checkProducers(step)
			}
		}
		require.NoError(t, b.Close())
	}
}

// The idempotent producers of TestRandomOpsAgainstModel.
const modelProducers = 3

// modelBatch is a producer's batch in TestRandomOpsAgainstModel's model.
type modelBatch struct {
	pid   int64
	epoch int16
	seq   int32
	n     int
	base  int64
}

func modelIdemValue(mb modelBatch, i int) []byte {
	return []byte(fmt.Sprintf("p%d-e%d-s%d", mb.pid, mb.epoch, int(mb.seq)+i))
}

// producerWindow is what the partition must know of producer pid: its last
// 5 batches in its latest epoch, oldest first.
func producerWindow(idem []modelBatch, pid int64) []modelBatch {
	var w []modelBatch
	for i := len(idem) - 1; i >= 0 && len(w) < 5; i-- {
		if mb := idem[i]; mb.pid == pid {
			if len(w) > 0 && mb.epoch != w[0].epoch {
				break
			}
			w = append([]modelBatch{mb}, w...)
		}
	}
	return w
}

func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// mBatch is a batch of the follower model: its base offset, record count
// and leader epoch.
type mBatch struct {
	base  int64
	n     int
	epoch int32
}

// encodeFollowerBatch builds a batch with its offsets and epoch set, as a
// follower receives it from its leader.
func encodeFollowerBatch(base int64, epoch int32, ts int64, vals [][]byte) []byte {
	var bd batch.Builder
	bd.Reset(ts)
	for _, v := range vals {
		bd.Append(ts, nil, v, nil)
	}
	b := bytes.Clone(bd.Bytes())
	batch.SetBaseOffset(b, base)
	batch.SetPartitionLeaderEpoch(b, epoch)
	return b
}

// TestReplicaOpsAgainstModel runs random sequences of leader appends,
// follower appends (AppendAsFollower), leader-epoch changes, TruncateTo,
// TruncateFullyAndStartAt, high-watermark moves, reads, flushes, clean
// reopens, crashes, and crashes at a random file-system operation inside a
// truncation, on a cluster-style partition (its high watermark its own)
// against a model: the values and batches of the log, the high watermark
// and what is durable. After every step the epoch cache must describe the
// log's batches. Replay a failure with STRATA_SEED.
func TestReplicaOpsAgainstModel(t *testing.T) {
	s := seed(t)
	runs, steps := 10, 250
	switch {
	case testing.Short():
		runs = 3
	case os.Getenv("STRATA_SOAK") != "":
		runs, steps = 300, 1000
	}
	for run := 0; run < runs; run++ {
		rng := rand.New(rand.NewPCG(s, uint64(run)))
		mem := vfs.NewMem()
		efs, hook := injectable(mem)
		cfg := TopicConfig{
			SegmentBytes:       int64(400 + rng.IntN(3000)),
			IndexIntervalBytes: rng.IntN(800),
			MaxIndexBytes:      24 + 12*rng.IntN(40),
			RetentionTime:      -1,
			FlushMessages:      []int64{0, 1, 5}[rng.IntN(3)],
		}
		st, err := OpenStore("/d", StoreConfig{FS: efs, Logger: testLogger(t)})
		require.NoError(t, err)
		p, err := st.CreatePartition("r", 0, cfg)
		require.NoError(t, err)

		var (
			vals    [][]byte // vals[i-start] is the value at offset i
			batches []mBatch
			start   int64
			hw      int64
			durable int64 // offsets below it survive a crash
			uniq    int
			ts      = int64(1_000_000)
		)
		end := func() int64 { return start + int64(len(vals)) }
		newVals := func() [][]byte {
			vs := make([][]byte, 1+rng.IntN(5))
			for i := range vs {
				uniq++
				vs[i] = fmt.Appendf(nil, "%d:%s", uniq, bytes.Repeat([]byte{'x'}, rng.IntN(120)))
			}
			return vs
		}
		// cutModel cuts the model at off, which is a batch boundary.
		cutModel := func(off int64) {
			k := len(batches)
			for k > 0 && batches[k-1].base >= off {
				k--
			}
			batches = batches[:k]
			vals = vals[:off-start]
			hw = min(hw, off)
			durable = min(durable, off)
		}
		// boundary is where TruncateTo(off) cuts: the base of the batch
		// holding off.
		boundary := func(off int64) int64 {
			if off >= end() {
				return end()
			}
			for _, b := range batches {
				if off < b.base+int64(b.n) {
					return b.base
				}
			}
			return end()
		}
		check := func(where string) {
			require.Equal(t, end(), p.EndOffset(), where)
			require.Equal(t, start, p.StartOffset(), where)
			require.Equal(t, hw, p.HighWatermark(), where)
			c := epochCache(p.EpochEntries())
			require.True(t, c.valid(), "%s: epochs %v", where, c)
			if l, ok := c.latest(); ok {
				require.LessOrEqual(t, l.StartOffset, end(), where)
			}
			// The cache describes the batches.
			for i, b := range batches {
				e, ok := c.epochForOffset(b.base)
				require.True(t, ok, "%s: batch at %d", where, b.base)
				require.Equal(t, b.epoch, e, "%s: batch at %d", where, b.base)
				wantEnd := end()
				for _, later := range batches[i+1:] {
					if later.epoch > b.epoch {
						wantEnd = later.base
						break
					}
				}
				ep, eo := p.EndOffsetForEpoch(b.epoch)
				require.Equal(t, b.epoch, ep, "%s: end offset for epoch %d", where, b.epoch)
				require.Equal(t, wantEnd, eo, "%s: end offset for epoch %d", where, b.epoch)
			}
		}
		reopen := func(fs *vfs.MemFS, crashed bool, where string) {
			mem = fs
			efs, hook = injectable(mem)
			st, err = OpenStore("/d", StoreConfig{FS: efs, Logger: testLogger(t)})
			require.NoError(t, err, where)
			p, err = st.OpenPartition("r", 0, cfg)
			require.NoError(t, err, where)
			e := p.EndOffset()
			require.GreaterOrEqual(t, e, durable, "%s: durable records lost", where)
			require.LessOrEqual(t, e, end(), "%s: records appeared", where)
			require.Equal(t, boundary(e), e, "%s: the log ends on a batch boundary", where)
			if crashed {
				// The checkpointed high watermark may be older.
				require.LessOrEqual(t, p.HighWatermark(), min(hw, e), where)
				hw = p.HighWatermark()
			}
			cutModel(e)
			durable = e
		}
		for step := 0; step < steps; step++ {
			op := rng.IntN(100)
			where := fmt.Sprintf("run %d step %d op %d", run, step, op)
			if testing.Verbose() {
				t.Logf("%s: start %d end %d hw %d durable %d epochs %v", where, start, end(), hw, durable, p.EpochEntries())
			}
			switch {
			case op < 25: // leader append
				vs := newVals()
				recs := make([]Record, len(vs))
				for i, v := range vs {
					recs[i] = Record{Value: v, Timestamp: time.UnixMilli(ts)}
				}
				off, err := p.Append(recs...)
				require.NoError(t, err, where)
				require.Equal(t, end(), off, where)
				batches = append(batches, mBatch{base: off, n: len(vs), epoch: p.LeaderEpoch()})
				vals = append(vals, vs...)
			case op < 45: // follower append of one or more batches
				var raw []byte
				base := end()
				e := p.LeaderEpoch()
				if l, ok := epochCache(p.EpochEntries()).latest(); ok && l.Epoch > e {
					e = l.Epoch
				}
				for range 1 + rng.IntN(3) {
					e += int32(rng.IntN(4) / 3)
					vs := newVals()
					raw = append(raw, encodeFollowerBatch(base, e, ts, vs)...)
					batches = append(batches, mBatch{base: base, n: len(vs), epoch: e})
					vals = append(vals, vs...)
					base += int64(len(vs))
				}
				first, next, err := p.AppendAsFollower(raw)
				require.NoError(t, err, where)
				require.Equal(t, end(), next, where)
				require.Less(t, first, next, where)
			case op < 50:
				require.NoError(t, p.SetLeaderEpoch(p.LeaderEpoch()+int32(rng.IntN(3))), where)
			case op < 60: // high watermark
				to := start + rng.Int64N(int64(len(vals))+3)
				got, err := p.SetHighWatermark(to)
				require.NoError(t, err, where)
				hw = max(hw, min(to, end()))
				require.Equal(t, hw, got, where)
			case op < 68: // truncate
				to := start + rng.Int64N(int64(len(vals))+3)
				if rng.IntN(10) == 0 {
					to = max(start-1-rng.Int64N(3), 0) // below the first segment: fully
				}
				if to < start {
					require.NoError(t, p.TruncateTo(to), where)
					start, vals, batches, hw, durable = to, nil, nil, to, to
				} else {
					require.NoError(t, p.TruncateTo(to), where)
					cutModel(boundary(to))
				}
			case op < 70:
				to := end() + rng.Int64N(50)
				require.NoError(t, p.TruncateFullyAndStartAt(to), where)
				start, vals, batches, hw, durable = to, nil, nil, to, to
			case op < 84: // read below the high watermark, and the raw batches to the end
				from := start + rng.Int64N(int64(len(vals))+1)
				recs, err := p.Read(from, 1+rng.IntN(3000))
				require.NoError(t, err, where)
				if from < hw {
					require.NotEmpty(t, recs, where)
				}
				for i, r := range recs {
					require.Less(t, r.Offset, hw, where)
					require.Equal(t, from+int64(i), r.Offset, where)
					require.Equal(t, vals[r.Offset-start], r.Value, "%s: offset %d", where, r.Offset)
				}
				raw, err := p.ReadBatches(from, 1<<20, p.EndOffset())
				require.NoError(t, err, where)
				all, err := DecodeRecords(raw)
				require.NoError(t, err, where)
				for _, r := range all {
					require.Equal(t, vals[r.Offset-start], r.Value, "%s: offset %d", where, r.Offset)
				}
			case op < 88:
				require.NoError(t, p.Flush(), where)
				durable = end()
			case op < 92:
				require.NoError(t, st.Close(), where)
				reopen(mem, false, where)
			case op < 96:
				crashed := mem.CrashCloneWithTornWrites(rng)
				st.Close()
				reopen(crashed, true, where)
			default: // a crash at a random operation inside a truncation
				to := start + rng.Int64N(int64(len(vals))+1)
				cut := boundary(to)
				var crashed *vfs.MemFS
				// The background loop is held off: the crash point must be
				// the same when the seed is replayed.
				st.roundMu.Lock()
				hook.set(crashAtOp(mem, rng.IntN(12), &crashed, rng))
				err := p.TruncateTo(to)
				hook.set(nil)
				st.roundMu.Unlock()
				if crashed == nil {
					require.NoError(t, err, where)
					cutModel(cut)
					break
				}
				st.Close()
				// The reopen checks that the log is a prefix of the model
				// that kept what was durable below the cut; past the cut,
				// the cut had not happened, so nothing durable was lost.
				oldDurable := durable
				durable = min(durable, cut)
				reopen(crashed, true, where)
				if e := p.EndOffset(); e > cut {
					require.GreaterOrEqual(t, e, oldDurable, "%s: a crash before the cut loses nothing durable", where)
				}
			}
			check(where)
		}
		require.NoError(t, st.Close())
	}
}
