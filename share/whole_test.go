package share

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestAcquireTail: the rest of a batch goes to the member that acquired
// its start at the share-partition's end, up to the log's end and the
// in-flight limit; to nobody when another acquired past it meanwhile or
// the last record is not the member's.
func TestAcquireTail(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPartition(PartitionConfig{MaxInFlight: 12}, 0)
	if rs, _ := p.acquire(now, "a", 3, 100); len(rs) != 1 || rs[0].Last != 2 {
		t.Fatalf("acquire: %v", rs)
	}
	if _, _, ok := p.acquireTail(now, "b", 2, 9, 10); ok {
		t.Fatal("b took the rest of a's batch")
	}
	if _, _, ok := p.acquireTail(now, "a", 1, 9, 10); ok {
		t.Fatal("a took records after 1, which is not the end")
	}
	r, deadline, ok := p.acquireTail(now, "a", 2, 9, 10)
	if !ok || r != (AcquiredRange{First: 3, Last: 9, DeliveryCount: 1}) || !deadline.Equal(now.Add(DefaultLockDuration)) {
		t.Fatalf("acquireTail(a, 2, 9, 10) = %v %v %v", r, deadline, ok)
	}
	if got := p.end(); got != 10 {
		t.Fatalf("end %d, want 10", got)
	}
	for off := int64(3); off <= 9; off++ {
		if rec := p.recs[off]; rec.state != Acquired || rec.member != "a" || rec.count != 1 {
			t.Fatalf("offset %d: %+v", off, rec)
		}
	}
	// b acquires 10-10; a's 9 is no longer the end.
	p.acquire(now, "b", 1, 100)
	if _, _, ok := p.acquireTail(now, "a", 9, 19, 20); ok {
		t.Fatal("a extended past b's records")
	}
	// The in-flight limit (12) caps b's rest at 11.
	r, _, ok = p.acquireTail(now, "b", 10, 19, 20)
	if !ok || r != (AcquiredRange{First: 11, Last: 11, DeliveryCount: 1}) {
		t.Fatalf("acquireTail(b, 10, 19, 20) = %v %v", r, ok)
	}
	if _, _, ok := p.acquireTail(now, "b", 11, 19, 20); ok {
		t.Fatal("past the in-flight limit")
	}
	// Accepting all of it, the records are not redelivered.
	if _, err := p.acknowledge(now, "a", []AckBatch{{First: 0, Last: 9, Types: []AckType{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.acknowledge(now, "b", []AckBatch{{First: 10, Last: 11, Types: []AckType{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	if p.start != 12 {
		t.Fatalf("start %d, want 12", p.start)
	}
}

// TestAcquireTailBounds: the rest stops at through and below the log's
// end, whichever comes first (through may be math.MaxInt64: up to the
// log's end), and a member whose lock on last has expired, though no
// timer has released it yet, gets nothing.
func TestAcquireTailBounds(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPartition(PartitionConfig{}, 0)
	p.acquire(now, "a", 1, 100)
	if r, _, ok := p.acquireTail(now, "a", 0, 4, 100); !ok || r != (AcquiredRange{First: 1, Last: 4, DeliveryCount: 1}) {
		t.Fatalf("through 4: %v %v", r, ok)
	}
	if r, _, ok := p.acquireTail(now, "a", 4, math.MaxInt64, 8); !ok || r != (AcquiredRange{First: 5, Last: 7, DeliveryCount: 1}) {
		t.Fatalf("through MaxInt64, log end 8: %v %v", r, ok)
	}
	if _, _, ok := p.acquireTail(now, "a", 7, math.MaxInt64, 8); ok {
		t.Fatal("past the log's end")
	}
	later := now.Add(DefaultLockDuration)
	if _, _, ok := p.acquireTail(later, "a", 7, 20, 20); ok {
		t.Fatal("a's lock on 7 expired, yet it took the rest")
	}
}

// TestAcquireRestToTheLogEnd: AcquireRest through math.MaxInt64 acquires
// the records up to the log's end (through+1 overflowed: nothing).
func TestAcquireRestToTheLogEnd(t *testing.T) {
	f := newFixture(t, Config{})
	f.join("a")
	f.produce(0, 10)
	if got := f.acquire("a", 0, 3); got != "0-2@1 " {
		t.Fatalf("acquired %s", got)
	}
	r, ok, err := f.c.AcquireRest(context.Background(), "g", "a", TopicPartition{Topic: "t", Partition: 0}, 2, math.MaxInt64)
	if err != nil || !ok || r != (AcquiredRange{First: 3, Last: 9, DeliveryCount: 1}) {
		t.Fatalf("AcquireRest(2, MaxInt64) = %v %v %v", r, ok, err)
	}
	if s := f.state(0); s.Acquired != 10 {
		t.Fatalf("state %+v", s)
	}
}
