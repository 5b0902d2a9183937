package kafka

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleListOffsets answers earliest (-2), latest (-1: the high
// watermark, or the last stable offset for isolation level read_committed,
// v2+) and by timestamp (the first offset whose record is at least that
// recent, through the time index; -1 when no record is).
func handleListOffsets(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ListOffsetsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, 0
			tp := log.TopicPartition{Topic: rt.Topic, Partition: int(rp.Partition)}
			switch {
			case rp.Timestamp < log.EarliestOffset:
				p.ErrorCode = errInvalidRequest // special timestamps of later versions
			default:
				at := rp.Timestamp
				if at == log.LatestOffset && req.Version >= 2 && req.IsolationLevel == 1 {
					at = log.LatestStableOffset
				}
				off, err := s.b.ListOffset(ctx, tp, at)
				p.ErrorCode = errorCode(err)
				if err == nil && rp.Timestamp >= 0 {
					// Kafka's answer when no record is that recent.
					if end, err := s.b.ListOffset(ctx, tp, log.LatestOffset); err == nil && off >= end {
						off = -1
					} else {
						p.Timestamp = rp.Timestamp
					}
				}
				if err == nil {
					p.Offset = off
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return reply{resp: resp}
}
