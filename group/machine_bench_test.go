package group

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRebalance: the state machine's cost of one rebalance of n
// members subscribed to 10 topics of 64 partitions each (a member leaves
// and joins again as a new one, the others rejoin; range assignment and the
// replies included), per rebalance.
func BenchmarkRebalance(b *testing.B) {
	topics := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}
	counts := map[string]int{}
	for _, t := range topics {
		counts[t] = 64
	}
	for _, n := range []int{2, 10, 100} {
		b.Run(fmt.Sprint("members=", n), func(b *testing.B) {
			g := newGroupState("g", 0)
			now := time.Unix(0, 0)
			var token uint64
			var effs []effect
			step := func(ev event) {
				var err error
				effs, err = g.step(now, ev, effs[:0])
				if err != nil {
					b.Fatal(err)
				}
			}
			joinEv := func(id string, isNew bool) joinEvent {
				token++
				return joinEvent{member: id, isNew: isNew, topics: topics, sessionTimeout: time.Minute,
					rebalanceTimeout: time.Minute, partitions: counts, waiter: token}
			}
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("m%03d", i)
				step(joinEv(ids[i], true))
				for _, id := range ids[:i] {
					step(joinEv(id, false))
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				step(leaveEvent{member: ids[0]})
				ids[0] = fmt.Sprintf("m000-%d", i)
				step(joinEv(ids[0], true))
				for _, id := range ids[1:] {
					step(joinEv(id, false))
				}
				if g.phase != phaseStable {
					b.Fatal("rebalance did not complete")
				}
			}
		})
	}
}
