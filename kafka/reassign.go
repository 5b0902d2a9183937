package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"

	"github.com/strata-log/strata/internal/reassign"
)

// Reassigner is a cluster member that moves partitions between brokers
// (Kafka's AlterPartitionReassignments and ListPartitionReassignments,
// KIP-455). A target's Replicas nil cancels the partition's reassignment
// in progress. A partition's Err errors.Is ErrInvalidReplicaAssignment
// (INVALID_REPLICA_ASSIGNMENT), ErrNoReassignmentInProgress
// (NO_REASSIGNMENT_IN_PROGRESS) or log.ErrUnknownTopic /
// log.ErrUnknownPartition (UNKNOWN_TOPIC_OR_PARTITION).
// ListPartitionReassignments returns the reassignments in progress of the
// given partitions (nil: every partition), skipping the others.
type Reassigner interface {
	AlterPartitionReassignments(ctx context.Context, targets []ReassignTarget) ([]ReassignResult, error)
	ListPartitionReassignments(ctx context.Context, partitions []log.TopicPartition) ([]Reassignment, error)
}

// ReassignTarget is one partition's target replicas (nil: cancel);
// KeepReplicationFactor refuses a target of another replica count than
// the partition's replication factor (log.ErrInvalidReplicationFactor:
// AlterPartitionReassignments v1's AllowReplicationFactorChange false).
// ReassignResult is one partition's outcome (Err nil when recorded),
// Reassignment one in progress (Replicas: the target, then the removing
// ones). The controller package has the same types (internal/reassign).
type (
	ReassignTarget = reassign.Target
	ReassignResult = reassign.Result
	Reassignment   = reassign.Reassignment
)

var (
	// ErrInvalidReplicaAssignment: target replicas that are empty, repeat
	// a broker or name an unknown one (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidReplicaAssignment = kerr.ErrInvalidReplicaAssignment
	// ErrNoReassignmentInProgress: a cancel of a partition that is not
	// moving (NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignmentInProgress = errors.New("kafka: no reassignment in progress")
)

const (
	alterPartitionReassignmentsKey  int16 = 45
	listPartitionReassignmentsKey   int16 = 46
	codeNoReassignmentInProgress    int16 = 85
	reassignmentsDefaultTimeout           = 60 * time.Second
	codeInvalidReplicaAssignmentErr       = kerr.InvalidReplicaAssignment
)

var reassignAPIs = []api{
	// v1 (KIP-860): AllowReplicationFactorChange. Kafka 4's versions.
	{key: alterPartitionReassignmentsKey, min: 0, max: 1, handle: handleAlterPartitionReassignments},
	{key: listPartitionReassignmentsKey, min: 0, max: 0, handle: handleListPartitionReassignments},
}

// Kafka's rules: altering reassignments needs Alter on the cluster,
// listing them Describe on it; refused, the answer is
// CLUSTER_AUTHORIZATION_FAILED at the top and no handler runs.
func init() {
	authorizeRules[alterPartitionReassignmentsKey] = authorizeCluster(acl.OpAlter)
	authorizeRules[listPartitionReassignmentsKey] = authorizeCluster(acl.OpDescribe)
}

// reassignCode is the Kafka error code of a partition's reassignment error.
func reassignCode(err error) int16 {
	return partitionCode(err,
		kerr.Row{Err: ErrNoReassignmentInProgress, Code: codeNoReassignmentInProgress},
		kerr.Row{Err: ErrInvalidReplicaAssignment, Code: codeInvalidReplicaAssignmentErr})
}

func reassignTimeout(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	d := reassignmentsDefaultTimeout
	if ms > 0 {
		d = time.Duration(ms) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}

// handleAlterPartitionReassignments records the targets through the
// Reassigner; each partition is answered on its own.
func handleAlterPartitionReassignments(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.Version < 1 || req.AllowReplicationFactorChange
	var targets []ReassignTarget
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tg := ReassignTarget{Topic: t.Topic, Partition: int(p.Partition), KeepReplicationFactor: req.Version >= 1 && !req.AllowReplicationFactorChange}
			if p.Replicas != nil {
				tg.Replicas = make([]int, len(p.Replicas))
				for i, x := range p.Replicas {
					tg.Replicas[i] = int(x)
				}
			}
			targets = append(targets, tg)
		}
	}
	if len(targets) == 0 {
		return reply{resp: resp}
	}
	ctx, cancel := reassignTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	res, err := c.s.caps.reassigner.AlterPartitionReassignments(ctx, targets)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return reply{resp: resp}
	}
	for _, x := range res {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != x.Topic {
			t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			t.Topic = x.Topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		p.Partition = int32(x.Partition)
		if x.Err != nil {
			p.ErrorCode = reassignCode(x.Err)
			p.ErrorMessage = kmsg.StringPtr(x.Err.Error())
		}
		t.Partitions = append(t.Partitions, p)
	}
	return reply{resp: resp}
}

// handleListPartitionReassignments lists the reassignments in progress:
// null topics is every partition; partitions that are not moving, or do
// not exist, are left out (as Kafka's controller does).
func handleListPartitionReassignments(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	tps := requestedPartitions(req.Topics, func(t kmsg.ListPartitionReassignmentsRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
	ctx, cancel := reassignTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	moves, err := c.s.caps.reassigner.ListPartitionReassignments(ctx, tps)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return reply{resp: resp}
	}
	int32s := func(xs []int) []int32 {
		out := make([]int32, len(xs))
		for i, x := range xs {
			out[i] = int32(x)
		}
		return out
	}
	for _, m := range moves {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != m.Topic {
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic = m.Topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		p.Partition = int32(m.Partition)
		p.Replicas, p.AddingReplicas, p.RemovingReplicas = int32s(m.Replicas), int32s(m.AddingReplicas), int32s(m.RemovingReplicas)
		t.Partitions = append(t.Partitions, p)
	}
	return reply{resp: resp}
}
