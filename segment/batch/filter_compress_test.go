package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// buildCompressed encodes recs as build does, compressed with codec, with
// the producer fields, base offset and leader epoch given.
func buildCompressed(recs []rec, codec int, pid int64, epoch int16, seq int32, base int64, leaderEpoch int32) []byte {
	var bd Builder
	bd.SetCompression(codec)
	if len(recs) > 0 {
		bd.Reset(recs[0].Timestamp)
	} else {
		bd.Reset(0)
	}
	if pid >= 0 {
		bd.SetProducer(pid, epoch, seq)
	}
	for _, r := range recs {
		bd.Append(r.Timestamp, r.Key, r.Value, r.Headers)
	}
	b := clone(bd.Bytes())
	SetBaseOffset(b, base)
	SetPartitionLeaderEpoch(b, leaderEpoch)
	return b
}

// TestFilterCompressed filters random compressed batches of each codec with
// random keep sets (all, none, some), with and without a delete horizon, as
// Kafka's MemoryRecords.filterTo does: the copy validates and holds exactly
// the kept records, unchanged; base offset, last offset, leader epoch,
// producer id, epoch and base sequence are the original's; a copy that
// keeps some records has the original's codec, one that keeps none is an
// uncompressed empty batch, and one that keeps all and needs no horizon is
// the original bytes.
func TestFilterCompressed(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 17))
	var f Filter
	for _, codec := range codecs {
		t.Run(codecName(codec), func(t *testing.T) {
			for iter := range 300 {
				n := 1 + rng.IntN(30)
				if iter%50 == 0 {
					n = 2000 // past a window and an lz4 block
				}
				base := int64(1_700_000_000_000)
				var recs []rec
				for i := range n {
					r := rec{Offset: int64(1000 + i), Timestamp: base + int64(rng.IntN(100_000)) - 50_000,
						Key: []byte(fmt.Sprint("k", rng.IntN(5)))}
					if rng.IntN(4) > 0 {
						r.Value = bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(200))
					}
					if rng.IntN(4) == 0 {
						r.Headers = []RecordHeader{{Key: "h", Value: []byte("x")}}
					}
					recs = append(recs, r)
				}
				pid, epoch, seq := int64(-1), int16(-1), int32(-1)
				if rng.IntN(2) == 0 {
					pid, epoch, seq = int64(rng.IntN(100)), int16(rng.IntN(5)), int32(rng.IntN(1000))
				}
				b := buildCompressed(recs, codec, pid, epoch, seq, 1000, 7)
				h, err := Validate(b)
				if err != nil {
					t.Fatal(err)
				}
				horizon := int64(-1)
				if rng.IntN(2) == 0 {
					horizon = base + 86_400_000
				}
				mode := rng.IntN(3) // 0: keep all, 1: none, 2: some
				var want []rec
				keepTombstone := false
				i := 0
				out, kept, err := f.Apply([]byte("prefix"), b, h, horizon, func(r *Record) bool {
					k := mode == 0 || mode == 2 && rng.IntN(2) == 0
					if r.Offset != recs[i].Offset || r.Timestamp != recs[i].Timestamp || !sameBytes(r.Key, recs[i].Key) || !sameBytes(r.Value, recs[i].Value) {
						t.Fatalf("iter %d: keep sees %+v, record %d is %v", iter, r, i, recs[i])
					}
					if k {
						want = append(want, recs[i])
						keepTombstone = keepTombstone || r.Value == nil
					}
					i++
					return k
				})
				if err != nil {
					t.Fatal(err)
				}
				if i != n || string(out[:6]) != "prefix" || kept != len(want) {
					t.Fatalf("iter %d: saw %d of %d, prefix %q, kept %d want %d", iter, i, n, out[:6], kept, len(want))
				}
				out = out[6:]
				oh, got := mustDecode(t, out)
				if err := equalRecs(got, want); err != nil {
					t.Fatalf("iter %d: %v", iter, err)
				}
				if oh.BaseOffset != h.BaseOffset || oh.LastOffset() != h.LastOffset() || oh.PartitionLeaderEpoch != 7 ||
					oh.ProducerID != pid || oh.ProducerEpoch != epoch || oh.BaseSequence != seq || len(out) != oh.Size() {
					t.Fatalf("iter %d: header %+v, original %+v", iter, oh, h)
				}
				wantHz := horizon >= 0 && keepTombstone
				hz, ok := oh.DeleteHorizon()
				if ok != wantHz || ok && hz != horizon {
					t.Fatalf("iter %d: delete horizon %d %v, want %v", iter, hz, ok, wantHz)
				}
				switch {
				case kept == 0:
					if oh.Compression() != CompressionNone || len(out) != HeaderSize {
						t.Fatalf("iter %d: an emptied batch is %s, %d bytes", iter, codecName(oh.Compression()), len(out))
					}
				case kept == n && !wantHz:
					if !bytes.Equal(out, b) {
						t.Fatalf("iter %d: a batch that keeps everything was rewritten", iter)
					}
				default:
					if oh.Compression() != codec {
						t.Fatalf("iter %d: codec %s, want %s", iter, codecName(oh.Compression()), codecName(codec))
					}
					if oh.Attributes&^attrDeleteHorizon != h.Attributes {
						t.Fatalf("iter %d: attributes %#x, original %#x", iter, oh.Attributes, h.Attributes)
					}
				}
				// Filtering the copy again keeping everything changes nothing
				// (a delete horizon once set stays).
				if kept > 0 {
					h2 := int64(-1)
					if ok {
						h2 = horizon + 5
					}
					again, n2, err := f.Apply(nil, out, oh, h2, func(*Record) bool { return true })
					if err != nil || n2 != kept || !bytes.Equal(again, out) {
						t.Fatalf("iter %d: refilter: %v, %d kept, same bytes %v", iter, err, n2, bytes.Equal(again, out))
					}
				}
			}
		})
	}
}

// TestFilterCompressedCorrupt: a compressed batch whose payload does not
// decompress, or holds other records than its header says, is ErrCorrupt,
// keep is never called and dst comes back as it was.
func TestFilterCompressedCorrupt(t *testing.T) {
	var f Filter
	for _, codec := range codecs {
		recs := []rec{{Offset: 0, Timestamp: 5, Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 100)}, {Offset: 1, Timestamp: 6, Key: []byte("k")}}
		good := buildCompressed(recs, codec, -1, -1, -1, 0, 0)
		for _, damage := range []string{"payload", "count"} {
			b := clone(good)
			switch damage {
			case "payload":
				for i := HeaderSize + 4; i < len(b); i++ {
					b[i] ^= 0x5a
				}
			case "count":
				b[60]-- // NumRecords, last byte: 1, the payload holds 2
			}
			fixCRC(b)
			h, err := Check(b)
			if err != nil {
				t.Fatal(err)
			}
			called := false
			out, kept, err := f.Apply([]byte("dst"), b, h, -1, func(*Record) bool { called = true; return true })
			if !errors.Is(err, ErrCorrupt) || string(out) != "dst" || kept != 0 {
				t.Fatalf("%s, %s damaged: err %v, dst %q, kept %d", codecName(codec), damage, err, out, kept)
			}
			if called {
				t.Fatalf("%s, %s damaged: keep saw a record", codecName(codec), damage)
			}
		}
	}
}
