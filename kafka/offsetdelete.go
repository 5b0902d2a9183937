package kafka

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete (KIP-496) deletes a group's committed offsets of some
// partitions, served by the group's coordinator (group.Coordinator's
// DeleteOffsets decides which may go).

const offsetDeleteKey int16 = 47

// offsetDeleteAPIs are served with the group APIs.
var offsetDeleteAPIs = []api{{key: offsetDeleteKey, min: 0, max: 0, handle: handleOffsetDelete}}

// handleOffsetDelete deletes the commits asked for: a partition that does
// not exist is UNKNOWN_TOPIC_OR_PARTITION, one the active group consumes
// GROUP_SUBSCRIBED_TO_TOPIC; a group-level error (not this node's group,
// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) is answered alone, with no
// partition, as Kafka answers it.
func handleOffsetDelete(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.OffsetDeleteRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	gc, code := s.coordinatorFor(ctx, req.Group)
	if code != errNone {
		resp.ErrorCode = code
		return reply{resp: resp}
	}
	var tps []log.TopicPartition
	unknown := map[log.TopicPartition]bool{}
	for _, t := range req.Topics {
		n, err := s.b.Partitions(ctx, t.Topic)
		for _, rp := range t.Partitions {
			p := rp.Partition
			tp := log.TopicPartition{Topic: t.Topic, Partition: int(p)}
			if err != nil || p < 0 || int(p) >= n {
				unknown[tp] = true
				continue
			}
			tps = append(tps, tp)
		}
	}
	if tps == nil {
		tps = []log.TopicPartition{}
	}
	res, err := gc.DeleteOffsets(ctx, req.Group, tps)
	if err != nil {
		resp.ErrorCode = groupCode(ctx, err)
		return reply{resp: resp}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, pp := range t.Partitions {
			p := pp.Partition
			tp := log.TopicPartition{Topic: t.Topic, Partition: int(p)}
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p
			if unknown[tp] {
				rp.ErrorCode = errUnknownTopicOrPartition
			} else {
				rp.ErrorCode = errorCode(res[tp])
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}
