package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// crashPoint injects no errors: once armed, it takes the image a crash
// would leave of a MemFS (torn writes included) just before the n-th
// operation that changes it.
type crashPoint struct {
	mu    sync.Mutex
	mem   *vfs.MemFS
	rng   *rand.Rand
	left  int // operations before the crash; < 0: disarmed
	image *vfs.MemFS
}

func (c *crashPoint) inject(op vfs.Op, _ string) error {
	switch op {
	case vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpRemove, vfs.OpRename, vfs.OpTruncate:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.left < 0 || c.image != nil:
	case c.left == 0:
		c.image = c.mem.CrashCloneWithTornWrites(c.rng)
	default:
		c.left--
	}
	return nil
}

// mrec is a record of the model: what was appended at an offset.
type mrec struct{ key, value []byte }

// TestCompactionAgainstModel runs random appends (batches of a few
// records, each uncompressed or compressed with a random codec; keys from
// a small set, tombstones, null keys), rolls, cleaner runs at a clock the test moves,
// reads, clean reopens, crashes, and crashes at a random instant inside a
// cleaner run, against a model: what was appended at each offset, and the
// latest offset of each key. After every step: every record read is the
// one appended at its offset, offsets increase, each key's latest value is
// there (a key whose latest record is a tombstone has that tombstone or
// nothing), records without a key all survive, and a read at any offset
// starts at the first surviving record at or after it. Now and then the log
// is settled (cleaned, DeleteRetention waited out, cleaned again): then the
// sealed segments hold each key once and no tombstone. Replay a failure
// with STRATA_SEED.
func TestCompactionAgainstModel(t *testing.T) {
	s := seed(t)
	runs, steps := 8, 250
	switch {
	case testing.Short():
		runs = 3
	case os.Getenv("STRATA_SOAK") != "":
		runs, steps = 200, 1000
	}
	var crashes, withCleaned, withSwap int
	defer func() {
		t.Logf("crashes inside cleaner runs: %d; leaving .cleaned files: %d; leaving .swap files: %d", crashes, withCleaned, withSwap)
		if !t.Failed() {
			require.Positive(t, crashes)
		}
	}()
	for run := range runs {
		rng := rand.New(rand.NewPCG(s, uint64(run)))
		cfg := TopicConfig{
			Cleanup:                []CleanupPolicy{CleanupCompact, CleanupCompactDelete}[rng.IntN(2)],
			RetentionTime:          -1,
			SegmentBytes:           int64(300 + rng.IntN(3000)),
			IndexIntervalBytes:     rng.IntN(500),
			MaxIndexBytes:          48 + 24*rng.IntN(20),
			FlushMessages:          1,
			DeleteRetention:        10 * time.Second,
			MinCleanableDirtyRatio: []float64{0.01, 0.3, 0.5}[rng.IntN(3)],
		}
		bufBytes := []int64{1 << 10, 4 << 10, 1 << 20}[rng.IntN(3)]
		nkeys := 3 + rng.IntN(40)
		t.Logf("run %d: %+v buffer %d keys %d", run, cfg, bufBytes, nkeys)

		mem := vfs.NewMem()
		cp := &crashPoint{mem: mem, rng: rand.New(rand.NewPCG(s, uint64(run)+1<<32)), left: -1}
		open := func() (*Broker, *Partition) {
			return compacted(t, vfs.WithErrors(mem, cp.inject), cfg, Config{CleanerBufferBytes: bufBytes})
		}
		b, p := open()
		var model []mrec
		latest := map[string]int64{}
		now := t0
		ts := t0
		var bd batch.Builder

		check := func(step int, what string) {
			t.Helper()
			msg := fmt.Sprintf("run %d step %d (%s)", run, step, what)
			require.EqualValues(t, len(model), p.EndOffset(), msg)
			require.Zero(t, p.StartOffset(), msg)
			var recs []Record
			for off := int64(0); off < p.EndOffset(); {
				got, err := p.Read(off, 1+rng.IntN(3000))
				require.NoError(t, err, msg)
				require.NotEmpty(t, got, "%s: read at %d", msg, off)
				for _, r := range got {
					require.Greater(t, r.Offset, off-1, msg)
					off = r.Offset + 1
					recs = append(recs, r)
				}
			}
			seen := map[string]int64{}
			nulls := 0
			for _, r := range recs {
				m := model[r.Offset]
				require.True(t, bytes.Equal(m.key, r.Key) && (m.key == nil) == (r.Key == nil), "%s: key at %d", msg, r.Offset)
				require.True(t, bytes.Equal(m.value, r.Value) && (m.value == nil) == (r.Value == nil), "%s: value at %d", msg, r.Offset)
				if r.Key == nil {
					nulls++
				} else {
					seen[string(r.Key)] = r.Offset
				}
			}
			wantNulls := 0
			for _, m := range model {
				if m.key == nil {
					wantNulls++
				}
			}
			require.Equal(t, wantNulls, nulls, "%s: records without a key", msg)
			for k, off := range latest {
				got, ok := seen[k]
				if model[off].value == nil && !ok {
					continue // a tombstone past its retention
				}
				require.True(t, ok, "%s: key %s lost (latest at %d)", msg, k, off)
				require.Equal(t, off, got, "%s: key %s: last record seen is not the latest", msg, k)
			}
			// Reads at random offsets start where the scan says.
			for range 5 {
				if len(model) == 0 {
					break
				}
				off := int64(rng.IntN(len(model)))
				got, err := p.Read(off, 1)
				require.NoError(t, err, msg)
				var want int64 = -1
				for _, r := range recs {
					if r.Offset >= off {
						want = r.Offset
						break
					}
				}
				if want < 0 {
					require.Empty(t, got, msg)
				} else {
					require.NotEmpty(t, got, "%s: read at %d", msg, off)
					require.Equal(t, want, got[0].Offset, "%s: read at %d", msg, off)
				}
			}
		}
		reopen := func(image *vfs.MemFS) {
			if image == nil {
				require.NoError(t, b.Close())
			} else {
				b.Close()
				mem = image
				cp.mem = image
			}
			b, p = open()
		}
		clean := func() int {
			passes, err := b.cleaner.run(now)
			require.NoError(t, err)
			require.Empty(t, b.cleaner.uncleanable)
			require.LessOrEqual(t, b.cleaner.maxMapBytes, bufBytes)
			return passes
		}
		for step := range steps {
			op := rng.IntN(100)
			switch {
			case op < 50: // append
				var recs []Record
				for range 1 + rng.IntN(5) {
					ts = ts.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
					r := Record{Timestamp: ts, Value: fmt.Appendf(nil, "v%d-%d", len(model)+len(recs), rng.IntN(1000))}
					switch x := rng.IntN(20); {
					case x == 0: // no key
					case x < 4:
						r.Key, r.Value = fmt.Appendf(nil, "k%d", rng.IntN(nkeys)), nil // tombstone
					default:
						r.Key = fmt.Appendf(nil, "k%d", rng.IntN(nkeys))
					}
					recs = append(recs, r)
				}
				// One batch, compressed with a random codec or not: the
				// log mixes codecs, and the cleaner rewrites each with its
				// own.
				bd.SetCompression(cleanerCodecs[rng.IntN(len(cleanerCodecs))])
				bd.Reset(recs[0].Timestamp.UnixMilli())
				for _, r := range recs {
					bd.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, nil)
				}
				_, _, err := p.AppendBatch(append([]byte(nil), bd.Bytes()...))
				require.NoError(t, err)
				for _, r := range recs {
					if r.Key != nil {
						latest[string(r.Key)] = int64(len(model))
					}
					model = append(model, mrec{key: r.Key, value: r.Value})
				}
			case op < 60:
				require.NoError(t, p.Roll())
			case op < 75: // clean
				now = now.Add(time.Duration(rng.IntN(6000)) * time.Millisecond)
				clean()
			case op < 83: // crash at a random instant of a cleaner run
				now = now.Add(time.Duration(rng.IntN(6000)) * time.Millisecond)
				require.NoError(t, p.Flush()) // nothing else writes meanwhile
				cp.mu.Lock()
				cp.left, cp.image = rng.IntN(80), nil
				cp.mu.Unlock()
				clean()
				cp.mu.Lock()
				image := cp.image
				cp.left, cp.image = -1, nil
				cp.mu.Unlock()
				if image != nil {
					crashes++
					names, err := image.ReadDir(p.dir)
					require.NoError(t, err)
					var c, sw bool
					for _, n := range names {
						c = c || strings.HasSuffix(n, segment.CleanedSuffix)
						sw = sw || strings.HasSuffix(n, segment.SwapSuffix)
					}
					if c {
						withCleaned++
					}
					if sw {
						withSwap++
					}
					reopen(image)
				}
			case op < 88:
				reopen(nil)
			case op < 92:
				reopen(mem.CrashCloneWithTornWrites(rng))
			case op < 95: // settle: every dirty byte cleaned, whatever the ratio
				p.editConfig(func(c *TopicConfig) { c.MinCleanableDirtyRatio = 1e-9 })
				require.NoError(t, p.Roll())
				for clean() > 0 {
				}
				now = now.Add(cfg.DeleteRetention + time.Millisecond)
				k := fmt.Appendf(nil, "k%d", rng.IntN(nkeys))
				_, err := p.Append(Record{Key: k, Value: []byte("settle")})
				require.NoError(t, err)
				latest[string(k)] = int64(len(model))
				model = append(model, mrec{key: k, value: []byte("settle")})
				require.NoError(t, p.Roll())
				for clean() > 0 {
				}
				p.editConfig(func(c *TopicConfig) { c.MinCleanableDirtyRatio = cfg.MinCleanableDirtyRatio })
				check(step, "settled")
				segs := *p.segs.Load()
				sealedEnd := segs[len(segs)-1].BaseOffset()
				keys := map[string]bool{}
				recs, err := p.Read(0, 1<<30)
				require.NoError(t, err)
				for _, r := range recs {
					if r.Offset >= sealedEnd || r.Key == nil {
						continue
					}
					require.False(t, keys[string(r.Key)], "run %d step %d: key %s twice in the cleaned log", run, step, r.Key)
					keys[string(r.Key)] = true
					require.NotNil(t, r.Value, "run %d step %d: tombstone of %s at %d past its retention", run, step, r.Key, r.Offset)
				}
			default:
				check(step, "read")
			}
			if step%10 == 0 {
				check(step, "periodic")
			}
		}
		check(steps, "end")
		require.NoError(t, b.Close())
	}
}
