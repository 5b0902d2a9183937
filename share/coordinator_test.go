package share

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/tp"
)

// memLog is a StateLog in memory; fail makes Append fail.
type memLog struct {
	mu    sync.Mutex
	recs  []Record
	start int64 // offset of recs[0]
	fail  error
}

func (l *memLog) Append(rs []Record) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	base := l.start + int64(len(l.recs))
	l.recs = append(l.recs, rs...)
	return base, nil
}

func (l *memLog) Replay(ctx context.Context, fn func(off int64, k, v []byte) error) error {
	l.mu.Lock()
	recs, start := append([]Record(nil), l.recs...), l.start
	l.mu.Unlock()
	for i, r := range recs {
		if err := fn(start+int64(i), r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}

// DeleteBefore drops the records before offset (StatePruner).
func (l *memLog) DeleteBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := offset - l.start; n > 0 {
		l.recs = l.recs[min(n, int64(len(l.recs))):]
		l.start = offset
	}
	return nil
}

// fixture is a coordinator over one topic "t" of two partitions whose
// logs end at ends[p] and start at starts[p].
type fixture struct {
	t      testing.TB
	clk    *clocktest.Clock
	log    *memLog
	mu     sync.Mutex
	ends   [2]int64
	starts [2]int64
	cfg    Config
	c      *Coordinator
}

func newFixture(t testing.TB, cfg Config) *fixture {
	f := &fixture{t: t, clk: clocktest.New(t0), log: &memLog{}}
	cfg.Partitions = func(topic string) (int, error) {
		if topic == "t" {
			return 2, nil
		}
		return 0, errors.New("no such topic")
	}
	cfg.Offsets = func(tp TopicPartition) (int64, int64, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.starts[tp.Partition], f.ends[tp.Partition], nil
	}
	cfg.TopicNames = func() []string { return []string{"t"} }
	cfg.Clock = f.clk
	f.cfg = cfg
	f.open()
	return f
}

func (f *fixture) open() {
	c, err := Open(context.Background(), f.cfg, f.log)
	if err != nil {
		f.t.Fatal(err)
	}
	f.c = c
	f.t.Cleanup(c.Close)
}

func (f *fixture) produce(p int, n int64) {
	f.mu.Lock()
	f.ends[p] += n
	f.mu.Unlock()
}

func (f *fixture) join(member string) HeartbeatResponse {
	f.t.Helper()
	r, err := f.c.Heartbeat(context.Background(), HeartbeatRequest{Group: "g", MemberID: member, SubscribedTopics: []string{"t"}})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) acquire(member string, p, max int) string {
	f.t.Helper()
	rs, err := f.c.Acquire(context.Background(), "g", member, TopicPartition{Topic: "t", Partition: p}, max)
	if err != nil {
		f.t.Fatal(err)
	}
	return fmtRanges(rs)
}

func fmtRanges(rs []AcquiredRange) string {
	s := ""
	for _, r := range rs {
		s += fmt.Sprintf("%d-%d@%d ", r.First, r.Last, r.DeliveryCount)
	}
	return s
}

func (f *fixture) ack(member string, p int, first, last int64, t AckType) error {
	return f.c.Acknowledge(context.Background(), "g", member, TopicPartition{Topic: "t", Partition: p}, []AckBatch{{First: first, Last: last, Types: []AckType{t}}})
}

func (f *fixture) state(p int) PartitionState {
	return f.c.Offsets("g")[TopicPartition{Topic: "t", Partition: p}]
}

func TestCoordinatorJoinAssignsAndInitializes(t *testing.T) {
	f := newFixture(t, Config{})
	f.produce(0, 10) // before the group: latest skips them
	r := f.join("m1")
	if len(r.Assignment) != 2 || r.MemberEpoch != 1 || r.HeartbeatInterval != DefaultHeartbeatInterval {
		t.Fatalf("join: %+v", r)
	}
	f.produce(0, 3)
	if got := f.acquire("m1", 0, 100); got != "10-12@1 " {
		t.Fatalf("acquired %s: latest starts where the log ended at the assignment", got)
	}
	r2 := f.join("m2")
	if len(r2.Assignment) != 1 {
		t.Fatalf("m2: %+v", r2)
	}
	d, ok := f.c.Describe("g")
	if !ok || d.State != "Stable" || len(d.Members) != 2 || d.Epoch != 2 {
		t.Fatalf("describe: %+v", d)
	}
	if ls := f.c.List(); len(ls) != 1 || ls[0].Group != "g" {
		t.Fatalf("list: %+v", ls)
	}
}

func TestCoordinatorEarliestAndGroupConfig(t *testing.T) {
	f := newFixture(t, Config{})
	f.produce(0, 5)
	if err := f.c.SetGroupConfig("g", GroupConfig{AutoOffsetReset: "earliest", DeliveryCountLimit: 2}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.SetGroupConfig("g", GroupConfig{AutoOffsetReset: "never"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad reset: %v", err)
	}
	f.join("m1")
	if got := f.acquire("m1", 0, 100); got != "0-4@1 " {
		t.Fatalf("acquired %s", got)
	}
	if err := f.ack("m1", 0, 0, 4, AckRelease); err != nil {
		t.Fatal(err)
	}
	f.acquire("m1", 0, 100)
	if err := f.ack("m1", 0, 0, 4, AckRelease); err != nil {
		t.Fatal(err)
	}
	if s := f.state(0); s.StartOffset != 5 { // archived at the limit of 2
		t.Fatalf("state %+v", s)
	}
}

// TestCoordinatorLockExpiresInVirtualTime: records a member does not
// acknowledge within the lock duration go to another member, their
// delivery count 2; a late acknowledgement is refused.
func TestCoordinatorLockExpiresInVirtualTime(t *testing.T) {
	f := newFixture(t, Config{})
	f.join("m1")
	f.join("m2")
	f.produce(0, 4)
	if got := f.acquire("m1", 0, 100); got != "0-3@1 " {
		t.Fatalf("acquired %s", got)
	}
	if got := f.acquire("m2", 0, 100); got != "" {
		t.Fatalf("m2 acquired %s while m1 holds them", got)
	}
	f.clk.Advance(DefaultLockDuration - time.Millisecond)
	if s := f.state(0); s.Acquired != 4 {
		t.Fatalf("before the lock expires: %+v", s)
	}
	f.clk.Advance(time.Millisecond) // the timer releases them
	if s := f.state(0); s.Available != 4 || s.Acquired != 0 {
		t.Fatalf("after: %+v", s)
	}
	if err := f.ack("m1", 0, 0, 3, AckAccept); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("late ack: %v", err)
	}
	if got := f.acquire("m2", 0, 100); got != "0-3@2 " {
		t.Fatalf("m2 acquired %s", got)
	}
	if err := f.ack("m2", 0, 0, 3, AckAccept); err != nil {
		t.Fatal(err)
	}
	if s := f.state(0); s.StartOffset != 4 {
		t.Fatalf("state %+v", s)
	}
}

// TestCoordinatorSessionTimeoutReleases: a member that stops
// heartbeating is removed after the session timeout and its records go
// back at once, before their lock would expire.
func TestCoordinatorSessionTimeoutReleases(t *testing.T) {
	f := newFixture(t, Config{SessionTimeout: 10 * time.Second})
	f.join("m1")
	f.produce(1, 3)
	f.acquire("m1", 1, 100)
	f.clk.Advance(10 * time.Second)
	if d, _ := f.c.Describe("g"); len(d.Members) != 0 {
		t.Fatalf("members %+v", d.Members)
	}
	if s := f.state(1); s.Available != 3 {
		t.Fatalf("state %+v", s)
	}
	_, err := f.c.Heartbeat(context.Background(), HeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: 1})
	if !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("heartbeat after the timeout: %v", err)
	}
	// A member that leaves gives its records back too.
	f.join("m2")
	f.acquire("m2", 1, 100)
	if _, err := f.c.Heartbeat(context.Background(), HeartbeatRequest{Group: "g", MemberID: "m2", MemberEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	if s := f.state(1); s.Available != 3 || s.Batches[0].DeliveryCount != 2 {
		t.Fatalf("state %+v", s)
	}
}

// TestCoordinatorStoreFailureChangesNothing: an acknowledgement that
// cannot be stored is refused and leaves the records acquired.
func TestCoordinatorStoreFailureChangesNothing(t *testing.T) {
	f := newFixture(t, Config{})
	f.join("m1")
	f.produce(0, 3)
	f.acquire("m1", 0, 100)
	f.log.mu.Lock()
	f.log.fail = errors.New("disk full")
	f.log.mu.Unlock()
	if err := f.ack("m1", 0, 0, 2, AckAccept); err == nil {
		t.Fatal("stored nowhere, yet accepted")
	}
	if s := f.state(0); s.Acquired != 3 || s.StartOffset != 0 {
		t.Fatalf("state %+v", s)
	}
	f.log.mu.Lock()
	f.log.fail = nil
	f.log.mu.Unlock()
	if err := f.ack("m1", 0, 0, 2, AckAccept); err != nil {
		t.Fatal(err)
	}
	if s := f.state(0); s.StartOffset != 3 {
		t.Fatalf("state %+v", s)
	}
}

// TestCoordinatorRestart: the share-partitions come back from the
// records, snapshots and updates alike; acquired records come back
// Available, accepted ones are never delivered again, every other one is.
func TestCoordinatorRestart(t *testing.T) {
	f := newFixture(t, Config{SnapshotEvery: 3})
	f.join("m1")
	f.produce(0, 20)
	for i := range 8 {
		rs, err := f.c.Acquire(context.Background(), "g", "m1", TopicPartition{Topic: "t"}, 2)
		if err != nil {
			t.Fatal(err)
		}
		typ := AckAccept
		if i%3 == 1 {
			typ = AckRelease
		}
		for _, r := range rs {
			if err := f.ack("m1", 0, r.First, r.Last, typ); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.acquire("m1", 0, 3) // held at the crash
	before := f.state(0)
	f.c.Close()
	f.open()
	after := f.state(0)
	// An acquisition is not stored (as in Kafka): what was acquired comes
	// back as it was before, Available.
	if after.StartOffset != before.StartOffset || after.Acquired != 0 || after.Acknowledged != before.Acknowledged {
		t.Fatalf("before %+v, after %+v", before, after)
	}
	// Nothing accepted is delivered again: drain and count.
	f.join("m2")
	seen := map[int64]bool{}
	for range 20 {
		rs, err := f.c.Acquire(context.Background(), "g", "m2", TopicPartition{Topic: "t"}, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			for o := r.First; o <= r.Last; o++ {
				seen[o] = true
			}
			if err := f.ack("m2", 0, r.First, r.Last, AckAccept); err != nil {
				t.Fatal(err)
			}
		}
	}
	for o := int64(0); o < 20; o++ {
		wasAccepted := o < before.StartOffset
		for _, b := range before.Batches {
			if o >= b.First && o <= b.Last && b.State == Acknowledged {
				wasAccepted = true
			}
		}
		if wasAccepted == seen[o] {
			t.Errorf("offset %d: accepted before the restart %v, delivered after %v", o, wasAccepted, seen[o])
		}
	}
	if s := f.state(0); s.StartOffset != 20 {
		t.Fatalf("state %+v", s)
	}
}

func TestCoordinatorAdminOffsets(t *testing.T) {
	f := newFixture(t, Config{})
	f.produce(0, 10)
	f.join("m1")
	ctx := context.Background()
	if err := f.c.AlterOffsets(ctx, "g", map[TopicPartition]int64{{Topic: "t"}: 2}); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("alter with members: %v", err)
	}
	if _, err := f.c.Heartbeat(ctx, HeartbeatRequest{Group: "g", MemberID: "m1", MemberEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.AlterOffsets(ctx, "g", map[TopicPartition]int64{{Topic: "t"}: 2, {Topic: "t", Partition: 1}: 99}); err != nil {
		t.Fatal(err)
	}
	if s0, s1 := f.state(0), f.state(1); s0.StartOffset != 2 || s1.StartOffset != 0 {
		t.Fatalf("after alter: %+v %+v", s0, s1)
	}
	if err := f.c.DeleteOffsets(ctx, "g", []string{"t"}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.c.Offsets("g")); n != 0 {
		t.Fatalf("%d share-partitions after the delete", n)
	}
	f.c.Close()
	f.open()
	if n := len(f.c.Offsets("g")); n != 0 {
		t.Fatalf("%d share-partitions after the delete and a restart", n)
	}
	f.join("m1")
	if err := f.c.DeleteGroup(ctx, "g"); !errors.Is(err, ErrNonEmptyGroup) {
		t.Fatalf("delete with members: %v", err)
	}
}

func TestCoordinatorOtherGroupType(t *testing.T) {
	f := newFixture(t, Config{OtherGroup: func(g string) bool { return g == "classic" }})
	_, err := f.c.Heartbeat(context.Background(), HeartbeatRequest{Group: "classic", MemberID: "m1", SubscribedTopics: []string{"t"}})
	if !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("share heartbeat to a classic group: %v", err)
	}
	if _, err := f.c.Heartbeat(context.Background(), HeartbeatRequest{Group: "g", SubscribedTopics: []string{"t"}}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("no member id: %v", err)
	}
}

// TestCoordinatorLogBehindState: a log that ends before the
// share-partition's start (the topic made again under its name, or
// records lost in a crash) starts the share-partition anew rather than
// waiting for the log to catch up.
func TestCoordinatorLogBehindState(t *testing.T) {
	f := newFixture(t, Config{GroupConfigs: map[string]GroupConfig{"g": {AutoOffsetReset: "earliest"}}})
	f.produce(0, 10)
	f.join("m1")
	f.acquire("m1", 0, 100)
	if err := f.ack("m1", 0, 0, 9, AckAccept); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.ends[0] = 3 // the topic again, three records in
	f.mu.Unlock()
	if got := f.acquire("m1", 0, 100); got != "0-2@1 " {
		t.Fatalf("acquired %q", got)
	}
}

// TestCoordinatorUnacquireAndWatch: records a fetch could not return go
// back with their delivery count as before, and wake a Watch.
func TestCoordinatorUnacquireAndWatch(t *testing.T) {
	f := newFixture(t, Config{})
	f.join("m1")
	f.produce(0, 6)
	if got := f.acquire("m1", 0, 100); got != "0-5@1 " {
		t.Fatalf("acquired %q", got)
	}
	w := f.c.Watch()
	f.c.Unacquire("g", "m1", TopicPartition{Topic: "t"}, 4)
	select {
	case <-w:
	default:
		t.Fatal("Watch not woken by records given back")
	}
	if got := f.acquire("m1", 0, 100); got != "4-5@1 " {
		t.Fatalf("acquired %q after the unacquire: the delivery count should not have grown", got)
	}
	w = f.c.Watch()
	f.clk.Advance(DefaultLockDuration)
	select {
	case <-w:
	default:
		t.Fatal("Watch not woken by expired locks")
	}
}

// TestCoordinatorColdSnapshot: a share-partition left idle keeps its old
// snapshot, which holds back the pruning of the records a busy one writes
// after it, until the cold-partition pass (ColdSnapshotInterval, in
// virtual time) writes it anew: the log is pruned past the old snapshot,
// a reopen from the pruned log has the same state, and a quiet
// coordinator writes no more snapshots.
func TestCoordinatorColdSnapshot(t *testing.T) {
	f := newFixture(t, Config{SnapshotEvery: 3, ColdSnapshotInterval: time.Minute})
	f.join("m1")
	f.produce(0, 40)
	f.produce(1, 5)
	if got := f.acquire("m1", 1, 5); got != "0-4@1 " {
		t.Fatalf("acquired %q", got)
	}
	if err := f.ack("m1", 1, 0, 4, AckAccept); err != nil {
		t.Fatal(err)
	}
	// Partition 1 is idle from here; partition 0 writes on.
	for i := range 20 {
		rs, err := f.c.Acquire(context.Background(), "g", "m1", TopicPartition{Topic: "t"}, 2)
		if err != nil || len(rs) == 0 {
			t.Fatalf("acquire %d: %v %v", i, rs, err)
		}
		if err := f.ack("m1", 0, rs[0].First, rs[len(rs)-1].Last, AckAccept); err != nil {
			t.Fatal(err)
		}
	}
	k1 := stateKey{group: "g", topicID: tp.TopicID("t"), partition: 1}
	f.c.pruneMu.Lock()
	old1 := f.c.snaps[k1]
	f.c.pruneMu.Unlock()
	f.log.mu.Lock()
	start, end := f.log.start, f.log.start+int64(len(f.log.recs))
	f.log.mu.Unlock()
	if start > old1 || end-start < 20 {
		t.Fatalf("log %d-%d, partition 1's snapshot at %d: the idle snapshot holds the pruning back", start, end, old1)
	}
	before0, before1 := f.state(0), f.state(1)

	f.clk.Advance(time.Minute)
	f.c.pruneMu.Lock()
	new1 := f.c.snaps[k1]
	f.c.pruneMu.Unlock()
	f.log.mu.Lock()
	start, end = f.log.start, f.log.start+int64(len(f.log.recs))
	f.log.mu.Unlock()
	if new1 <= old1 || start <= old1 || end-start > 2 {
		t.Fatalf("after the cold pass: partition 1's snapshot at %d (was %d), log %d-%d", new1, old1, start, end)
	}

	f.clk.Advance(time.Minute) // nothing written since: no new snapshots
	f.log.mu.Lock()
	quiet := f.log.start + int64(len(f.log.recs))
	f.log.mu.Unlock()
	if quiet != end {
		t.Fatalf("a quiet coordinator wrote %d more records", quiet-end)
	}

	f.c.Close()
	f.open()
	if a0, a1 := f.state(0), f.state(1); a0.StartOffset != before0.StartOffset || a1.StartOffset != before1.StartOffset {
		t.Fatalf("after a reopen from the pruned log: %+v %+v, before %+v %+v", a0, a1, before0, before1)
	}
}
