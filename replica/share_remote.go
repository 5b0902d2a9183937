package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

// The offsets admin of share groups in a cluster (share.RemotePlacement):
// a group's coordinator answers DescribeShareGroupOffsets,
// AlterShareGroupOffsets and DeleteShareGroupOffsets for every partition,
// asking each partition's leader for its part — its share coordinator in
// the process over the LocalNetwork, its Kafka server over the
// Kafka-protocol transport (the same admin request, which a member that
// does not coordinate the group answers from the share-partitions it
// holds).

var _ share.RemotePlacement = sharePlacement{}

// shareRemoteTimeout bounds a call to another member (Offsets has no
// context of its own).
const shareRemoteTimeout = 10 * time.Second

// otherMembers returns the live members other than this one.
func (b *Broker) otherMembers() []int {
	var out []int
	for _, bi := range b.img.Load().Brokers() {
		if bi.ID != b.cfg.ID && !bi.Fenced {
			out = append(out, bi.ID)
		}
	}
	return out
}

// atMember runs local with member id's share coordinator over an
// in-process transport, or sends req to it over the Kafka-protocol one.
func (b *Broker) atMember(ctx context.Context, id int, local func(*share.Coordinator) error, req kmsg.Request, answer func(kmsg.Response) error) error {
	if b.ktr != nil {
		resp, err := b.ktr.do(ctx, id, req)
		if err != nil {
			return err
		}
		return answer(resp)
	}
	return b.tr.Group(ctx, id, func(g log.GroupClient) error {
		lg, ok := g.(localGroups)
		if !ok {
			return fmt.Errorf("%w (broker %d)", ErrSharesUnsupported, id)
		}
		return local(lg.b.shares.c)
	})
}

// RemoteOffsets asks every other member for the state of group's
// share-partitions it holds and keeps each partition's from its leader.
func (p sharePlacement) RemoteOffsets(group string) map[share.TopicPartition]share.PartitionState {
	b := p.b
	ctx, cancel := context.WithTimeout(b.ctx, shareRemoteTimeout)
	defer cancel()
	out := map[share.TopicPartition]share.PartitionState{}
	for _, id := range b.otherMembers() {
		for t, ps := range p.remoteOffsetsAt(ctx, id, group) {
			if l, err := b.leaderOf(t); err == nil && l == id {
				out[t] = ps
			}
		}
	}
	return out
}

// AlterRemote sets the start offsets at each partition's leader.
func (p sharePlacement) AlterRemote(ctx context.Context, group string, offsets map[share.TopicPartition]int64) error {
	b := p.b
	byLeader := map[int]map[share.TopicPartition]int64{}
	for t, off := range offsets {
		l, err := b.leaderOf(t)
		if err != nil {
			return fmt.Errorf("replica: alter share group offsets of %s-%d: %w", t.Topic, t.Partition, err)
		}
		if byLeader[l] == nil {
			byLeader[l] = map[share.TopicPartition]int64{}
		}
		byLeader[l][t] = off
	}
	for id, sub := range byLeader {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		for t, off := range sub {
			rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
			rt.Topic = t.Topic
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = int32(t.Partition), off
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		err := b.atMember(ctx, id, func(c *share.Coordinator) error { return c.AlterOffsets(ctx, group, sub) }, req, func(r kmsg.Response) error {
			resp := r.(*kmsg.AlterShareGroupOffsetsResponse)
			if err := errOf(resp.ErrorCode); err != nil {
				return err
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := errOf(rp.ErrorCode); err != nil {
						return fmt.Errorf("%s-%d: %w", rt.Topic, rp.Partition, err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("replica: alter share group offsets at broker %d: %w", id, err)
		}
	}
	return nil
}

// DeleteRemote deletes the state of group's share-partitions of topics
// (nil: all) at every other member; a member that holds none is no
// error.
func (p sharePlacement) DeleteRemote(ctx context.Context, group string, topics []string) error {
	b := p.b
	for _, id := range b.otherMembers() {
		names := topics
		if names == nil {
			// All of them: the topics the member holds state of.
			seen := map[string]bool{}
			for t := range p.remoteOffsetsAt(ctx, id, group) {
				if !seen[t.Topic] {
					seen[t.Topic] = true
					names = append(names, t.Topic)
				}
			}
			if len(names) == 0 {
				continue
			}
		}
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = group
		for _, n := range names {
			rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
			rt.Topic = n
			req.Topics = append(req.Topics, rt)
		}
		err := b.atMember(ctx, id, func(c *share.Coordinator) error {
			var err error
			if topics == nil {
				err = c.DeleteGroup(ctx, group)
			} else {
				err = c.DeleteOffsets(ctx, group, topics)
			}
			if errors.Is(err, share.ErrGroupNotFound) {
				return nil
			}
			return err
		}, req, func(r kmsg.Response) error {
			resp := r.(*kmsg.DeleteShareGroupOffsetsResponse)
			if resp.ErrorCode == kerr.GroupIDNotFound {
				return nil
			}
			return errOf(resp.ErrorCode)
		})
		if err != nil {
			return fmt.Errorf("replica: delete share group offsets at broker %d: %w", id, err)
		}
	}
	return nil
}

// remoteOffsetsAt is the state member id holds of group's
// share-partitions. Over the wire its in-flight records are not told:
// the records done with are counted as acknowledged, from the lag
// answered, so that the lag comes out the same.
func (p sharePlacement) remoteOffsetsAt(ctx context.Context, id int, group string) map[share.TopicPartition]share.PartitionState {
	b := p.b
	out := map[share.TopicPartition]share.PartitionState{}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = 1
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	req.Groups = append(req.Groups, rg)
	err := b.atMember(ctx, id, func(c *share.Coordinator) error {
		for t, ps := range c.Offsets(group) {
			out[t] = ps
		}
		return nil
	}, req, func(r kmsg.Response) error {
		for _, g := range r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups {
			for _, rt := range g.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 || rp.StartOffset < 0 {
						continue
					}
					t := share.TopicPartition{Topic: rt.Topic, Partition: int(rp.Partition)}
					ps := share.PartitionState{StartOffset: rp.StartOffset}
					if hw, err := b.ListOffset(ctx, t, log.LatestOffset); err == nil && rp.Lag >= 0 {
						ps.Acknowledged = int(max(hw-rp.StartOffset-rp.Lag, 0))
					}
					out[t] = ps
				}
			}
		}
		return nil
	})
	if err != nil {
		b.log.Warn("replica: describe share group offsets at another member", "group", group, "broker", id, "err", err)
	}
	return out
}
