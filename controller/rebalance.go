package controller

import (
	"slices"
)

// Preferred-leader rebalancing (Kafka's auto.leader.rebalance.enable): a
// partition's preferred leader is its first replica. Leadership drifts away
// from it when brokers stop and fail over; every
// LeaderImbalanceCheckInterval the active controller moves it back, broker
// by broker, where the drift has grown past LeaderImbalancePercentage.

// decidePreferredLeaders returns the partition changes that give
// leadership back to preferred replicas, as Kafka's controller decides
// them (checkAndTriggerAutoLeaderRebalance): for each live broker B, the
// partitions whose preferred replica is B and that B does not lead are its
// imbalance; if they are more than pct percent of the partitions B is
// preferred for, each of them whose ISR holds B gets B as its leader (a
// new leader epoch; the ISR is unchanged). Partitions whose preferred
// replica is fenced, or not in the ISR, stay as they are.
func decidePreferredLeaders(img *Image, pct int) []record {
	type part struct {
		t *topicState
		p PartitionState
	}
	preferred := map[int][]part{} // broker → the partitions it is preferred for
	for _, t := range img.sortedTopics() {
		for _, p := range t.parts {
			if len(p.Replicas) > 0 {
				preferred[p.Replicas[0]] = append(preferred[p.Replicas[0]], part{t, p})
			}
		}
	}
	var recs []record
	for _, b := range img.liveBrokers() {
		parts := preferred[b]
		var notLed []part
		for _, pt := range parts {
			if pt.p.Leader != b {
				notLed = append(notLed, pt)
			}
		}
		// ratio > pct/100, in integers.
		if len(parts) == 0 || len(notLed)*100 <= pct*len(parts) {
			continue
		}
		for _, pt := range notLed {
			if !slices.Contains(pt.p.ISR, b) {
				continue
			}
			recs = append(recs, finishMove(img, partitionChangeRecord{ // reassign.go
				TopicID: pt.t.id, Partition: pt.p.Partition, Leader: b, ISR: slices.Clone(pt.p.ISR),
				LeaderEpoch: pt.p.LeaderEpoch + 1, PartitionEpoch: pt.p.PartitionEpoch + 1,
			}))
		}
	}
	return recs
}
