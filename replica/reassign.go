package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// Partition reassignment (Kafka's AlterPartitionReassignments and
// ListPartitionReassignments, KIP-455): the controller records the target
// replicas (controller/reassign.go); each member applies the metadata as
// always — a member newly listed opens an empty replica and follows the
// leader, the leader adds it to the ISR once it has caught up, which
// completes the move — and a member no longer listed deletes its replica
// (metadata.go).

// AlterPartitionReassignments starts, replaces or cancels reassignments
// (a target's Replicas nil cancels) and returns each partition's outcome
// once the changes are committed and applied on this member. The moves
// then go on in the background: ListPartitionReassignments shows those in
// progress.
func (b *Broker) AlterPartitionReassignments(ctx context.Context, targets []controller.ReassignTarget) ([]controller.ReassignResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)()
	res, version, err := b.ctl.AlterPartitionReassignments(ctx, targets)
	if err != nil {
		return nil, fmt.Errorf("replica: alter partition reassignments: %w", controllerErr(err))
	}
	if version > 0 {
		if _, err := b.WaitImage(ctx, version-1); err != nil {
			return res, fmt.Errorf("replica: alter partition reassignments: committed, not yet applied here: %w", err)
		}
	}
	for i := range res {
		if res[i].Err != nil {
			res[i].Err = reassignErr(res[i].Err)
		}
	}
	return res, nil
}

// ListPartitionReassignments returns the reassignments in progress as this
// member has applied the metadata, of the given partitions (nil: all). A
// partition that does not exist is log.ErrUnknownTopic or
// log.ErrUnknownPartition.
func (b *Broker) ListPartitionReassignments(partitions []log.TopicPartition) ([]controller.Reassignment, error) {
	img := b.img.Load()
	all := img.Reassignments()
	if partitions == nil {
		return all, nil
	}
	var out []controller.Reassignment
	for _, tp := range partitions {
		n, ok := img.PartitionCount(tp.Topic)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s", log.ErrUnknownTopic, tp.Topic)
		case tp.Partition < 0 || tp.Partition >= n:
			return nil, fmt.Errorf("%w: %s-%d", log.ErrUnknownPartition, tp.Topic, tp.Partition)
		}
		if i := slices.IndexFunc(all, func(r controller.Reassignment) bool {
			return r.Topic == tp.Topic && r.Partition == tp.Partition
		}); i >= 0 && !slices.ContainsFunc(out, func(r controller.Reassignment) bool {
			return r.Topic == tp.Topic && r.Partition == tp.Partition
		}) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// reassignErr maps a partition's reassignment error to log's sentinels
// where there is one; the controller's own (ErrInvalidReplicaAssignment,
// ErrNoReassignmentInProgress) stay testable with errors.Is.
func reassignErr(err error) error {
	if errors.Is(err, controller.ErrUnknownPartition) {
		return fmt.Errorf("%w: %w", log.ErrUnknownPartition, err)
	}
	return controllerErr(err)
}

var _ kafka.Reassigner = kafkaBackend{}

// AlterPartitionReassignments is Broker.AlterPartitionReassignments as the
// Kafka server answers it.
func (b kafkaBackend) AlterPartitionReassignments(ctx context.Context, targets []kafka.ReassignTarget) ([]kafka.ReassignResult, error) {
	// kafka's and controller's types are one (internal/reassign).
	res, err := b.Broker.AlterPartitionReassignments(ctx, targets)
	if err != nil {
		return nil, err
	}
	out := make([]kafka.ReassignResult, len(res))
	for i, r := range res {
		out[i] = kafka.ReassignResult{Topic: r.Topic, Partition: r.Partition, Err: kafkaReassignErr(r.Err)}
	}
	return out, nil
}

// ListPartitionReassignments is Broker.ListPartitionReassignments as the
// Kafka server answers it: partitions that do not exist are left out.
func (b kafkaBackend) ListPartitionReassignments(_ context.Context, partitions []log.TopicPartition) ([]kafka.Reassignment, error) {
	all, err := b.Broker.ListPartitionReassignments(nil)
	if err != nil {
		return nil, err
	}
	var out []kafka.Reassignment
	for _, r := range all {
		if partitions == nil || slices.Contains(partitions, log.TopicPartition{Topic: r.Topic, Partition: r.Partition}) {
			out = append(out, r)
		}
	}
	return out, nil
}

// kafkaReassignErr maps a partition's reassignment error to the Kafka
// server's.
func kafkaReassignErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, controller.ErrInvalidReplicaAssignment):
		return fmt.Errorf("%w: %w", kafka.ErrInvalidReplicaAssignment, err)
	case errors.Is(err, controller.ErrNoReassignmentInProgress):
		return fmt.Errorf("%w: %w", kafka.ErrNoReassignmentInProgress, err)
	}
	return err
}
