package kafka

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
)

// The share-group offsets admin (KIP-932): DescribeShareGroupOffsets,
// AlterShareGroupOffsets and DeleteShareGroupOffsets, answered by the
// share coordinator from the share-partitions' state.

// handleDescribeShareGroupOffsets answers each share-partition's start
// offset and (v1) its lag: the records from the start offset to the high
// watermark not yet acknowledged or archived. A partition asked for that
// has no state has start offset -1, as Kafka answers; null topics ask
// for every share-partition with state.
func handleDescribeShareGroupOffsets(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	coord := c.s.caps.shares.coord()
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if g.GroupID == "" {
			rg.ErrorCode = errInvalidGroupID
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		states := coord.Offsets(g.GroupID)
		want := map[string][]int32{}
		var names []string
		if g.Topics == nil {
			for t := range states {
				if _, ok := want[t.Topic]; !ok {
					names = append(names, t.Topic)
				}
				want[t.Topic] = append(want[t.Topic], int32(t.Partition))
			}
			slices.Sort(names)
			for _, n := range names {
				slices.Sort(want[n])
			}
		} else {
			for _, t := range g.Topics {
				names = append(names, t.Topic)
				want[t.Topic] = t.Partitions
			}
		}
		for _, name := range names {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic, rt.TopicID = name, topicID(name)
			for _, p := range want[name] {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.LeaderEpoch, rp.StartOffset, rp.Lag = p, -1, -1, -1
				st, ok := states[log.TopicPartition{Topic: name, Partition: int(p)}]
				if ok {
					rp.StartOffset = st.StartOffset
					if hw, err := c.s.b.ListOffset(ctx, log.TopicPartition{Topic: name, Partition: int(p)}, log.LatestOffset); err == nil {
						rp.Lag = max(hw-st.StartOffset-int64(st.Acknowledged+st.Archived), 0)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply{resp: resp}
}

// handleAlterShareGroupOffsets sets the start offsets of share-partitions
// of a group without members (NON_EMPTY_GROUP otherwise, for the whole
// request, as Kafka answers it).
func handleAlterShareGroupOffsets(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if req.GroupID == "" {
		resp.ErrorCode = errInvalidGroupID
		return reply{resp: resp}
	}
	if c.s.groups != nil && groupTaken(c.s, req.GroupID) {
		resp.ErrorCode = errGroupIDNotFound
		resp.ErrorMessage = kmsg.StringPtr("Group " + req.GroupID + " is not a share group.")
		return reply{resp: resp}
	}
	offsets := map[log.TopicPartition]int64{}
	codes := map[log.TopicPartition]int16{}
	for _, t := range req.Topics {
		n, err := c.s.b.Partitions(ctx, t.Topic)
		for _, p := range t.Partitions {
			tp := log.TopicPartition{Topic: t.Topic, Partition: int(p.Partition)}
			switch {
			case err != nil || p.Partition < 0 || int(p.Partition) >= n || strings.HasPrefix(t.Topic, "__"):
				codes[tp] = errUnknownTopicOrPartition
			case p.StartOffset < 0:
				codes[tp] = errInvalidRequest
			default:
				offsets[tp] = p.StartOffset
			}
		}
	}
	if len(offsets) > 0 {
		if err := c.s.caps.shares.coord().AlterOffsets(ctx, req.GroupID, offsets); err != nil {
			resp.ErrorCode = groupCode(ctx, err)
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
			return reply{resp: resp}
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, topicID(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[log.TopicPartition{Topic: t.Topic, Partition: int(p.Partition)}]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}

// handleDeleteShareGroupOffsets deletes the share-partition state of
// topics of a group without members.
func handleDeleteShareGroupOffsets(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if req.GroupID == "" {
		resp.ErrorCode = errInvalidGroupID
		return reply{resp: resp}
	}
	coord := c.s.caps.shares.coord()
	if _, ok := coord.Describe(req.GroupID); !ok {
		resp.ErrorCode = errGroupIDNotFound
		return reply{resp: resp}
	}
	var topics []string
	for _, t := range req.Topics {
		topics = append(topics, t.Topic)
	}
	if err := coord.DeleteOffsets(ctx, req.GroupID, topics); err != nil {
		resp.ErrorCode = groupCode(ctx, err)
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return reply{resp: resp}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, topicID(t.Topic)
		if _, err := c.s.b.Partitions(ctx, t.Topic); err != nil {
			rt.ErrorCode = errUnknownTopicOrPartition
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}
