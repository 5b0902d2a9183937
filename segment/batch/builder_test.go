package batch

import (
	"bytes"
	"testing"
	"unsafe"
)

func TestBuilderSizeAndLen(t *testing.T) {
	var bd Builder
	bd.Reset(1000)
	if bd.Len() != 0 || bd.Size() != HeaderSize {
		t.Fatalf("empty builder: Len %d Size %d", bd.Len(), bd.Size())
	}
	hdrs := []RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "null"}}
	for i := range 300 {
		key, value := bytes.Repeat([]byte("k"), i%5), bytes.Repeat([]byte("v"), i)
		ts := int64(1000 + i*i - 50*i) // negative and multi-byte deltas
		want := bd.Size() + bd.RecordSize(ts, key, value, hdrs[:i%3])
		bd.Append(ts, key, value, hdrs[:i%3])
		if bd.Size() != want || bd.Len() != i+1 {
			t.Fatalf("record %d: Size %d, RecordSize predicted %d; Len %d", i, bd.Size(), want, bd.Len())
		}
	}
	b := bd.Bytes()
	if len(b) != bd.Size() {
		t.Fatalf("Bytes is %d bytes, Size said %d", len(b), bd.Size())
	}
	if _, err := Validate(b); err != nil {
		t.Fatal(err)
	}
}

func TestBuilderZeroValue(t *testing.T) {
	var bd Builder
	if bd.Size() != HeaderSize || bd.Len() != 0 {
		t.Fatalf("zero Builder: Size %d Len %d", bd.Size(), bd.Len())
	}
	bd.SetProducer(9, 2, 100) // before the first Append: must not fix the base timestamp
	bd.Append(5000, []byte("k"), nil, nil)
	bd.Append(4000, nil, []byte("v"), nil)
	h, recs := mustDecode(t, bd.Bytes())
	if h.BaseTimestamp != 5000 || h.MaxTimestamp != 5000 || h.ProducerID != 9 || h.ProducerEpoch != 2 || h.BaseSequence != 100 {
		t.Fatalf("header %+v", h)
	}
	if err := equalRecs(recs, []rec{{0, 5000, []byte("k"), nil, nil}, {1, 4000, nil, []byte("v"), nil}}); err != nil {
		t.Fatal(err)
	}
}

func TestBuilderDefaults(t *testing.T) {
	var bd Builder
	bd.Reset(77)
	bd.SetProducer(1, 1, 1)
	bd.Reset(77) // Reset forgets the producer
	bd.Append(77, nil, []byte("x"), nil)
	h, err := Validate(bd.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BaseOffset: 0, Length: h.Length, PartitionLeaderEpoch: -1, Magic: 2, CRC: h.CRC,
		Attributes: 0, LastOffsetDelta: 0, BaseTimestamp: 77, MaxTimestamp: 77, ProducerID: -1,
		ProducerEpoch: -1, BaseSequence: -1, NumRecords: 1}
	if h != want {
		t.Fatalf("header\n got %+v\nwant %+v", h, want)
	}
}

func TestBuilderEmptyBatch(t *testing.T) {
	var bd Builder
	bd.Reset(123)
	b := bd.Bytes()
	h, recs := mustDecode(t, b)
	if len(b) != HeaderSize || h.NumRecords != 0 || h.LastOffsetDelta != 0 || h.MaxTimestamp != -1 || len(recs) != 0 {
		t.Fatalf("empty batch: %d bytes, header %+v, %d records", len(b), h, len(recs))
	}
	var zero Builder
	if _, err := Validate(zero.Bytes()); err != nil {
		t.Fatalf("zero Builder's Bytes: %v", err)
	}
}

func TestBuilderAppendAfterBytes(t *testing.T) {
	var bd Builder
	bd.Append(1, nil, []byte("a"), nil)
	first := clone(bd.Bytes())
	bd.Append(2, nil, []byte("b"), nil)
	_, recs := mustDecode(t, bd.Bytes())
	if len(recs) != 2 {
		t.Fatalf("%d records after appending past Bytes", len(recs))
	}
	if _, r1 := mustDecode(t, first); len(r1) != 1 {
		t.Fatalf("first batch has %d records", len(r1))
	}
}

func TestBuilderReusesBuffer(t *testing.T) {
	var bd Builder
	value := make([]byte, 100)
	fill := func() []byte {
		bd.Reset(1)
		for range 1000 {
			bd.Append(1, nil, value, nil)
		}
		return bd.Bytes()
	}
	a := fill()
	b := fill()
	if &a[0] != &b[0] {
		t.Fatal("second batch did not reuse the first one's buffer")
	}
}

// TestBuilderResetAt: a batch started with ResetAt(ts, pos) has the same
// bytes as one started with Reset(ts), and sits in memory at pos's offset
// modulo 64 — also after the buffer grew, after a plain Reset, and in steady
// state without allocating.
func TestBuilderResetAt(t *testing.T) {
	var plain, bd Builder
	value := make([]byte, 100)
	fill := func(b *Builder, n int) []byte {
		for i := range n {
			b.Append(int64(i), nil, value[:i%len(value)], nil)
		}
		return b.Bytes()
	}
	for i, pos := range []int64{0, 1, 13, 63, 64, 65, 4095, 1 << 40, 1<<40 + 37, 7} {
		n := 1 + i*i*40 // growing batches: the buffer moves to larger arrays
		plain.Reset(5)
		want := fill(&plain, n)
		if i == 5 {
			bd.Reset(5) // a plain Reset in between changes nothing
			fill(&bd, 3)
		}
		bd.ResetAt(5, pos)
		got := fill(&bd, n)
		if !bytes.Equal(got, want) {
			t.Fatalf("pos %d: ResetAt batch differs from Reset's", pos)
		}
		// After a growth the batch may sit anywhere; the next ResetAt aligns it.
		bd.ResetAt(5, pos)
		got = fill(&bd, n)
		if addr := uint64(uintptr(unsafe.Pointer(&got[0]))); addr%alignTo != uint64(pos)%alignTo {
			t.Fatalf("pos %d: batch at address %#x, want %d modulo %d", pos, addr, pos%alignTo, alignTo)
		}
	}
	if n := testing.AllocsPerRun(20, func() { bd.ResetAt(5, 99); fill(&bd, 100) }); n != 0 {
		t.Fatalf("ResetAt in steady state: %v allocations per batch", n)
	}
}

