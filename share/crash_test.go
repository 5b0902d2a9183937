package share

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestKilledMemberAndCrash: three members share two partitions of 600
// records each, accepting what they get (and releasing one batch in ten).
// Mid-batch, one member is killed: it holds records, never acknowledges
// them and stops heartbeating. Later the coordinator itself crashes
// (only what it wrote to its log survives) and restarts. In virtual time:
// the killed member's records are delivered again once their lock
// expires, and at the end every record was accepted exactly once: none
// lost, none accepted twice. Replayable from the seed it logs.
func TestKilledMemberAndCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const perPartition = 600
	// A delivery limit no release sequence of the test reaches: every
	// record must end accepted.
	f := newFixture(t, Config{SnapshotEvery: 7, GroupConfigs: map[string]GroupConfig{"g": {AutoOffsetReset: "earliest", DeliveryCountLimit: 100}}})
	f.produce(0, perPartition)
	f.produce(1, perPartition)
	ctx := context.Background()
	members := []string{"m1", "m2", "m3"}
	epochs := map[string]int32{}
	heartbeat := func(m string) {
		r, err := f.c.Heartbeat(ctx, HeartbeatRequest{Group: "g", MemberID: m, MemberEpoch: epochs[m], SubscribedTopics: []string{"t"}})
		if err != nil {
			t.Fatalf("heartbeat %s: %v", m, err)
		}
		epochs[m] = r.MemberEpoch
	}
	for _, m := range members {
		heartbeat(m)
	}
	accepted := [2]map[int64]bool{{}, {}}
	killed := ""
	var killedHeld int
	killedAt, crashAt := 3+rng.IntN(5), 10+rng.IntN(5)
	for round := 0; round < 400; round++ {
		if len(accepted[0]) == perPartition && len(accepted[1]) == perPartition {
			break
		}
		if round == crashAt {
			// A crash: nothing but the log survives; the members'
			// sessions and locks are gone and they rejoin.
			f.c.Close()
			f.open()
			for _, m := range members {
				if m != killed {
					epochs[m] = 0
					heartbeat(m)
				}
			}
		}
		for _, m := range members {
			if m == killed {
				continue
			}
			for p := range 2 {
				rs, err := f.c.Acquire(ctx, "g", m, TopicPartition{Topic: "t", Partition: p}, 1+rng.IntN(40))
				if err != nil {
					t.Fatal(err)
				}
				if round == killedAt && m == "m2" {
					killed = m // dies holding what it just acquired
					for _, r := range rs {
						killedHeld += int(r.Last - r.First + 1)
					}
					break
				}
				typ := AckAccept
				if rng.IntN(10) == 0 {
					typ = AckRelease
				}
				for _, r := range rs {
					if err := f.ack(m, p, r.First, r.Last, typ); err != nil {
						t.Fatalf("round %d: %s acknowledges %d-%d of %d: %v", round, m, r.First, r.Last, p, err)
					}
					if typ != AckAccept {
						continue
					}
					for o := r.First; o <= r.Last; o++ {
						if accepted[p][o] {
							t.Fatalf("round %d: offset %d of partition %d accepted twice", round, o, p)
						}
						accepted[p][o] = true
					}
				}
			}
			if m != killed {
				heartbeat(m)
			}
		}
		f.clk.Advance(time.Second)
	}
	if killed == "" || killedHeld == 0 {
		t.Fatalf("the member was not killed holding records (killed %q, %d held)", killed, killedHeld)
	}
	for p := range 2 {
		if n := len(accepted[p]); n != perPartition {
			t.Errorf("partition %d: %d of %d records accepted", p, n, perPartition)
		}
		if s := f.state(p); s.StartOffset != perPartition {
			t.Errorf("partition %d: start offset %d", p, s.StartOffset)
		}
	}
	f.log.mu.Lock()
	pruned, kept := f.log.start, len(f.log.recs)
	f.log.mu.Unlock()
	if pruned == 0 {
		t.Errorf("no record of the state log was dropped (%d kept)", kept)
	}
	if d, _ := f.c.Describe("g"); len(d.Members) != 2 {
		t.Errorf("the killed member is still in the group: %+v", d.Members)
	}
}
