package group

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRebalance: the state machine's cost of one rebalance of n
// members with two protocols of 200-byte metadata each (a member leaves and
// joins again as a new one, the others rejoin, the leader syncs an
// assignment of 200 bytes per member; the replies included), per rebalance.
func BenchmarkRebalance(b *testing.B) {
	protocols := []Protocol{{Name: "cooperative-sticky", Metadata: make([]byte, 200)}, {Name: "range", Metadata: make([]byte, 200)}}
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
				return joinEvent{member: id, isNew: isNew, protocolType: "consumer", protocols: protocols,
					sessionTimeout: time.Minute, rebalanceTimeout: time.Minute, waiter: token}
			}
			assignments := map[string][]byte{}
			syncLeader := func() {
				clear(assignments)
				for id := range g.members {
					assignments[id] = make([]byte, 200)
				}
				token++
				step(syncEvent{member: g.leader, generation: g.generation, assignments: assignments, waiter: token})
			}
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("m%03d", i)
				step(joinEv(ids[i], true))
				for _, id := range ids[:i] {
					step(joinEv(id, false))
				}
				syncLeader()
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				step(leaveEvent{member: ids[0]})
				ids[0] = fmt.Sprintf("m000-%d", i)
				step(joinEv(ids[0], true))
				for _, id := range ids[1:] {
					step(joinEv(id, false))
				}
				syncLeader()
				if g.phase != phaseStable {
					b.Fatal("rebalance did not complete")
				}
			}
		})
	}
}
