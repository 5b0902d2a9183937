package share

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The share-partition's cases, after Kafka's SharePartitionTest (the name
// of each case is the Kafka test it follows), run as steps on a fresh
// partition in virtual time. A state is written one token per in-flight
// record from the start offset: a (Available), q (Acquired), k
// (Acknowledged), x (Archived), then the delivery count.

type step struct {
	name string
	do   func(p *partition, now *time.Time) (string, error)
	want string // what do returns ("" for nothing)
	err  error  // errors.Is
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// acq acquires for member at most max records of a log ending at logEnd.
func acq(member string, max int, logEnd int64, want string) step {
	return step{name: fmt.Sprintf("acquire(%s,%d,%d)", member, max, logEnd), want: want, do: func(p *partition, now *time.Time) (string, error) {
		rs, _ := p.acquire(*now, member, max, logEnd)
		var b []string
		for _, r := range rs {
			b = append(b, fmt.Sprintf("%d-%d@%d", r.First, r.Last, r.DeliveryCount))
		}
		return strings.Join(b, " "), nil
	}}
}

// ack acknowledges: each batch "first-last:types", types one letter
// each (g gap, a accept, r release, j reject, n renew).
func ack(member string, batches string, err error) step {
	return step{name: fmt.Sprintf("ack(%s,%s)", member, batches), err: err, do: func(p *partition, now *time.Time) (string, error) {
		var bs []AckBatch
		for _, f := range strings.Fields(batches) {
			var b AckBatch
			var types string
			if _, err := fmt.Sscanf(strings.NewReplacer("-", " ", ":", " ").Replace(f), "%d %d %s", &b.First, &b.Last, &types); err != nil {
				panic(err)
			}
			for _, c := range types {
				b.Types = append(b.Types, AckType(strings.IndexRune("garjnz", c)))
			}
			bs = append(bs, b)
		}
		_, err := p.acknowledge(*now, member, bs)
		return "", err
	}}
}

func after(d time.Duration) step {
	return step{name: "after " + d.String(), do: func(p *partition, now *time.Time) (string, error) {
		*now = now.Add(d)
		p.expire(*now)
		return "", nil
	}}
}

func leave(member string) step {
	return step{name: "leave " + member, do: func(p *partition, _ *time.Time) (string, error) {
		p.releaseMember(member)
		return "", nil
	}}
}

func logStart(off int64) step {
	return step{name: fmt.Sprintf("log start %d", off), do: func(p *partition, _ *time.Time) (string, error) {
		p.logStartMoved(off)
		return "", nil
	}}
}

// may checks mayAcquire.
func may(want bool) step {
	return step{name: "mayAcquire", want: fmt.Sprint(want), do: func(p *partition, _ *time.Time) (string, error) {
		return fmt.Sprint(p.mayAcquire()), nil
	}}
}

// state checks the start offset and the in-flight records.
func state(want string) step {
	return step{name: "state", want: want, do: func(p *partition, _ *time.Time) (string, error) {
		return p.String(), nil
	}}
}

func (p *partition) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", p.start)
	for _, r := range p.recs {
		fmt.Fprintf(&b, " %c%d", "aqk?x"[r.state], r.count)
	}
	return b.String()
}

func TestPartitionCases(t *testing.T) {
	cfg := PartitionConfig{LockDuration: 30 * time.Second}
	cases := []struct {
		name  string
		cfg   PartitionConfig
		start int64
		steps []step
	}{
		{name: "testAcquireSingleRecord", steps: []step{
			acq("m1", 500, 1, "0-0@1"),
			state("0: q1"),
			acq("m1", 500, 1, ""), // nothing more in the log
		}},
		{name: "testAcquireMultipleRecords", start: 10, steps: []step{
			acq("m1", 500, 15, "10-14@1"),
			state("10: q1 q1 q1 q1 q1"),
		}},
		{name: "testAcquireWithMaxFetchRecords", steps: []step{
			acq("m1", 3, 10, "0-2@1"),
			acq("m2", 3, 10, "3-5@1"),
			state("0: q1 q1 q1 q1 q1 q1"),
		}},
		{name: "testAcquireWithEmptyFetchRecords", start: 5, steps: []step{
			acq("m1", 500, 5, ""),
			acq("m1", 0, 10, ""),
			state("5:"),
		}},
		{name: "testAcknowledgeSingleRecordBatch", steps: []step{
			acq("m1", 500, 1, "0-0@1"),
			ack("m1", "0-0:a", nil),
			state("1:"), // the start offset moves past it
		}},
		{name: "testAcknowledgeMultipleRecordBatch", steps: []step{
			acq("m1", 500, 10, "0-9@1"),
			ack("m1", "0-4:a 5-9:a", nil),
			state("10:"),
		}},
		{name: "testAcknowledgeMultipleRecordBatchWithGapOffsets", steps: []step{
			acq("m1", 500, 10, "0-9@1"),
			ack("m1", "0-5:aagaaj", nil),
			state("6: q1 q1 q1 q1"),
			ack("m1", "6-9:r", nil),
			state("6: a1 a1 a1 a1"),
		}},
		{name: "testAcknowledgeOutOfRangeCachedData", steps: []step{
			acq("m1", 500, 5, "0-4@1"),
			ack("m1", "5-8:a", ErrInvalidRecordState),
			ack("m1", "3-6:a", ErrInvalidRecordState),
			state("0: q1 q1 q1 q1 q1"),
		}},
		{name: "testAcknowledgeWithAnotherMember", steps: []step{
			acq("m1", 500, 5, "0-4@1"),
			ack("m2", "0-4:a", ErrInvalidRecordState),
			state("0: q1 q1 q1 q1 q1"),
		}},
		{name: "testAcknowledgeWhenOffsetNotAcquired", steps: []step{
			acq("m1", 500, 5, "0-4@1"),
			ack("m1", "0-4:r", nil),
			ack("m1", "0-4:a", ErrInvalidRecordState), // Available: not acquired
			acq("m1", 500, 5, "0-4@2"),
			ack("m1", "0-4:a", nil),
			state("5:"),
		}},
		{name: "testAcknowledgeRollbackWithFullBatchError", steps: []step{
			acq("m1", 500, 10, "0-9@1"),
			// The second batch is not acquired by m1: none of it applies.
			acq("m2", 5, 15, "10-14@1"),
			ack("m1", "0-4:a 10-11:a", ErrInvalidRecordState),
			state("0: q1 q1 q1 q1 q1 q1 q1 q1 q1 q1 q1 q1 q1 q1 q1"),
		}},
		{name: "testAcknowledgeInvalidBatches", steps: []step{
			acq("m1", 500, 5, "0-4@1"),
			ack("m1", "3-2:a", ErrInvalidRequest),
			ack("m1", "0-4:aa", ErrInvalidRequest), // neither one type nor one per offset
			ack("m1", "0-4:z", ErrInvalidRequest),  // type 5
			ack("m1", "2-3:a 1-1:a", ErrInvalidRequest),
			state("0: q1 q1 q1 q1 q1"),
		}},
		{name: "testAcknowledgeRenewExtendsTheLock", steps: []step{
			acq("m1", 500, 2, "0-1@1"),
			after(20 * time.Second),
			ack("m1", "0-1:n", nil),
			after(20 * time.Second), // 40 s after the acquisition, 20 s after the renewal
			state("0: q1 q1"),
			after(10 * time.Second),
			state("0: a1 a1"),
		}},
		{name: "testReleaseSingleRecordBatch", steps: []step{
			acq("m1", 500, 1, "0-0@1"),
			ack("m1", "0-0:r", nil),
			state("0: a1"),
			acq("m2", 500, 1, "0-0@2"),
		}},
		{name: "testReleaseAcquiredRecordsWithAnotherMember", steps: []step{
			acq("m1", 2, 5, "0-1@1"),
			acq("m2", 2, 5, "2-3@1"),
			leave("m2"),
			state("0: q1 q1 a1 a1"),
			acq("m3", 500, 5, "2-3@2 4-4@1"),
		}},
		{name: "testAcquisitionLockForAcquiringSingleRecord", steps: []step{
			acq("m1", 500, 1, "0-0@1"),
			after(30*time.Second - time.Millisecond),
			state("0: q1"),
			after(time.Millisecond),
			state("0: a1"),
			ack("m1", "0-0:a", ErrInvalidRecordState), // too late
		}},
		{name: "testAcquisitionLockTimeoutCausesMaxDeliveryCountExceed", cfg: PartitionConfig{DeliveryCountLimit: 2}, steps: []step{
			acq("m1", 500, 2, "0-1@1"),
			after(30 * time.Second),
			acq("m2", 500, 2, "0-1@2"),
			after(30 * time.Second),
			state("2:"), // archived at the limit: the start offset moves past
			acq("m3", 500, 2, ""),
		}},
		{name: "testMaxDeliveryCountLimitExceededForRecordsSubset", cfg: PartitionConfig{DeliveryCountLimit: 2}, steps: []step{
			acq("m1", 500, 5, "0-4@1"),
			ack("m1", "0-4:arrra", nil),
			state("1: a1 a1 a1 k1"),
			acq("m1", 2, 5, "1-2@2"),
			ack("m1", "1-2:r", nil),
			state("3: a1 k1"),
			acq("m1", 500, 5, "3-3@2"),
			ack("m1", "3-3:j", nil),
			state("5:"),
		}},
		{name: "testAcquireWhenDeliveryCountLimitIsOne", cfg: PartitionConfig{DeliveryCountLimit: 1}, steps: []step{
			acq("m1", 500, 1, "0-0@1"),
			ack("m1", "0-0:r", nil),
			state("1:"),
		}},
		{name: "testCanAcquireRecordsWithCachedData (max in-flight)", cfg: PartitionConfig{MaxInFlight: 4}, steps: []step{
			acq("m1", 500, 10, "0-3@1"),
			acq("m2", 500, 10, ""), // the in-flight records are at the bound
			ack("m1", "1-2:a", nil),
			acq("m2", 500, 10, ""), // still four in flight: 0 holds the start
			ack("m1", "0-0:a", nil),
			state("3: q1"),
			acq("m2", 500, 10, "4-6@1"),
			state("3: q1 q1 q1 q1"),
		}},
		{name: "mayAcquire (Strata's: Acquire skips a partition being written that has nothing)", cfg: PartitionConfig{MaxInFlight: 4}, steps: []step{
			may(true), // room for new records
			acq("m1", 2, 10, "0-1@1"),
			may(true),
			acq("m1", 2, 10, "2-3@1"),
			may(false), // the window is full, every record acquired
			ack("m1", "1-2:a", nil),
			may(false), // still four in flight: 0 holds the start
			ack("m1", "3-3:r", nil),
			may(true), // 3 is Available again
			acq("m2", 5, 10, "3-3@2"),
			may(false),
			ack("m1", "0-0:a", nil),
			may(true), // the start moved: room again
			state("3: q2"),
		}},
		{name: "testNextFetchOffsetAfterReleaseInTheMiddle", steps: []step{
			acq("m1", 500, 6, "0-5@1"),
			ack("m1", "0-1:a 2-3:r 4-5:a", nil),
			state("2: a1 a1 k1 k1"),
			acq("m2", 500, 8, "2-3@2 6-7@1"),
			ack("m2", "2-3:a 6-7:a", nil),
			state("8:"),
		}},
		{name: "testUpdateCacheAndOffsetsWhenPartitionStartOffsetMovesBeyond", steps: []step{
			acq("m1", 500, 10, "0-9@1"),
			ack("m1", "2-3:a", nil),
			logStart(5),
			state("5: q1 q1 q1 q1 q1"),
			ack("m1", "4-4:a", ErrInvalidRecordState), // before the start now
			ack("m1", "5-9:a", nil),
			state("10:"),
			logStart(20),
			state("20:"),
			acq("m1", 500, 22, "20-21@1"),
		}},
		{name: "testLockOfOneMemberExpiresAlone", steps: []step{
			acq("m1", 2, 4, "0-1@1"),
			after(10 * time.Second),
			acq("m2", 2, 4, "2-3@1"),
			after(20 * time.Second),
			state("0: a1 a1 q1 q1"),
			ack("m2", "2-3:a", nil),
			after(10 * time.Second),
			state("0: a1 a1 k1 k1"),
			acq("m2", 500, 4, "0-1@2"),
			ack("m2", "0-1:a", nil),
			state("4:"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg.DeliveryCountLimit != 0 {
				c.DeliveryCountLimit = tc.cfg.DeliveryCountLimit
			}
			if tc.cfg.MaxInFlight != 0 {
				c.MaxInFlight = tc.cfg.MaxInFlight
			}
			p := newPartition(c, tc.start)
			now := t0
			for i, s := range tc.steps {
				got, err := s.do(p, &now)
				if !errors.Is(err, s.err) || (err != nil) != (s.err != nil) {
					t.Fatalf("step %d %s: err %v, want %v", i, s.name, err, s.err)
				}
				if got != s.want {
					t.Fatalf("step %d %s: got %q, want %q", i, s.name, got, s.want)
				}
			}
		})
	}
}

// TestPartitionChangesAndApply checks that the durable changes, applied to
// a snapshot taken before them, give the same state back.
func TestPartitionChangesAndApply(t *testing.T) {
	p := newPartition(PartitionConfig{DeliveryCountLimit: 2}, 0)
	now := t0
	p.acquire(now, "m1", 10, 10)
	if _, err := p.acknowledge(now, "m1", []AckBatch{{First: 0, Last: 9, Types: []AckType{AckAccept, AckAccept, AckRelease, AckReject, AckGap, AckRelease, AckRenew, AckAccept, AckRelease, AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	start, snap := p.start, p.snapshot()
	p.takeChanges()
	p.acquire(now, "m2", 2, 10) // 2 and 5, at count 2
	if _, err := p.acknowledge(now, "m2", []AckBatch{{First: 2, Last: 2, Types: []AckType{AckAccept}}, {First: 5, Last: 5, Types: []AckType{AckRelease}}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	p.expire(now) // 6: back to Available, count 1
	changes := p.takeChanges()

	q := newPartition(PartitionConfig{DeliveryCountLimit: 2}, 0)
	q.apply(start, snap)
	q.apply(p.start, changes)
	if q.String() != p.String() {
		t.Fatalf("replayed %s, want %s", q, p)
	}
	if want := "6: a1 k1 a1 a1"; p.String() != want {
		t.Fatalf("state %s, want %s", p, want)
	}
}

func TestPartitionConfigValidate(t *testing.T) {
	for _, c := range []PartitionConfig{{LockDuration: -1}, {DeliveryCountLimit: -1}, {MaxInFlight: -3}} {
		if err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := (PartitionConfig{}).validate(); err != nil {
		t.Fatal(err)
	}
}

// TestInitialStart: share.auto.offset.reset, as Kafka's
// testMaybeInitializeWithEmptyStateAndEarliestOffsetReset and its latest
// twin: latest starts at the log's end, so records already there are not
// delivered; earliest at its start.
func TestInitialStart(t *testing.T) {
	for _, tc := range []struct {
		r    OffsetReset
		want int64
		acq  string
	}{{ResetLatest, 15, "15-16@1"}, {ResetEarliest, 3, "3-16@1"}} {
		p := newPartition(PartitionConfig{}, initialStart(tc.r, 3, 15))
		rs, _ := p.acquire(t0, "m1", 500, 17) // two records appended since
		if len(rs) != 1 || fmt.Sprintf("%d-%d@%d", rs[0].First, rs[0].Last, rs[0].DeliveryCount) != tc.acq {
			t.Errorf("%v: acquired %+v, want %s", tc.r, rs, tc.acq)
		}
	}
	for s, want := range map[string]OffsetReset{"latest": ResetLatest, "earliest": ResetEarliest} {
		if r, err := ParseOffsetReset(s); err != nil || r != want || r.String() != s {
			t.Errorf("ParseOffsetReset(%q) = %v, %v", s, r, err)
		}
	}
	if _, err := ParseOffsetReset("none"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("none: %v", err)
	}
}

// TestPartitionRollback: an acknowledgement whose changes could not be
// stored is undone whole, the start offset's move too.
func TestPartitionRollback(t *testing.T) {
	p := newPartition(PartitionConfig{DeliveryCountLimit: 2}, 0)
	p.acquire(t0, "m1", 10, 6)
	if _, err := p.acknowledge(t0, "m1", []AckBatch{{First: 4, Last: 4, Types: []AckType{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	p.takeChanges()
	before := p.String()
	if _, err := p.acknowledge(t0, "m1", []AckBatch{{First: 0, Last: 3, Types: []AckType{AckAccept, AckReject, AckRelease, AckRenew}}}); err != nil {
		t.Fatal(err)
	}
	if p.String() == before {
		t.Fatal("the acknowledgement changed nothing")
	}
	p.rollback()
	if p.String() != before || len(p.takeChanges()) != 0 {
		t.Fatalf("after rollback %s, want %s", p, before)
	}
	rs, _ := p.acquire(t0, "m2", 10, 6)
	if len(rs) != 0 {
		t.Fatalf("acquired %v after rollback: the records should still be m1's", rs)
	}
	if _, err := p.acknowledge(t0, "m1", []AckBatch{{First: 0, Last: 5, Types: []AckType{AckAccept, AckAccept, AckAccept, AckAccept, AckGap, AckAccept}}}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("4 is acknowledged already: %v", err)
	}
	if _, err := p.acknowledge(t0, "m1", []AckBatch{{First: 0, Last: 3, Types: []AckType{AckAccept}}, {First: 5, Last: 5, Types: []AckType{AckAccept}}}); err != nil {
		t.Fatal(err)
	}
	if p.String() != "6:" {
		t.Fatalf("state %s", p)
	}
}
