package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleCreatePartitions grows topics through the PartitionCreator, each
// with its own error: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS for a
// count not above the current one (or above maxTopicPartitions),
// INVALID_REPLICA_ASSIGNMENT for a manual assignment (the brokers place
// replicas), INVALID_REQUEST for a topic listed twice. validate_only
// checks and changes nothing.
func handleCreatePartitions(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	pc := c.s.caps.partitions
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("%w: topic %s is listed more than once", errInvalidRequestErr, rt.Topic)
		} else {
			err = c.s.createPartitions(ctx, pc, rt, req.ValidateOnly)
		}
		if err != nil {
			t.ErrorCode, t.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}

// createPartitions grows (or, validateOnly, checks) one topic.
func (s *Server) createPartitions(ctx context.Context, pc PartitionCreator, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	if err := log.ValidTopicName(rt.Topic); err != nil {
		return err
	}
	if rt.Assignment != nil {
		return fmt.Errorf("%w: manual replica assignment", errInvalidReplicaAssignmentErr)
	}
	if rt.Count <= 0 || rt.Count > maxTopicPartitions {
		return fmt.Errorf("%w: %d partitions (1 to %d)", errInvalidPartitionsErr, rt.Count, maxTopicPartitions)
	}
	if !validateOnly {
		return pc.CreatePartitions(ctx, rt.Topic, int(rt.Count))
	}
	n, err := s.b.Partitions(ctx, rt.Topic)
	if err != nil {
		return err
	}
	if int(rt.Count) <= n {
		return fmt.Errorf("%w: %s has %d partitions, asked for %d", log.ErrInvalidPartitions, rt.Topic, n, rt.Count)
	}
	return nil
}

// handleDeleteRecords moves partitions' log start offsets through the
// RecordsDeleter: each partition gets its low watermark (the new start) or
// its error, -1 with it: OFFSET_OUT_OF_RANGE past the high watermark,
// UNKNOWN_TOPIC_OR_PARTITION.
func handleDeleteRecords(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	rd := c.s.caps.records
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.LowWatermark = rp.Partition, -1
			var err error
			switch {
			case rp.Offset < -1:
				err = fmt.Errorf("%w: offset %d", log.ErrOffsetOutOfRange, rp.Offset)
			default:
				var low int64
				low, err = rd.DeleteRecords(ctx, log.TopicPartition{Topic: rt.Topic, Partition: int(rp.Partition)}, rp.Offset)
				if err == nil {
					p.LowWatermark = low
				}
			}
			p.ErrorCode = errorCode(err)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}

// handleStandaloneOffsetForLeaderEpoch answers OffsetForLeaderEpoch from
// the partitions' leader-epoch caches (EpochEndOffsetter): for each
// partition, the largest epoch at or below the one asked that it knows
// and the offset where that epoch ended. A standalone broker's Metadata
// gives every partition leader epoch 0: a current leader epoch above it is
// UNKNOWN_LEADER_EPOCH (the client knows of a leader this broker does
// not), below it FENCED_LEADER_EPOCH.
func handleStandaloneOffsetForLeaderEpoch(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	eo := c.s.caps.epochs
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			switch {
			case rp.CurrentLeaderEpoch > standaloneLeaderEpoch:
				p.ErrorCode = errUnknownLeaderEpoch
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < standaloneLeaderEpoch:
				p.ErrorCode = errFencedLeaderEpoch
			default:
				epoch, end, err := eo.EndOffsetForEpoch(log.TopicPartition{Topic: rt.Topic, Partition: int(rp.Partition)}, rp.LeaderEpoch)
				p.ErrorCode = errorCode(err)
				if err == nil {
					p.LeaderEpoch, p.EndOffset = epoch, end
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}

// standaloneLeaderEpoch is the leader epoch Metadata gives every partition
// of a standalone broker.
const standaloneLeaderEpoch = 0
