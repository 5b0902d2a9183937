package share

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestAcquireSkipsPartitionBeingWritten: while an acknowledgement of a
// partition is written (the log's fsync; here a blocked memLog), an
// Acquire of that partition by another member returns none at once when
// nothing could be acquired before the write ends (every in-flight
// record acquired, the window full), rather than wait for the write: the
// member goes on with its other partitions. Once the write is done the
// Watch channel fires and the records past the old window are acquired.
func TestAcquireSkipsPartitionBeingWritten(t *testing.T) {
	f := newFixture(t, Config{GroupConfigs: map[string]GroupConfig{"g": {AutoOffsetReset: "earliest"}}})
	f.produce(0, 2*DefaultMaxInFlight)
	f.produce(1, 10)
	f.join("m1")
	f.join("m2")
	ctx := context.Background()
	p0, p1 := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	rs, err := f.c.Acquire(ctx, "g", "m1", p0, DefaultMaxInFlight)
	if err != nil || len(rs) != 1 || rs[0].Last != DefaultMaxInFlight-1 {
		t.Fatalf("m1 acquires the window: %v, %v", rs, err)
	}

	// p1's state is made (and written) before the log hangs.
	if rs, err := f.c.Acquire(ctx, "g", "m2", p1, 1); err != nil || len(rs) != 1 {
		t.Fatalf("p1: %v, %v", rs, err)
	}

	watch := f.c.Watch()
	f.log.mu.Lock() // the write hangs
	acked := make(chan error, 1)
	go func() {
		acked <- f.c.Acknowledge(ctx, "g", "m1", p0, []AckBatch{{First: 0, Last: 999, Types: []AckType{AckAccept}}})
	}()
	ge, _ := f.c.lookup("g", false)
	ge.mu.Lock()
	pe := ge.parts[p0]
	ge.mu.Unlock()
	for deadline := time.Now().Add(time.Minute); !pe.writing.Load(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the acknowledgement never started its write")
		}
	}
	got := make(chan []AcquiredRange, 1)
	go func() {
		rs, err := f.c.Acquire(ctx, "g", "m2", p0, 500)
		if err != nil {
			t.Error(err)
		}
		got <- rs
	}()
	select {
	case rs := <-got:
		if len(rs) != 0 {
			t.Fatalf("acquired %v of a full window", rs)
		}
	case <-time.After(time.Minute):
		t.Fatal("Acquire waited for the write of another member's acknowledgement")
	}
	if rs, err := f.c.Acquire(ctx, "g", "m2", p1, 500); err != nil || len(rs) != 1 || rs[0].First != 1 || rs[0].Last != 9 {
		t.Fatalf("the other partition: %v, %v", rs, err)
	}

	f.log.mu.Unlock()
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	select {
	case <-watch:
	default:
		t.Fatal("the write that freed room did not signal")
	}
	rs, err = f.c.Acquire(ctx, "g", "m2", p0, 5000)
	if err != nil || len(rs) != 1 || rs[0].First != DefaultMaxInFlight || rs[0].Last != DefaultMaxInFlight+999 {
		t.Fatalf("after the write, the room it freed: %v, %v", rs, err)
	}
}
