package controller

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReassignmentRandomSteps runs random sequences of the decisions a
// moving partition meets — reassignments, cancels, the leader's ISR
// changes, fencing and unfencing, preferred elections — on five brokers,
// applying each decision's records to the image (a record its own image
// rejects is a bug) and checking after each step what must always hold.
// Replay a failure with STRATA_SEED.
func TestReassignmentRandomSteps(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("STRATA_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
		seed = s
	}
	t.Logf("seed %d (replay with STRATA_SEED=%d)", seed, seed)
	rnd := rand.New(rand.NewPCG(seed, 7))
	total := 0
	for run := range 200 {
		img := build(t, append(liveBrokerRecords(1, 2, 3, 4, 5), topicWith(run%2 == 0, ps([]int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0))...)...)
		completed := 0
		for step := range 60 {
			p, _ := img.Partition("t", 0)
			var recs []record
			switch rnd.IntN(6) {
			case 0: // a reassignment to a random target
				target := rnd.Perm(5)[:1+rnd.IntN(4)]
				for i := range target {
					target[i]++
				}
				recs, _ = decideAlterReassignments(img, []ReassignTarget{{Topic: "t", Partition: 0, Replicas: target}})
			case 1: // cancel
				recs, _ = decideAlterReassignments(img, []ReassignTarget{{Topic: "t", Partition: 0}})
			case 2, 3: // the leader proposes an ISR of live replicas with itself
				if p.Leader == NoLeader {
					continue
				}
				isr := []int{p.Leader}
				for _, r := range p.Replicas {
					if r != p.Leader && img.live(r) && rnd.IntN(3) > 0 {
						isr = append(isr, r)
					}
				}
				b := img.brokers[p.Leader]
				var err error
				recs, err = decideAlterPartition(img, AlterPartitionRequest{
					BrokerID: b.ID, BrokerEpoch: b.Epoch, Topic: "t", Partition: 0,
					LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr,
				})
				require.NoError(t, err, "seed %d run %d step %d", seed, run, step)
			case 4: // a broker is fenced or unfenced
				id := 1 + rnd.IntN(5)
				if img.live(id) {
					recs = fenceBroker(img, id)
				} else {
					recs = unfenceBroker(img, id)
				}
			case 5:
				recs, _ = decideElectLeaders(img, electRequest{Type: ElectPreferred})
			}
			wasMoving := p.moving()
			for _, r := range recs {
				require.NoError(t, img.apply(r), "seed %d run %d step %d: %#v", seed, run, step, r)
			}
			p, _ = img.Partition("t", 0)
			require.True(t, validState(p.Replicas, p.ISR, p.Leader), "seed %d run %d step %d: %+v", seed, run, step, p)
			require.True(t, validMoving(p.Replicas, p.AddingReplicas, p.RemovingReplicas), "seed %d run %d step %d: %+v", seed, run, step, p)
			require.True(t, p.Leader == NoLeader || img.live(p.Leader), "seed %d run %d step %d: fenced leader %+v", seed, run, step, p)
			if p.moving() {
				// A move that could complete is complete, whatever
				// decision changed the partition or its brokers.
				st := completeReassignment(img, movingState{replicas: p.Replicas, adding: p.AddingReplicas, removing: p.RemovingReplicas, isr: p.ISR, leader: p.Leader})
				require.True(t, len(st.adding)+len(st.removing) > 0, "seed %d run %d step %d: %+v could complete", seed, run, step, p)
			}
			if wasMoving && !p.moving() {
				completed++
			}
			// Records survive the codec, and snapshots keep the move.
			got, err := decodeEntry(encodeEntry(nil, recs))
			require.NoError(t, err)
			require.Len(t, got, len(recs))
		}
		snap, err := decodeSnapshot(encodeSnapshot(nil, img))
		require.NoError(t, err)
		require.Equal(t, img.Reassignments(), snap.Reassignments())
		total += completed
	}
	require.Greater(t, total, 100, "moves ended in 200 runs")
	t.Logf("%d moves ended (completed or cancelled)", total)
}
