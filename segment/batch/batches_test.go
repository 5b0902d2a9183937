package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// logOf concatenates n batches with consecutive offsets, as a segment file holds them,
// and returns the bytes and each batch's start.
func logOf(n int) ([]byte, []int) {
	var (
		log    []byte
		starts []int
		bd     Builder
		next   int64
	)
	for i := range n {
		bd.Reset(int64(1000 * i))
		for j := range i + 1 {
			bd.Append(int64(1000*i+j), []byte(fmt.Sprint("k", j)), bytes.Repeat([]byte{byte(i)}, 10*j), nil)
		}
		b := bd.Bytes()
		SetBaseOffset(b, next)
		next += int64(bd.Len())
		starts = append(starts, len(log))
		log = append(log, b...)
	}
	return log, starts
}

func TestBatches(t *testing.T) {
	log, _ := logOf(5)
	var (
		pos  int
		next int64
	)
	err := Batches(log, func(b []byte, h Header) error {
		if len(b) != h.Size() || cap(b) != len(b) || !bytes.Equal(b, log[pos:pos+h.Size()]) {
			t.Fatalf("batch at %d: %d bytes (cap %d), header size %d", pos, len(b), cap(b), h.Size())
		}
		if h.BaseOffset != next {
			t.Fatalf("batch at %d: base offset %d, want %d", pos, h.BaseOffset, next)
		}
		next = h.NextOffset()
		pos += len(b)
		return nil
	})
	if err != nil || pos != len(log) || next != 15 {
		t.Fatalf("Batches: %v after %d of %d bytes, next offset %d", err, pos, len(log), next)
	}
	if err := Batches(nil, func([]byte, Header) error { t.Fatal("fn called for no bytes"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestBatchesTornTail cuts a log at every byte and checks that Batches passes every
// whole batch before the cut to fn and then reports ErrShort.
func TestBatchesTornTail(t *testing.T) {
	log, starts := logOf(4)
	for cut := range len(log) {
		var seen int
		err := Batches(log[:cut], func([]byte, Header) error { seen++; return nil })
		whole := 0 // batches that end at or before the cut
		for i := range starts {
			end := len(log)
			if i+1 < len(starts) {
				end = starts[i+1]
			}
			if end <= cut {
				whole++
			}
		}
		if seen != whole {
			t.Fatalf("cut at %d: fn saw %d batches, %d are whole", cut, seen, whole)
		}
		atBoundary := false
		for _, s := range starts {
			atBoundary = atBoundary || s == cut
		}
		if atBoundary {
			if err != nil {
				t.Fatalf("cut at batch boundary %d: %v", cut, err)
			}
			continue
		}
		if !errors.Is(err, ErrShort) || !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v, want ErrShort", cut, err)
		}
	}
}

func TestBatchesCorruptMiddle(t *testing.T) {
	log, starts := logOf(4)
	log[starts[2]+HeaderSize+3] ^= 0x01 // a record byte of the third batch
	var seen int
	err := Batches(log, func([]byte, Header) error { seen++; return nil })
	if !errors.Is(err, ErrCorrupt) || seen != 2 {
		t.Fatalf("%v after %d batches; want ErrCorrupt after 2", err, seen)
	}
	want := fmt.Sprintf("batch at byte %d:", starts[2])
	if len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Fatalf("error %q does not say where: want prefix %q", err, want)
	}
}

func TestBatchesZeroTail(t *testing.T) {
	log, _ := logOf(2)
	n := len(log)
	log = append(log, make([]byte, 4096)...) // preallocated space the crash left as zeros
	var seen int
	err := Batches(log, func([]byte, Header) error { seen++; return nil })
	if !errors.Is(err, ErrCorrupt) || seen != 2 {
		t.Fatalf("%v after %d batches; want ErrCorrupt after 2", err, seen)
	}
	if want := fmt.Sprintf("batch at byte %d:", n); err.Error()[:len(want)] != want {
		t.Fatalf("error %q, want prefix %q", err, want)
	}
}

func TestBatchesCallbackError(t *testing.T) {
	log, _ := logOf(3)
	stop := errors.New("stop")
	var seen int
	err := Batches(log, func([]byte, Header) error { seen++; return stop })
	if err != stop || seen != 1 {
		t.Fatalf("Batches returned %v after %d batches; want fn's error unchanged after 1", err, seen)
	}
}

// TestBatchesThenRecords is the read path of a log: walk the batches (CRC and framing
// checked once) and decode each with Records; it gives what Decode gives.
func TestBatchesThenRecords(t *testing.T) {
	log, starts := logOf(6)
	var viaRecords, viaDecode []rec
	err := Batches(log, func(b []byte, h Header) error {
		return Records(b, h, func(r *Record) error { viaRecords = append(viaRecords, own(r)); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range starts {
		end := len(log)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		_, recs := mustDecode(t, log[s:end])
		viaDecode = append(viaDecode, recs...)
	}
	if err := equalRecs(viaRecords, viaDecode); err != nil {
		t.Fatal(err)
	}
	if len(viaRecords) != 21 {
		t.Fatalf("%d records, want 21", len(viaRecords))
	}
}

func TestRecordsRefusesWhatItCannotRead(t *testing.T) {
	b := good()
	h, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	fn := func(*Record) error { return nil }
	checkErr(t, "Records on a cut batch", Records(b[:len(b)-1], h, fn), ErrShort)
	hc := h
	hc.Attributes |= 3
	checkErr(t, "Records on plain records marked lz4", Records(b, hc, fn), ErrCorrupt)
	bad := clone(b)
	bad[HeaderSize] = 0x7f // first record's length: -64
	checkErr(t, "Records on a bad record", Records(bad, h, fn), ErrCorrupt)
}
