package machine_test

import (
	"fmt"
	"time"

	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/machine/machinetest"
)

// A driver steps the leader's machine with what happens to the partition and
// carries out the actions it returns. Here broker 1 leads with followers 2
// and 3; an acks=all produce waits until both have fetched past it.
func ExamplePartitionMachine() {
	cache := &machinetest.Epochs{}
	m := machine.NewPartitionMachine(1, cache, machine.PartitionConfig{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	do := func(ev machine.PartitionEvent) {
		for _, a := range m.Step(now, ev, nil) {
			switch a := a.(type) {
			case machine.StartEpoch:
				cache.Assign(a.Epoch, a.StartOffset) // the log records the epoch
			case machine.SetHW:
				fmt.Println("HW", a.HW)
			case machine.CompleteProduce:
				fmt.Println("produce", a.Token, "done:", a.Err)
			case machine.FetchAnswer:
				fmt.Println("answer follower", a.Replica, "with HW", a.HW)
			case machine.ProposeISR:
				fmt.Println("AlterPartition", a.ISR)
			}
		}
	}
	do(machine.Metadata{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int{1, 2, 3}, ISR: []int{1, 2, 3}, MinInSyncReplicas: 2})

	if err := m.CheckProduce(); err != nil {
		fmt.Println("refused:", err)
		return
	}
	cache.End = 3 // the driver appended 3 records
	do(machine.Appended{LogEnd: 3})
	do(machine.AwaitProduce{Token: 7, Required: 3})

	now = now.Add(100 * time.Millisecond)
	do(machine.FollowerFetch{Replica: 2, LeaderEpoch: 1, FetchOffset: 3, LastFetchedEpoch: 1})
	do(machine.FollowerFetch{Replica: 3, LeaderEpoch: 1, FetchOffset: 3, LastFetchedEpoch: 1})
	// Output:
	// answer follower 2 with HW 0
	// HW 3
	// produce 7 done: <nil>
	// answer follower 3 with HW 3
}
