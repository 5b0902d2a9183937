package log

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
)

// assignRange is the group leader's work: Kafka's RangeAssignor over the
// subscriptions of the members (decoded from their ConsumerProtocol
// metadata, whichever client sent it) and the partition counts the leader
// sees now, each member's share encoded as a ConsumerProtocol assignment.
// A topic unknown to the leader is assigned to no one; a member whose
// metadata does not decode is an error (the leader cannot assign for it),
// and the SyncGroup is not sent.
func (c *Consumer) assignRange(ctx context.Context, members []group.MemberMetadata) (map[string][]byte, error) {
	subs := make(map[string][]string, len(members))
	counts := map[string]int{}
	for _, m := range members {
		topics, err := assign.DecodeSubscription(m.Metadata)
		if err != nil {
			return nil, fmt.Errorf("log: consumer: subscription of member %q: %w", m.ID, err)
		}
		subs[m.ID] = topics
		for _, t := range topics {
			if _, seen := counts[t]; seen {
				continue
			}
			n, err := c.client.Partitions(ctx, t)
			switch {
			case errors.Is(err, ErrUnknownTopic):
				n = 0
			case err != nil:
				return nil, fmt.Errorf("log: consumer: partitions of %q: %w", t, err)
			}
			counts[t] = n
		}
	}
	out := make(map[string][]byte, len(subs))
	for id, tps := range assign.Range(subs, counts) {
		out[id] = assign.EncodeAssignment(tps)
	}
	return out, nil
}
