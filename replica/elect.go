package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// ElectLeaders elects partition leaders on demand (Kafka's ElectLeaders):
// controller.ElectPreferred moves each partition's leadership to its first
// replica when that one is live and in the ISR; controller.ElectUnclean
// gives a leaderless partition a leader, from outside the ISR if no ISR
// member is live (records only the old ISR had are lost: ask for it only
// then). partitions nil: every partition. Each result says the partition's
// new leader or why none was elected; the call returns once the changes
// are committed and applied on this member.
func (b *Broker) ElectLeaders(ctx context.Context, typ controller.ElectionType, partitions []log.TopicPartition) ([]controller.ElectionResult, error) {
	var targets []controller.ElectTarget
	if partitions != nil {
		targets = make([]controller.ElectTarget, 0, len(partitions))
		for _, tp := range partitions {
			targets = append(targets, controller.ElectTarget{Topic: tp.Topic, Partition: tp.Partition})
		}
	}
	res, version, err := b.ctl.ElectLeaders(ctx, typ, targets)
	if err != nil {
		return nil, fmt.Errorf("replica: elect leaders: %w", controllerErr(err))
	}
	if version > 0 {
		if _, err := b.WaitImage(ctx, version-1); err != nil {
			return res, fmt.Errorf("replica: elect leaders: committed, not yet applied here: %w", err)
		}
	}
	for i := range res {
		if res[i].Err != nil {
			res[i].Err = controllerErr(res[i].Err)
		}
	}
	return res, nil
}

var _ kafka.LeaderElector = kafkaBackend{}

// ElectLeaders is Broker.ElectLeaders as the Kafka server answers it.
func (b kafkaBackend) ElectLeaders(ctx context.Context, unclean bool, partitions []log.TopicPartition) ([]kafka.ElectionResult, error) {
	typ := controller.ElectPreferred
	if unclean {
		typ = controller.ElectUnclean
	}
	res, err := b.Broker.ElectLeaders(ctx, typ, partitions)
	if err != nil {
		return nil, err
	}
	out := make([]kafka.ElectionResult, len(res))
	for i, r := range res {
		out[i] = kafka.ElectionResult{Topic: r.Topic, Partition: r.Partition, Err: electErr(r.Err)}
	}
	return out, nil
}

// electErr maps a partition's election error to the Kafka server's.
func electErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, controller.ErrElectionNotNeeded):
		return fmt.Errorf("%w: %w", kafka.ErrElectionNotNeeded, err)
	case errors.Is(err, controller.ErrPreferredLeaderNotAvailable):
		return fmt.Errorf("%w: %w", kafka.ErrPreferredLeaderNotAvailable, err)
	case errors.Is(err, controller.ErrEligibleLeadersNotAvailable):
		return fmt.Errorf("%w: %w", kafka.ErrEligibleLeadersNotAvailable, err)
	case errors.Is(err, controller.ErrUnknownPartition):
		return fmt.Errorf("%w: %w", log.ErrUnknownPartition, err)
	}
	return err
}
