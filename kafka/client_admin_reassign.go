package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// The Client's partition administration: Kafka's
// AlterPartitionReassignments, ListPartitionReassignments (KIP-455) and
// ElectLeaders (KIP-460), sent to any broker (a KRaft cluster's brokers
// forward them to the controller). The Client is a Reassigner and a
// LeaderElector, so a program's code runs the same against a Client as
// against the server side's backends, and its per-partition errors match
// the same sentinels with errors.Is (ErrInvalidReplicaAssignment,
// ErrNoReassignmentInProgress, ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable,
// log.ErrUnknownTopic).

var (
	_ Reassigner    = (*Client)(nil)
	_ LeaderElector = (*Client)(nil)
)

// Highest versions the Client sends: reassignments v0 (flexible, the only
// one Kafka had until 4.1), ElectLeaders v2 (election type from v1).
const (
	clientReassignMax     = 0
	clientElectLeadersMax = 2
)

// partitionCodeError is the error of a partition's code in a reassignment
// or election answer: the codes kerr's table lacks map to this package's
// sentinels, the others as codeError does.
func partitionCodeError(code int16, msg *string) error {
	if code == errNone {
		return nil
	}
	var err error
	switch code {
	case codeNoReassignmentInProgress:
		err = &Error{Code: code, err: ErrNoReassignmentInProgress}
	case codeElectionNotNeeded:
		err = &Error{Code: code, err: ErrElectionNotNeeded}
	case codePreferredLeaderNotAvailable:
		err = &Error{Code: code, err: ErrPreferredLeaderNotAvailable}
	case codeEligibleLeadersNotAvailable:
		err = &Error{Code: code, err: ErrEligibleLeadersNotAvailable}
	default:
		err = codeError(code)
	}
	if msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}

func int32sOf(xs []int) []int32 {
	if xs == nil {
		return nil
	}
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

func intsOf(xs []int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

// timeoutMillis is the request timeout of ctx's deadline (0: the
// broker's default).
func timeoutMillis(ctx context.Context) int32 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	ms := time.Until(dl).Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms > 1<<31-1 {
		ms = 1<<31 - 1
	}
	return int32(ms)
}

// AlterPartitionReassignments records each target's replicas as the
// partition's new assignment (Replicas nil cancels the partition's
// reassignment in progress), returning one result per partition in the
// cluster's order; the error is the request's (no broker answered, or the
// cluster refused it whole, CLUSTER_AUTHORIZATION_FAILED say).
func (c *Client) AlterPartitionReassignments(ctx context.Context, targets []ReassignTarget) ([]ReassignResult, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = timeoutMillis(ctx)
	if req.TimeoutMillis == 0 {
		req.TimeoutMillis = int32(reassignmentsDefaultTimeout.Milliseconds())
	}
	idx := map[string]int{}
	for _, tg := range targets {
		i, ok := idx[tg.Topic]
		if !ok {
			t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			t.Topic = tg.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			idx[tg.Topic] = i
		}
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition = int32(tg.Partition)
		p.Replicas = int32sOf(tg.Replicas)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := c.Request(ctx, req, clientReassignMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: alter partition reassignments: %w", err)
	}
	r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
	if err := responseErr(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, fmt.Errorf("kafka: alter partition reassignments: %w", err)
	}
	var out []ReassignResult
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			res := ReassignResult{Topic: t.Topic, Partition: int(p.Partition)}
			if err := partitionCodeError(p.ErrorCode, p.ErrorMessage); err != nil {
				res.Err = fmt.Errorf("kafka: reassign %s-%d: %w", t.Topic, p.Partition, err)
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// ListPartitionReassignments returns the reassignments in progress of
// partitions (nil: every partition); partitions not moving are left out.
func (c *Client) ListPartitionReassignments(ctx context.Context, partitions []log.TopicPartition) ([]Reassignment, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = timeoutMillis(ctx)
	if req.TimeoutMillis == 0 {
		req.TimeoutMillis = int32(reassignmentsDefaultTimeout.Milliseconds())
	}
	if partitions != nil {
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		idx := map[string]int{}
		for _, tp := range partitions {
			i, ok := idx[tp.Topic]
			if !ok {
				t := kmsg.NewListPartitionReassignmentsRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
				i = len(req.Topics) - 1
				idx[tp.Topic] = i
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, int32(tp.Partition))
		}
	}
	resp, err := c.Request(ctx, req, clientReassignMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: list partition reassignments: %w", err)
	}
	r := resp.(*kmsg.ListPartitionReassignmentsResponse)
	if err := responseErr(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, fmt.Errorf("kafka: list partition reassignments: %w", err)
	}
	var out []Reassignment
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, Reassignment{
				Topic: t.Topic, Partition: int(p.Partition), Replicas: intsOf(p.Replicas),
				AddingReplicas: intsOf(p.AddingReplicas), RemovingReplicas: intsOf(p.RemovingReplicas),
			})
		}
	}
	return out, nil
}

// ElectLeaders runs a preferred election (unclean: an unclean one) of
// partitions (nil: every partition), returning one result per partition
// in the cluster's order; the error is the request's.
func (c *Client) ElectLeaders(ctx context.Context, unclean bool, partitions []log.TopicPartition) ([]ElectionResult, error) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = electionTypePreferred
	if unclean {
		req.ElectionType = electionTypeUnclean
	}
	req.TimeoutMillis = timeoutMillis(ctx)
	if req.TimeoutMillis == 0 {
		req.TimeoutMillis = int32(electLeadersDefaultTimeout.Milliseconds())
	}
	if partitions != nil {
		req.Topics = []kmsg.ElectLeadersRequestTopic{}
		idx := map[string]int{}
		for _, tp := range partitions {
			i, ok := idx[tp.Topic]
			if !ok {
				t := kmsg.NewElectLeadersRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
				i = len(req.Topics) - 1
				idx[tp.Topic] = i
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, int32(tp.Partition))
		}
	}
	resp, err := c.Request(ctx, req, clientElectLeadersMax)
	if err != nil {
		return nil, fmt.Errorf("kafka: elect leaders: %w", err)
	}
	r := resp.(*kmsg.ElectLeadersResponse)
	if err := responseErr(r.ErrorCode, nil); err != nil {
		return nil, fmt.Errorf("kafka: elect leaders: %w", err)
	}
	var out []ElectionResult
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			res := ElectionResult{Topic: t.Topic, Partition: int(p.Partition)}
			if err := partitionCodeError(p.ErrorCode, p.ErrorMessage); err != nil {
				res.Err = fmt.Errorf("kafka: elect %s-%d: %w", t.Topic, p.Partition, err)
			}
			out = append(out, res)
		}
	}
	return out, nil
}
