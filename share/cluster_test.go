package share

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// placement is a Placement whose led partitions and coordinated groups
// the test sets.
type placement struct {
	mu     sync.Mutex
	led    map[TopicPartition]bool
	groups map[string]bool
}

var errElsewhere = errors.New("served elsewhere")

func (p *placement) Coordinates(g string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.groups[g] {
		return errElsewhere
	}
	return nil
}

func (p *placement) Leads(t TopicPartition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.led[t] {
		return errElsewhere
	}
	return nil
}

// appendOnly is a StateLog that Open replays nothing of.
type appendOnly struct{ *memLog }

func (appendOnly) Replay(context.Context, func(int64, []byte, []byte) error) error { return nil }

// A partition's share-partitions move between two coordinators over one
// log: the new one loads them (records acquired on the old one Available
// again, accepted ones never again, other partitions left out), the old
// one drops them, and each refuses what it does not serve.
func TestCoordinatorLoadDropPlacement(t *testing.T) {
	ctx := context.Background()
	t0p, t1p := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	pa := &placement{led: map[TopicPartition]bool{t0p: true, t1p: true}, groups: map[string]bool{"g": true}}
	a := newFixture(t, Config{AutoOffsetReset: ResetEarliest, Placement: pa})
	a.produce(0, 10)
	a.produce(1, 10)
	a.join("m")
	if got := a.acquire("m", 0, 6); got != "0-5@1 " {
		t.Fatalf("acquired %q", got)
	}
	if err := a.ack("m", 0, 0, 2, AckAccept); err != nil {
		t.Fatal(err)
	}
	a.acquire("m", 1, 10)

	// b shares a's log; it leads partition 0 from now on.
	pb := &placement{led: map[TopicPartition]bool{t0p: true}, groups: map[string]bool{}}
	cfg := a.cfg
	cfg.Placement = pb
	b, err := Open(ctx, cfg, appendOnly{a.log}) // as in a cluster: Load, not Open, reads
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pa.mu.Lock()
	delete(pa.led, t0p)
	pa.mu.Unlock()
	a.c.Drop(t0p)
	if err := b.Load(ctx, t0p, a.log); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Offsets("g")[t1p]; ok {
		t.Fatal("loaded the share-partition of another partition")
	}
	if st := b.Offsets("g")[t0p]; st.StartOffset != 3 {
		t.Fatalf("start offset %d after load, want 3", st.StartOffset)
	}
	rs, err := b.Acquire(ctx, "g", "m2", t0p, 10)
	if err != nil {
		t.Fatal(err)
	}
	// 3-5 were acquired on a: Available again (an acquisition is not
	// written, so their count is 1 again); 6-9 never delivered.
	if got := fmtRanges(rs); got != "3-5@1 6-9@1 " && got != "3-9@1 " {
		t.Fatalf("acquired %q at the new leader, want 3-9", got)
	}
	if err := a.ack("m", 0, 3, 5, AckAccept); !errors.Is(err, errElsewhere) {
		t.Fatalf("acknowledgement at the old leader: %v, want its placement's error", err)
	}
	if _, err := a.c.Acquire(ctx, "g", "m", t0p, 1); !errors.Is(err, errElsewhere) {
		t.Fatalf("acquisition at the old leader: %v", err)
	}
	if _, ok := a.c.Offsets("g")[t0p]; ok {
		t.Fatal("the old leader keeps the dropped share-partition")
	}
	if _, err := b.Heartbeat(ctx, HeartbeatRequest{Group: "g", MemberID: "m3", SubscribedTopics: []string{"t"}}); !errors.Is(err, errElsewhere) {
		t.Fatalf("heartbeat at a non-coordinator: %v", err)
	}
	if l := b.List(); len(l) != 0 {
		t.Fatalf("a non-coordinator lists %v", l)
	}

	// a stops coordinating g: its members are forgotten, its records kept.
	a.c.DropMembers(func(string) bool { return false })
	if d, _ := a.c.Describe("g"); len(d.Members) != 0 {
		t.Fatalf("members after DropMembers: %v", d.Members)
	}
	if st := a.c.Offsets("g")[t1p]; st.Acquired != 10 {
		t.Fatalf("DropMembers released records: %+v", st)
	}
}
