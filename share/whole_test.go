package share

import (
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
	if _, _, ok := p.acquireTail(now, "b", 2, 10); ok {
		t.Fatal("b took the rest of a's batch")
	}
	if _, _, ok := p.acquireTail(now, "a", 1, 10); ok {
		t.Fatal("a took records after 1, which is not the end")
	}
	r, deadline, ok := p.acquireTail(now, "a", 2, 10)
	if !ok || r != (AcquiredRange{First: 3, Last: 9, DeliveryCount: 1}) || !deadline.Equal(now.Add(DefaultLockDuration)) {
		t.Fatalf("acquireTail(a, 2, 10) = %v %v %v", r, deadline, ok)
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
	if _, _, ok := p.acquireTail(now, "a", 9, 20); ok {
		t.Fatal("a extended past b's records")
	}
	// The in-flight limit (12) caps b's rest at 11.
	r, _, ok = p.acquireTail(now, "b", 10, 20)
	if !ok || r != (AcquiredRange{First: 11, Last: 11, DeliveryCount: 1}) {
		t.Fatalf("acquireTail(b, 10, 20) = %v %v", r, ok)
	}
	if _, _, ok := p.acquireTail(now, "b", 11, 20); ok {
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
