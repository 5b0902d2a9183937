package log

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestRandomOpsAgainstModel runs random sequences of appends, reads, rolls,
// retention, flushes, clean reopens and crashes against a trivial model: a
// slice of values and a start offset. Replay a failure with STRATA_SEED.
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
		}
		b, err := Open("/d", Config{FS: fs})
		require.NoError(t, err)
		p := createT(t, b, "m", cfg)

		var model [][]byte // model[i] is the value at offset i
		start, durable := 0, 0
		ts := time.UnixMilli(1_000_000_000)
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
			case op < 55: // append
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
				p.cfg.RetentionTime = time.Until(cut) * -1
				_, err := p.enforceRetention(time.Now())
				require.NoError(t, err)
				p.cfg.RetentionTime = -1
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
		}
		require.NoError(t, b.Close())
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