// TestBuilderAllocs checks the steady state: a Builder that has built one batch builds
// the next of the same size without allocating.
func TestBuilderAllocs(t *testing.T) {
	var bd Builder
	key, value := []byte("key-0001"), make([]byte, 100)
	hdrs := []RecordHeader{{Key: "trace", Value: []byte("abc")}}
	run := func() {
		bd.Reset(1_700_000_000_000)
		for i := range 1000 {
			bd.Append(1_700_000_000_000+int64(i), key, value, hdrs)
		}
		_ = bd.Bytes()
	}
	run()
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Fatalf("%v allocations per batch of 1000 records in steady state, want 0", n)
	}
}

// TestDecodeAllocs checks that Decode allocates per call, never per record.
func TestDecodeAllocs(t *testing.T) {
	for _, withHeaders := range []bool{false, true} {
		var bd Builder
		bd.Reset(0)
		for i := range 1000 {
			var hdrs []RecordHeader
			if withHeaders {
				hdrs = []RecordHeader{{Key: "trace", Value: []byte{byte(i)}}, {Key: "span", Value: nil}}
			}
			bd.Append(int64(i), []byte("k"), make([]byte, 100), hdrs)
		}
		b := bd.Bytes()
		var n int
		fn := func(r *Record) error { n += len(r.Value) + len(r.Headers); return nil }
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := Decode(b, fn); err != nil {
				t.Fatal(err)
			}
		})
		// The Record handed to fn escapes (1); with headers, the headers slice (1) and the
		// two key strings of the first record (2).
		limit := 1.0
		if withHeaders {
			limit = 4
		}
		if allocs > limit {
			t.Fatalf("headers %v: %v allocations per Decode of 1000 records, want <= %v", withHeaders, allocs, limit)
		}
	}
}

// TestBuilderGrow: after Grow(n), appending n bytes of records allocates
// nothing, keeps ResetAt's alignment, and encodes the batch a Builder
// without Grow encodes; Grow before the first batch sizes it.
func TestBuilderGrow(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 1000)
	build := func(bd *Builder, grow bool, pos int64) []byte {
		bd.ResetAt(1000, pos)
		bd.Append(1000, nil, value, nil)
		if grow {
			bd.Grow(16 << 10) // keeps what is there
		}
		for bd.Size()+bd.RecordSize(1001, nil, value, nil) <= 16<<10 {
			bd.Append(1001, nil, value, nil)
		}
		return bd.Bytes()
	}
	var plain Builder
	want := append([]byte(nil), build(&plain, false, -1)...)
	for _, pos := range []int64{-1, 0, 13, 4093} {
		// Averages over runs (testing.AllocsPerRun), so that what other
		// goroutines of the process allocate meanwhile does not count.
		first := testing.AllocsPerRun(20, func() {
			var bd Builder
			bd.ResetAt(0, pos) // the first buffer, 4 KiB
		})
		grown := testing.AllocsPerRun(20, func() {
			var bd Builder
			bd.ResetAt(0, pos)
			build(&bd, true, pos)
		})
		if grown-first > 1 {
			t.Fatalf("pos %d: %v allocations after the first buffer, want Grow's one", pos, grown-first)
		}
		var bd Builder
		bd.ResetAt(0, pos)
		got := build(&bd, true, pos)
		if cap(got) != len(got) {
			// Past the batch is memory Grow did not clear.
			t.Fatalf("pos %d: Bytes has capacity %d past its %d bytes", pos, cap(got)-len(got), len(got))
		}
		if pos >= 0 {
			if addr := int64(uintptr(unsafe.Pointer(unsafe.SliceData(got)))); (addr-pos)%alignTo != 0 {
				t.Fatalf("pos %d: batch at %#x, not aligned with its position", pos, addr)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("pos %d: the batch differs from one built without Grow", pos)
		}
		if a := testing.AllocsPerRun(10, func() { build(&bd, true, pos) }); a != 0 {
			t.Fatalf("pos %d: Grow with room enough: %v allocations", pos, a)
		}
	}

	grow := testing.AllocsPerRun(20, func() {
		var zero Builder
		zero.Grow(16 << 10)
	})
	appended := testing.AllocsPerRun(20, func() {
		var zero Builder
		zero.Grow(16 << 10)
		for range 15 {
			zero.Append(7, nil, value, nil)
		}
	})
	if appended != grow {
		t.Fatalf("Grow on a zero Builder: %v allocations appending after it", appended-grow)
	}
	var zero Builder
	zero.Grow(16 << 10)
	for range 15 {
		zero.Append(7, nil, value, nil)
	}
	h, recs := mustDecode(t, zero.Bytes())
	if h.BaseTimestamp != 7 || len(recs) != 15 {
		t.Fatalf("header %+v, %d records", h, len(recs))
	}
}
