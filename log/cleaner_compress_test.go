package log

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// cleanerCodecs are the codecs the cleaner's tests write, uncompressed
// first.
var cleanerCodecs = []int{batch.CompressionNone, batch.CompressionGzip, batch.CompressionSnappy, batch.CompressionLz4, batch.CompressionZstd}

// TestCompactionCompressed compacts, for each codec, a log of batches of a
// few records each, half of them compressed with that codec and half not,
// with tombstones, records without a key and an idempotent producer, and
// checks what Kafka's cleaner guarantees: each key's latest value (its
// tombstone within DeleteRetention) and every keyless record are there,
// with the offsets and timestamps they were appended with; every batch
// left is the original's (base and last offset, leader epoch, producer id,
// epoch and base sequence, attributes) with the original's codec if it
// kept records, and without compression if it kept none, which only the
// producer's last batch and the last batch of a segment may; after
// DeleteRetention the tombstones go; a crash and reopen changes nothing.
func TestCompactionCompressed(t *testing.T) {
	for _, codec := range cleanerCodecs[1:] {
		t.Run(batchCodecName(codec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(codec), 99))
			fs := vfs.NewMem()
			cfg := TopicConfig{SegmentBytes: 3000, DeleteRetention: time.Minute, MinCleanableDirtyRatio: 1e-9}
			b, p := compacted(t, fs, cfg, Config{})
			type appended struct {
				key, value []byte
				ts         int64
			}
			var model []appended
			latest := map[string]int64{}
			orig := map[int64]batch.Header{}
			var bd batch.Builder
			seq, lastPid := int32(0), int64(-1)
			for range 300 {
				c := batch.CompressionNone
				if rng.IntN(2) == 0 {
					c = codec
				}
				bd.SetCompression(c)
				ts := t0.UnixMilli() - int64(rng.IntN(10000))
				bd.Reset(ts)
				n := 1 + rng.IntN(8)
				pid := rng.IntN(4) == 0
				if pid {
					bd.SetProducer(7, 2, seq)
					seq += int32(n)
				}
				for range n {
					r := appended{ts: ts + int64(rng.IntN(2000)), value: fmt.Appendf(nil, "v%d-%s", len(model), make([]byte, rng.IntN(100)))}
					switch x := rng.IntN(20); {
					case x == 0: // no key
					case x < 3:
						r.key, r.value = fmt.Appendf(nil, "k%d", rng.IntN(15)), nil
					default:
						r.key = fmt.Appendf(nil, "k%d", rng.IntN(15))
					}
					bd.Append(r.ts, r.key, r.value, nil)
					if r.key != nil {
						latest[string(r.key)] = int64(len(model))
					}
					model = append(model, r)
				}
				raw := append([]byte(nil), bd.Bytes()...)
				base, _, err := p.AppendBatch(raw)
				require.NoError(t, err)
				h, err := batch.ParseHeader(raw)
				require.NoError(t, err)
				require.Equal(t, c, h.Compression())
				orig[base] = h
				if pid {
					lastPid = base
				}
			}
			_, err := p.Append(Record{Key: []byte("active"), Value: []byte("x")})
			require.NoError(t, err)
			model = append(model, appended{key: []byte("active"), value: []byte("x")})
			latest["active"] = int64(len(model) - 1)
			require.NoError(t, p.Roll())
			before := p.Size()

			check := func(what string, tombstones bool) {
				t.Helper()
				recs := scan(t, p)
				seen := map[string]bool{}
				keyless := 0
				for _, r := range recs {
					m := model[r.Offset]
					require.Equal(t, m.key, r.Key, "%s: key at %d", what, r.Offset)
					require.Equal(t, m.value, r.Value, "%s: value at %d", what, r.Offset)
					if m.ts != 0 {
						require.Equal(t, m.ts, r.Timestamp.UnixMilli(), "%s: timestamp at %d", what, r.Offset)
					}
					if r.Key == nil {
						keyless++
						continue
					}
					require.False(t, seen[string(r.Key)], "%s: key %s twice", what, r.Key)
					seen[string(r.Key)] = true
					require.Equal(t, latest[string(r.Key)], r.Offset, "%s: key %s is not its latest", what, r.Key)
				}
				for k, off := range latest {
					if model[off].value == nil && !tombstones {
						require.False(t, seen[k], "%s: tombstone of %s past DeleteRetention", what, k)
						continue
					}
					require.True(t, seen[k], "%s: key %s lost", what, k)
				}
				want := 0
				for _, m := range model {
					if m.key == nil {
						want++
					}
				}
				require.Equal(t, want, keyless, "%s: records without a key", what)

				segs := *p.segs.Load()
				segEnd := map[int64]bool{}
				for _, s := range segs {
					segEnd[s.NextOffset()] = true
				}
				raw, err := p.ReadBatches(0, 1<<30, segs[len(segs)-1].BaseOffset())
				require.NoError(t, err)
				sawPid := false
				require.NoError(t, batch.Batches(raw, func(_ []byte, h batch.Header) error {
					o, ok := orig[h.BaseOffset]
					if !ok {
						return nil // the record appended with Append
					}
					require.Equal(t, []int64{o.LastOffset(), int64(o.PartitionLeaderEpoch), o.ProducerID, int64(o.ProducerEpoch), int64(o.BaseSequence)},
						[]int64{h.LastOffset(), int64(h.PartitionLeaderEpoch), h.ProducerID, int64(h.ProducerEpoch), int64(h.BaseSequence)}, "%s: batch at %d", what, h.BaseOffset)
					attrs := o.Attributes
					if h.NumRecords == 0 {
						attrs &^= 0x07 // an emptied batch has no payload to compress
						require.True(t, h.BaseOffset == lastPid || segEnd[h.NextOffset()], "%s: emptied batch at %d is neither the producer's last nor a segment's", what, h.BaseOffset)
					}
					require.Equal(t, attrs, h.Attributes&^0x40, "%s: attributes of batch at %d", what, h.BaseOffset)
					sawPid = sawPid || h.BaseOffset == lastPid
					return nil
				}))
				require.True(t, sawPid, "%s: the producer's last batch is kept", what)
			}

			passes, err := b.cleaner.run(t0)
			require.NoError(t, err)
			require.Positive(t, passes)
			require.Empty(t, b.cleaner.uncleanable)
			require.Less(t, p.Size(), before/3, "most records were superseded")
			check("cleaned", true)

			// Past DeleteRetention a new pass drops the tombstones.
			_, err = p.Append(Record{Key: []byte("k0"), Value: []byte("late")})
			require.NoError(t, err)
			model = append(model, appended{key: []byte("k0"), value: []byte("late")})
			latest["k0"] = int64(len(model) - 1)
			require.NoError(t, p.Roll())
			passes, err = b.cleaner.run(t0.Add(2 * time.Minute))
			require.NoError(t, err)
			require.Positive(t, passes)
			require.Empty(t, b.cleaner.uncleanable)
			check("past DeleteRetention", false)

			// A crash (what was synced survives) and a reopen.
			b.Close()
			b, p = compacted(t, fs.CrashClone(), cfg, Config{})
			check("reopened after a crash", false)
			require.NoError(t, b.Close())
		})
	}
}

func batchCodecName(c int) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}
