package kafka

import (
	"context"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxOffsetMetadata is the longest commit metadata accepted (Kafka's
// offset.metadata.max.bytes). The coordinator keeps it, with the leader
// epoch of the commit (v6+), and OffsetFetch returns both.
const maxOffsetMetadata = 4096

// codeCommitted stands in commitOffsets' codes for a partition that goes to
// the coordinator: it is answered the commit's code.
const codeCommitted = -2

// commitPartition is what commitOffsets reads of one partition of an
// OffsetCommit or TxnOffsetCommit request.
type commitPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
}

// commitOffsets checks the partitions of an OffsetCommit or TxnOffsetCommit
// as Kafka checks both: a partition of a topic the broker does not have is
// UNKNOWN_TOPIC_OR_PARTITION, metadata past offset.metadata.max.bytes
// OFFSET_METADATA_TOO_LARGE. It returns the offsets of the others, to be
// committed as one, and each partition's code by topic and partition
// index, codeCommitted for those committed. The leader epoch is kept when
// withEpoch (the request version carries it) and it is not negative.
func commitOffsets[T, P any](ctx context.Context, c *conn, topics []T, split func(*T) (string, []P),
	read func(*P) commitPartition, withEpoch bool) (map[log.TopicPartition]group.CommittedOffset, [][]int16) {
	offsets := map[log.TopicPartition]group.CommittedOffset{}
	codes := make([][]int16, len(topics))
	for i := range topics {
		topic, parts := split(&topics[i])
		n, err := c.s.b.Partitions(ctx, topic)
		codes[i] = make([]int16, len(parts))
		for j := range parts {
			p := read(&parts[j])
			switch {
			case err != nil || p.partition < 0 || int(p.partition) >= n:
				codes[i][j] = errUnknownTopicOrPartition
			case p.metadata != nil && len(*p.metadata) > maxOffsetMetadata:
				codes[i][j] = errOffsetMetadataTooLarge
			default:
				codes[i][j] = codeCommitted
				co := group.CommittedOffset{Offset: p.offset, LeaderEpoch: -1}
				if withEpoch && p.leaderEpoch >= 0 {
					co.LeaderEpoch = p.leaderEpoch
				}
				if p.metadata != nil {
					co.Metadata = *p.metadata
				}
				offsets[log.TopicPartition{Topic: topic, Partition: int(p.partition)}] = co
			}
		}
	}
	return offsets, codes
}

// handleOffsetCommit commits through the coordinator. A commit with member
// id "" and generation -1 (v0 has neither) is a simple consumer's, which
// the coordinator takes while the group has no members. The partitions of
// topics the broker does not have are answered UNKNOWN_TOPIC_OR_PARTITION
// and the others committed, as Kafka does; the commit is one: every other
// partition gets its error.
func handleOffsetCommit(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	offsets, codes := commitOffsets(ctx, c, req.Topics,
		func(t *kmsg.OffsetCommitRequestTopic) (string, []kmsg.OffsetCommitRequestTopicPartition) {
			return t.Topic, t.Partitions
		},
		func(p *kmsg.OffsetCommitRequestTopicPartition) commitPartition {
			return commitPartition{p.Partition, p.Offset, p.LeaderEpoch, p.Metadata}
		}, req.Version >= 6)
	code := errNone
	if c.s.fenced(req.Group, req.InstanceID, req.MemberID) {
		code = errFencedInstanceID
	} else if len(offsets) > 0 {
		gc, cc := c.s.coordinatorFor(ctx, req.Group)
		if code = cc; gc != nil {
			code = groupCode(ctx, gc.CommitWithMetadata(ctx, req.Group, req.MemberID, req.Generation, offsets))
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			if rp.ErrorCode == codeCommitted {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}

// handleOffsetFetch answers the committed offsets of one group (v0–v7) or
// of several (v8+); a partition without one gets offset -1. Topics null
// (v2+) asks for every committed offset of the group.
func handleOffsetFetch(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		topics := make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = t.Topic, t.Partitions
			topics = append(topics, gt)
		}
		if req.Topics == nil {
			topics = nil
		}
		g := c.s.committed(ctx, req.Group, topics, req.RequireStable)
		for _, gt := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = gt.Topic
			for _, gp := range gt.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		resp.ErrorCode = g.ErrorCode
		return reply{resp: resp}
	}
	for _, rg := range req.Groups {
		if code := c.s.checkOffsetFetch(ctx, rg); code != errNone {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		resp.Groups = append(resp.Groups, c.s.committed(ctx, rg.Group, rg.Topics, req.RequireStable))
	}
	return reply{resp: resp}
}

// checkOffsetFetch checks the member of a group's fetch (v9+, KIP-848) on
// the group's coordinator: of a consumer-protocol group, a member the
// group does not have is UNKNOWN_MEMBER_ID and one at another epoch than
// its own STALE_MEMBER_EPOCH, answered for the whole group with no topics,
// as Kafka does. No member id and epoch -1 (an admin client's, and what
// v8 and older mean) pass. A group not coordinated here is left to
// committed, which answers its error.
func (s *Server) checkOffsetFetch(ctx context.Context, rg kmsg.OffsetFetchRequestGroup) int16 {
	member := ""
	if rg.MemberID != nil {
		member = *rg.MemberID
	}
	if member == "" && rg.MemberEpoch < 0 {
		return errNone
	}
	gc, code := s.coordinatorFor(ctx, rg.Group)
	if code != errNone {
		return errNone
	}
	return groupCode(ctx, gc.CheckOffsetFetch(rg.Group, member, rg.MemberEpoch))
}

// committed is one group's answer to an OffsetFetch: the offsets of the
// partitions of topics, or of every partition with a commit for topics nil.
// With requireStable (v7+, KIP-447), a partition with a transactional
// commit pending is answered UNSTABLE_OFFSET_COMMIT and offset -1, as
// Kafka's coordinator answers it: the consumer retries until the
// transaction ends.
func (s *Server) committed(ctx context.Context, groupID string, topics []kmsg.OffsetFetchRequestGroupTopic, requireStable bool) kmsg.OffsetFetchResponseGroup {
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = groupID
	partition := func(p int32, co group.CommittedOffset) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, co.Offset, co.LeaderEpoch, kmsg.StringPtr(co.Metadata)
		return rp
	}
	gc, code := s.coordinatorFor(ctx, groupID)
	if code != errNone {
		// Not this node's group: the group's error, and each partition's
		// for v0–v1, which have no other.
		g.ErrorCode = code
		for _, t := range topics {
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := partition(p, group.CommittedOffset{Offset: -1, LeaderEpoch: -1})
				rp.ErrorCode = code
				gt.Partitions = append(gt.Partitions, rp)
			}
			g.Topics = append(g.Topics, gt)
		}
		return g
	}
	var unstable map[log.TopicPartition]bool
	partitionOf := func(tp log.TopicPartition, co group.CommittedOffset) kmsg.OffsetFetchResponseGroupTopicPartition {
		if unstable[tp] {
			rp := partition(int32(tp.Partition), group.CommittedOffset{Offset: -1, LeaderEpoch: -1})
			rp.ErrorCode = kerr.UnstableOffsetCommit
			return rp
		}
		return partition(int32(tp.Partition), co)
	}
	if topics == nil {
		if requireStable {
			unstable = gc.PendingTxn(groupID, nil)
		}
		all := gc.CommittedWithMetadata(groupID, nil)
		where := map[string]int{}
		plain := make(map[log.TopicPartition]int64, len(all))
		for tp, co := range all {
			plain[tp] = co.Offset
		}
		for _, tp := range sortedTPs(plain) {
			i, ok := where[tp.Topic]
			if !ok {
				i = len(g.Topics)
				where[tp.Topic] = i
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = tp.Topic
				g.Topics = append(g.Topics, gt)
			}
			g.Topics[i].Partitions = append(g.Topics[i].Partitions, partitionOf(tp, all[tp]))
		}
		return g
	}
	var tps []log.TopicPartition
	for _, t := range topics {
		for _, p := range t.Partitions {
			tps = append(tps, log.TopicPartition{Topic: t.Topic, Partition: int(p)})
		}
	}
	got := gc.CommittedWithMetadata(groupID, tps)
	if requireStable {
		unstable = gc.PendingTxn(groupID, tps)
	}
	for _, t := range topics {
		gt := kmsg.NewOffsetFetchResponseGroupTopic()
		gt.Topic = t.Topic
		for _, p := range t.Partitions {
			tp := log.TopicPartition{Topic: t.Topic, Partition: int(p)}
			co, ok := got[tp]
			if !ok {
				co = group.CommittedOffset{Offset: -1, LeaderEpoch: -1}
			}
			gt.Partitions = append(gt.Partitions, partitionOf(tp, co))
		}
		g.Topics = append(g.Topics, gt)
	}
	return g
}

// txnOffsetAPIs are served when the backend keeps transactional offset
// commits (TxnOffsetCommitter). v3+ carry the member's generation, member
// id and instance id (KIP-447), which the coordinator fences as
// OffsetCommit's. v5 (KIP-890's transaction version 2) adds the group to
// the transaction itself where this server advertises that version
// (txn_version.go).
var txnOffsetAPIs = []api{
	{key: authzTxnOffsetCommit, min: 0, max: 5, handle: handleTxnOffsetCommit},
}

// handleTxnOffsetCommit commits offsets as part of the producer's
// transaction through the group's coordinator (group.Coordinator.TxnCommit):
// written to __consumer_offsets at once, visible to OffsetFetch once the
// transaction commits. As for OffsetCommit, partitions of topics the
// broker does not have are answered UNKNOWN_TOPIC_OR_PARTITION, metadata
// past offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE, and the others
// committed as one, each getting the commit's error: NOT_COORDINATOR and
// the like, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID, or INVALID_PRODUCER_EPOCH for an epoch older than
// the producer's (as Kafka's log answers it).
func handleTxnOffsetCommit(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	offsets, codes := commitOffsets(ctx, c, req.Topics,
		func(t *kmsg.TxnOffsetCommitRequestTopic) (string, []kmsg.TxnOffsetCommitRequestTopicPartition) {
			return t.Topic, t.Partitions
		},
		func(p *kmsg.TxnOffsetCommitRequestTopicPartition) commitPartition {
			return commitPartition{p.Partition, p.Offset, p.LeaderEpoch, p.Metadata}
		}, req.Version >= 2)
	code := errNone
	if len(offsets) > 0 {
		tr := group.TxnCommitRequest{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
			Generation: -1, Offsets: offsets}
		if req.Version >= 3 {
			tr.MemberID, tr.Generation = req.MemberID, req.Generation
			if req.InstanceID != nil {
				tr.GroupInstanceID = *req.InstanceID
			}
		}
		gc, cc := c.s.coordinatorFor(ctx, req.Group)
		if code = cc; gc != nil && req.Version >= 5 {
			code = c.s.addTxnOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group) // txn_version.go
		}
		if gc != nil && code == errNone {
			code = groupCode(ctx, gc.TxnCommit(ctx, tr))
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			if rp.ErrorCode == codeCommitted {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}
