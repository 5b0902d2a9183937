package replica

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/log"
)

// CreatePartitions grows topic to count partitions in all (Kafka's
// CreatePartitions: count is the new total) through the controller: the
// new partitions continue the topic's replica assignment, with its
// replication factor, and each member opens its replicas of them as it
// applies the change. It returns once the change is committed and applied
// on this member and every new partition has a leader.
//
// A count not above the current one (or beyond the controller's limit) is
// log.ErrInvalidConfig, an unknown topic log.ErrUnknownTopic; neither
// changes anything. The member's kafka.Server serves CreatePartitions
// with it.
func (b *Broker) CreatePartitions(ctx context.Context, topic string, count int) error {
	if err := log.ValidTopicName(topic); err != nil {
		return err
	}
	t, err := b.ctl.CreatePartitions(ctx, topic, count)
	if err != nil {
		return controllerErr(err)
	}
	return b.awaitTopic(ctx, t, fmt.Sprintf("%s has %d partitions", topic, count))
}
