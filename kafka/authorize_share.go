package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/acl"
)

// The authorization of the share-group APIs, as Kafka's KafkaApis checks
// them: Read on the group for the heartbeat, the fetch, the
// acknowledgement and altering offsets (Delete on it for deleting them,
// Describe for describing), and on the topics Describe for the
// heartbeat's subscription and the offsets' description, Read for the
// rest. A topic denied is answered TOPIC_AUTHORIZATION_FAILED and left
// out of what the handler sees.
func init() {
	authorizeRules[shareGroupHeartbeatKey] = authorizeShareGroupHeartbeat
	authorizeRules[shareGroupDescribeKey] = authorizeShareGroupDescribe
	authorizeRules[shareFetchKey] = authorizeShareFetch
	authorizeRules[shareAcknowledgeKey] = authorizeShareAcknowledge
	authorizeRules[describeShareGroupOffsetsKey] = authorizeDescribeShareGroupOffsets
	authorizeRules[alterShareGroupOffsetsKey] = authorizeAlterShareGroupOffsets
	authorizeRules[deleteShareGroupOffsetsKey] = authorizeDeleteShareGroupOffsets
}

func authorizeShareGroupHeartbeat(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ShareGroupHeartbeatRequest)
	code := c.subscribeCode(req.GroupID, req.SubscribedTopicNames)
	if code == errNone {
		return next(ctx, c, req)
	}
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.ErrorCode = code
	return reply{resp: resp}
}

func authorizeShareGroupDescribe(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ShareGroupDescribeRequest)
	if req.IncludeAuthorizedOperations {
		next = after(next, func(resp *kmsg.ShareGroupDescribeResponse) {
			for i := range resp.Groups {
				g := &resp.Groups[i]
				g.AuthorizedOperations = c.authorizedOps(acl.Group(g.GroupID), groupOps)
			}
		})
	}
	return guard(ctx, c, req, &req.GroupIDs, c.groupDenied(acl.OpDescribe), answerEmpty, next,
		func(resp *kmsg.ShareGroupDescribeResponse, refused []string) {
			for _, id := range refused {
				g := kmsg.NewShareGroupDescribeResponseGroup()
				g.GroupID, g.ErrorCode = id, errGroupAuthorizationFailed
				resp.Groups = append(resp.Groups, g)
			}
		})
}

// topicAllowed reports whether the connection may do op on the topic of
// id (an unknown id passes: the handler answers it).
func (c *conn) topicAllowed(op acl.Operation, id [16]byte) bool {
	name, ok := c.s.topicName(id)
	return !ok || c.allowed(op, acl.Topic(name))
}

func authorizeShareFetch(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ShareFetchRequest)
	if req.GroupID == nil || !c.allowed(acl.OpRead, acl.Group(*req.GroupID)) {
		resp := kmsg.NewPtrShareFetchResponse()
		resp.ErrorCode = errGroupAuthorizationFailed
		return reply{resp: resp}
	}
	return guard(ctx, c, req, &req.Topics, func(t *kmsg.ShareFetchRequestTopic) bool { return !c.topicAllowed(acl.OpRead, t.TopicID) },
		serveEmpty, next, func(resp *kmsg.ShareFetchResponse, refused []kmsg.ShareFetchRequestTopic) {
			for _, t := range refused {
				rt := kmsg.NewShareFetchResponseTopic()
				rt.TopicID = t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewShareFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.AcknowledgeErrorCode = p.Partition, errTopicAuthorizationFailed, errTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		})
}

func authorizeShareAcknowledge(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ShareAcknowledgeRequest)
	if req.GroupID == nil || !c.allowed(acl.OpRead, acl.Group(*req.GroupID)) {
		resp := kmsg.NewPtrShareAcknowledgeResponse()
		resp.ErrorCode = errGroupAuthorizationFailed
		return reply{resp: resp}
	}
	return guard(ctx, c, req, &req.Topics, func(t *kmsg.ShareAcknowledgeRequestTopic) bool { return !c.topicAllowed(acl.OpRead, t.TopicID) },
		serveEmpty, next, func(resp *kmsg.ShareAcknowledgeResponse, refused []kmsg.ShareAcknowledgeRequestTopic) {
			for _, t := range refused {
				rt := kmsg.NewShareAcknowledgeResponseTopic()
				rt.TopicID = t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		})
}

func authorizeDescribeShareGroupOffsets(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DescribeShareGroupOffsetsRequest)
	keep, refused := split(req.Groups, func(g *kmsg.DescribeShareGroupOffsetsRequestGroup) bool {
		return !c.allowed(acl.OpDescribe, acl.Group(g.GroupID))
	})
	var deniedTopics []map[string][]int32
	for i := range keep {
		g := &keep[i]
		denied := map[string][]int32{}
		if g.Topics != nil {
			ok, no := split(g.Topics, func(t *kmsg.DescribeShareGroupOffsetsRequestGroupTopic) bool {
				return !c.allowed(acl.OpDescribe, acl.Topic(t.Topic))
			})
			g.Topics = ok
			for _, t := range no {
				denied[t.Topic] = t.Partitions
			}
		}
		deniedTopics = append(deniedTopics, denied)
	}
	req.Groups = keep
	rep := serve(ctx, c, req, len(keep) == 0, next)
	resp := rep.resp.(*kmsg.DescribeShareGroupOffsetsResponse)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		// Topics asked for all: those the connection may not describe
		// are left out.
		g.Topics, _ = split(g.Topics, func(t *kmsg.DescribeShareGroupOffsetsResponseGroupTopic) bool {
			return !c.allowed(acl.OpDescribe, acl.Topic(t.Topic))
		})
		if i < len(deniedTopics) {
			for name, parts := range deniedTopics[i] {
				rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				rt.Topic, rt.TopicID = name, topicID(name)
				for _, p := range parts {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode = p, errTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
	}
	for _, g := range refused {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID, rg.ErrorCode = g.GroupID, errGroupAuthorizationFailed
		resp.Groups = append(resp.Groups, rg)
	}
	return rep
}

func authorizeAlterShareGroupOffsets(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.AlterShareGroupOffsetsRequest)
	if !c.allowed(acl.OpRead, acl.Group(req.GroupID)) {
		resp := kmsg.NewPtrAlterShareGroupOffsetsResponse()
		resp.ErrorCode = errGroupAuthorizationFailed
		return reply{resp: resp}
	}
	denied := func(t *kmsg.AlterShareGroupOffsetsRequestTopic) bool {
		return !c.allowed(acl.OpRead, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.AlterShareGroupOffsetsResponse, refused []kmsg.AlterShareGroupOffsetsRequestTopic) {
			for _, t := range refused {
				rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, topicID(t.Topic)
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthorizationFailed
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		})
}

func authorizeDeleteShareGroupOffsets(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DeleteShareGroupOffsetsRequest)
	if !c.allowed(acl.OpDelete, acl.Group(req.GroupID)) {
		resp := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
		resp.ErrorCode = errGroupAuthorizationFailed
		return reply{resp: resp}
	}
	denied := func(t *kmsg.DeleteShareGroupOffsetsRequestTopic) bool {
		return !c.allowed(acl.OpRead, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.DeleteShareGroupOffsetsResponse, refused []kmsg.DeleteShareGroupOffsetsRequestTopic) {
			for _, t := range refused {
				rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
				rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, topicID(t.Topic), errTopicAuthorizationFailed
				resp.Topics = append(resp.Topics, rt)
			}
		})
}
