package batch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFilterKeepsOffsetsAndTimestamps filters random batches with random
// keep sets, with and without a delete horizon, and checks that the copy
// validates and holds exactly the kept records, unchanged (offsets,
// timestamps, keys, values, headers), and that the batch still ends where it
// ended.
func TestFilterKeepsOffsetsAndTimestamps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 13))
	var f Filter
	for iter := range 500 {
		var recs []rec
		n := rng.IntN(20)
		base := int64(1_700_000_000_000)
		for i := range n {
			r := rec{Offset: int64(i), Timestamp: base + int64(rng.IntN(100_000)) - 50_000, Key: []byte(fmt.Sprint("k", rng.IntN(5)))}
			if rng.IntN(3) > 0 {
				r.Value = []byte(fmt.Sprint("v", i))
			}
			if rng.IntN(4) == 0 {
				r.Headers = []RecordHeader{{Key: "h", Value: []byte("x")}}
			}
			recs = append(recs, r)
		}
		b := build(recs)
		SetBaseOffset(b, 1000)
		h, err := Check(b)
		if err != nil {
			t.Fatal(err)
		}
		horizon := int64(-1)
		if iter%2 == 0 {
			horizon = base + 86_400_000
		}
		var want []rec
		keepTombstone := false
		out, kept, err := f.Apply([]byte("prefix"), b, h, horizon, func(r *Record) bool {
			k := rng.IntN(2) == 0
			if k {
				want = append(want, rec{Offset: r.Offset, Timestamp: r.Timestamp, Key: clone(r.Key), Value: clone(r.Value)})
				keepTombstone = keepTombstone || r.Value == nil
			}
			return k
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(out[:6]) != "prefix" || kept != len(want) {
			t.Fatalf("iter %d: prefix %q kept %d want %d", iter, out[:6], kept, len(want))
		}
		// Headers are not shown to keep: take them from the originals.
		for i := range want {
			want[i].Headers = recs[want[i].Offset-1000].Headers
		}
		oh, got := mustDecode(t, out[6:])
		if err := equalRecs(got, want); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if oh.BaseOffset != h.BaseOffset || oh.LastOffset() != h.LastOffset() || oh.ProducerID != h.ProducerID {
			t.Fatalf("iter %d: header %+v, original %+v", iter, oh, h)
		}
		hz, ok := oh.DeleteHorizon()
		if wantHz := horizon >= 0 && keepTombstone; ok != wantHz || (ok && hz != horizon) {
			t.Fatalf("iter %d: delete horizon %d %v, want %v", iter, hz, ok, wantHz)
		}
		// A second filter keeps the horizon it found.
		if ok {
			out2, _, err := f.Apply(nil, out[6:], oh, horizon+5, func(*Record) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			h2, got2 := mustDecode(t, out2)
			if hz2, _ := h2.DeleteHorizon(); hz2 != horizon || equalRecs(got2, want) != nil {
				t.Fatalf("iter %d: refilter changed the batch: horizon %d", iter, hz2)
			}
		}
	}
}

func TestFilterRefusesBadInput(t *testing.T) {
	var f Filter
	b := build([]rec{{Timestamp: 5, Key: []byte("k"), Value: []byte("v")}})
	h, _ := Check(b)
	b[HeaderSize] = 0x7e // a record length (63) that runs past the batch
	if _, _, err := f.Apply(nil, b, h, -1, func(*Record) bool { return true }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("malformed record: %v", err)
	}
	if _, _, err := f.Apply(nil, b[:20], h, -1, func(*Record) bool { return true }); !errors.Is(err, ErrShort) {
		t.Fatalf("short batch: %v", err)
	}
}

// FuzzFilter: on any bytes that pass Check, Apply never panics, and what it
// returns without error validates and holds the records it kept.
func FuzzFilter(f *testing.F) {
	f.Add(build([]rec{{Timestamp: 5, Key: []byte("k"), Value: []byte("v")}, {Timestamp: 9, Key: []byte("k")}}), uint8(1), int64(100))
	f.Add(build(nil), uint8(0), int64(-1))
	for _, codec := range codecs {
		recs := []rec{{Timestamp: 5, Key: []byte("k"), Value: []byte("v")}, {Timestamp: 9, Key: []byte("k")}, {Timestamp: 7, Key: []byte("j"), Value: []byte("w")}}
		f.Add(buildCompressed(recs, codec, 3, 1, 0, 0, 0), uint8(5), int64(100))
		f.Add(buildCompressed(recs, codec, -1, -1, -1, 0, 0), uint8(0), int64(-1))
	}
	f.Fuzz(func(t *testing.T, b []byte, mask uint8, horizon int64) {
		h, err := Check(b)
		if err != nil {
			return
		}
		var f Filter
		i := 0
		kept := 0
		out, n, err := f.Apply(nil, b, h, horizon, func(*Record) bool {
			k := mask&(1<<(i%8)) != 0
			i++
			if k {
				kept++
			}
			return k
		})
		if err != nil {
			return
		}
		if n != kept {
			t.Fatalf("Apply says %d kept, keep said yes %d times", n, kept)
		}
		oh, err := Validate(out)
		if err != nil {
			// The original's records may not be valid (Check does not walk
			// them), but then a kept copy of them is not either.
			if _, verr := Validate(b); verr == nil {
				t.Fatalf("filtered copy of a valid batch does not validate: %v", err)
			}
			return
		}
		if int(oh.NumRecords) != n || oh.BaseOffset != h.BaseOffset || oh.LastOffsetDelta != h.LastOffsetDelta {
			t.Fatalf("header %+v after keeping %d of %+v", oh, n, h)
		}
	})
}
