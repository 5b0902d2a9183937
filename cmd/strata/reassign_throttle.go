package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
)

// The throttles of `strata reassign --execute --throttle`, as
// kafka-reassign-partitions.sh sets them and --verify removes them.

// reassignThrottles are the throttled replicas of the moves: per topic,
// the current replicas of each moving partition (the leader's side) and
// its new ones (the follower's side), as partition:broker lists; and the
// brokers of the moves.
func reassignThrottles(cur, moves reassignmentFile) (leader, follower map[string][]string, brokers []int32) {
	leader, follower = map[string][]string{}, map[string][]string{}
	for _, m := range moves.Partitions {
		i := slices.IndexFunc(cur.Partitions, func(p reassignPartition) bool { return p.Topic == m.Topic && p.Partition == m.Partition })
		if i < 0 || slices.Equal(cur.Partitions[i].Replicas, m.Replicas) {
			continue // not moving
		}
		for _, b := range cur.Partitions[i].Replicas {
			leader[m.Topic] = append(leader[m.Topic], fmt.Sprintf("%d:%d", m.Partition, b))
			brokers = append(brokers, b)
		}
		for _, b := range m.Replicas {
			if !slices.Contains(cur.Partitions[i].Replicas, b) {
				follower[m.Topic] = append(follower[m.Topic], fmt.Sprintf("%d:%d", m.Partition, b))
			}
			brokers = append(brokers, b)
		}
	}
	slices.Sort(brokers)
	return leader, follower, slices.Compact(brokers)
}

// setReassignThrottles sets the rate on the brokers of the moves and the
// throttled replicas on their topics.
func (a *admin) setReassignThrottles(cur, moves reassignmentFile, rate int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	leader, follower, brokers := reassignThrottles(cur, moves)
	for _, b := range brokers {
		err := a.c.AlterBrokerConfigs(ctx, int(b), []kafka.ConfigChange{
			{Name: kafka.LeaderThrottledRateConfig, Value: fmt.Sprint(rate)},
			{Name: kafka.FollowerThrottledRateConfig, Value: fmt.Sprint(rate)},
		})
		if err != nil {
			return fmt.Errorf("throttle of broker %d: %w", b, err)
		}
	}
	for _, t := range sortedKeys(leader, follower) {
		err := a.c.AlterTopicConfigs(ctx, t, []kafka.ConfigChange{
			{Name: kafka.LeaderThrottledReplicasConfig, Value: strings.Join(leader[t], ",")},
			{Name: kafka.FollowerThrottledReplicasConfig, Value: strings.Join(follower[t], ",")},
		})
		if err != nil {
			return fmt.Errorf("throttled replicas of topic %s: %w", t, err)
		}
	}
	return nil
}

func sortedKeys(ms ...map[string][]string) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// clearReassignThrottles removes the rates from every broker and the
// throttled replicas from the topics, as --verify does once the moves
// are done.
func (a *admin) clearReassignThrottles(e *env, topics []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	r, err := a.do(req, 7)
	if err != nil {
		return err
	}
	var ids []string
	for _, b := range r.(*kmsg.MetadataResponse).Brokers {
		err := a.c.AlterBrokerConfigs(ctx, int(b.NodeID), []kafka.ConfigChange{
			{Name: kafka.LeaderThrottledRateConfig, Delete: true},
			{Name: kafka.FollowerThrottledRateConfig, Delete: true},
		})
		if err != nil {
			return fmt.Errorf("clearing the throttle of broker %d: %w", b.NodeID, err)
		}
		ids = append(ids, fmt.Sprint(b.NodeID))
	}
	slices.Sort(ids)
	fmt.Fprintf(e.stdout, "Clearing broker-level throttles on brokers %s\n", strings.Join(ids, ","))
	for _, t := range topics {
		err := a.c.AlterTopicConfigs(ctx, t, []kafka.ConfigChange{
			{Name: kafka.LeaderThrottledReplicasConfig, Delete: true},
			{Name: kafka.FollowerThrottledReplicasConfig, Delete: true},
		})
		if err != nil {
			return fmt.Errorf("clearing the throttled replicas of topic %s: %w", t, err)
		}
	}
	fmt.Fprintf(e.stdout, "Clearing topic-level throttles on topics %s\n", strings.Join(topics, ","))
	return nil
}
