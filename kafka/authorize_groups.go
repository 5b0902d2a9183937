package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOf is the group a request of the group protocol is about.
func groupOf(req kmsg.Request) string {
	switch req := req.(type) {
	case *kmsg.JoinGroupRequest:
		return req.Group
	case *kmsg.SyncGroupRequest:
		return req.Group
	case *kmsg.HeartbeatRequest:
		return req.Group
	case *kmsg.LeaveGroupRequest:
		return req.Group
	}
	panic("kafka: groupOf: not a group request")
}

// authorizeGroupRead: JoinGroup, SyncGroup, Heartbeat and LeaveGroup need
// Read on the group.
func authorizeGroupRead(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
	if c.allowed(acl.OpRead, acl.Group(groupOf(req))) {
		return next(ctx, c, req)
	}
	resp := req.ResponseKind()
	defaults(resp)
	switch resp := resp.(type) {
	case *kmsg.JoinGroupResponse:
		resp.ErrorCode = errGroupAuthorizationFailed
	case *kmsg.SyncGroupResponse:
		resp.ErrorCode = errGroupAuthorizationFailed
	case *kmsg.HeartbeatResponse:
		resp.ErrorCode = errGroupAuthorizationFailed
	case *kmsg.LeaveGroupResponse:
		resp.ErrorCode = errGroupAuthorizationFailed
	}
	return reply{resp: resp}
}

// authorizeFindCoordinator: Describe on each group (on each transactional
// id for key type 1).
func authorizeFindCoordinator(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.FindCoordinatorRequest)
	code, res := errGroupAuthorizationFailed, acl.Group
	if req.CoordinatorType == 1 {
		code, res = errTransactionalIDAuthorizationFailed, acl.TransactionalID
	}
	if req.Version < 4 {
		if c.allowed(acl.OpDescribe, res(req.CoordinatorKey)) {
			return next(ctx, c, req)
		}
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, -1, "", -1
		return reply{resp: resp}
	}
	denied := func(k *string) bool { return !c.allowed(acl.OpDescribe, res(*k)) }
	return guard(ctx, c, req, &req.CoordinatorKeys, denied, answerEmpty, next,
		func(resp *kmsg.FindCoordinatorResponse, refused []string) {
			for _, k := range refused {
				rc := kmsg.NewFindCoordinatorResponseCoordinator()
				rc.Key, rc.ErrorCode, rc.NodeID, rc.Port = k, code, -1, -1
				resp.Coordinators = append(resp.Coordinators, rc)
			}
		})
}

// authorizeOffsetCommit: Read on the group, then Read on each topic.
func authorizeOffsetCommit(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.OffsetCommitRequest)
	groupDenied := !c.allowed(acl.OpRead, acl.Group(req.Group))
	code := errTopicAuthorizationFailed
	if groupDenied {
		code = errGroupAuthorizationFailed
	}
	denied := func(t *kmsg.OffsetCommitRequestTopic) bool {
		return groupDenied || !c.allowed(acl.OpRead, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.OffsetCommitResponse, refused []kmsg.OffsetCommitRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewOffsetCommitResponseTopic()
				t.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					p := kmsg.NewOffsetCommitResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, code
					t.Partitions = append(t.Partitions, p)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeOffsetFetch: Describe on each group, then Describe on each
// topic: a topic asked for and refused is answered
// TOPIC_AUTHORIZATION_FAILED; asked for all, the refused ones are left out.
func authorizeOffsetFetch(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.OffsetFetchRequest)
	topicOK := func(topic string) bool { return c.allowed(acl.OpDescribe, acl.Topic(topic)) }
	refusedTopic := func(topic string, parts []int32, code int16) kmsg.OffsetFetchResponseGroupTopic {
		gt := kmsg.NewOffsetFetchResponseGroupTopic()
		gt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
			gt.Partitions = append(gt.Partitions, rp)
		}
		return gt
	}
	if req.Version < 8 {
		if !c.allowed(acl.OpDescribe, acl.Group(req.Group)) {
			resp := kmsg.NewPtrOffsetFetchResponse()
			resp.ErrorCode = errGroupAuthorizationFailed
			for _, t := range req.Topics {
				gt := refusedTopic(t.Topic, t.Partitions, errGroupAuthorizationFailed)
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = gt.Topic
				for _, gp := range gt.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = gp.Partition, -1, -1, gp.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return reply{resp: resp}
		}
		all := req.Topics == nil
		var refused []kmsg.OffsetFetchRequestTopic
		if !all {
			req.Topics, refused = split(req.Topics, func(t *kmsg.OffsetFetchRequestTopic) bool { return !topicOK(t.Topic) })
		}
		rep := next(ctx, c, req)
		resp := rep.resp.(*kmsg.OffsetFetchResponse)
		if all {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if topicOK(t.Topic) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		for _, t := range refused {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, errTopicAuthorizationFailed
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return rep
	}
	// v8+: several groups, each answered on its own.
	var kept []kmsg.OffsetFetchRequestGroup
	var refusedTopics [][]kmsg.OffsetFetchRequestGroupTopic // of each kept group
	var refusedGroups []kmsg.OffsetFetchRequestGroup
	for _, g := range req.Groups {
		if !c.allowed(acl.OpDescribe, acl.Group(g.Group)) {
			refusedGroups = append(refusedGroups, g)
			continue
		}
		var refused []kmsg.OffsetFetchRequestGroupTopic
		if g.Topics != nil {
			g.Topics, refused = split(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) bool { return !topicOK(t.Topic) })
		}
		kept = append(kept, g)
		refusedTopics = append(refusedTopics, refused)
	}
	req.Groups = kept
	rep := serve(ctx, c, req, len(kept) == 0, next)
	resp := rep.resp.(*kmsg.OffsetFetchResponse)
	for i := range resp.Groups {
		rg := &resp.Groups[i]
		if i < len(kept) && kept[i].Topics == nil {
			visible := rg.Topics[:0]
			for _, t := range rg.Topics {
				if topicOK(t.Topic) {
					visible = append(visible, t)
				}
			}
			rg.Topics = visible
		}
		if i < len(refusedTopics) {
			for _, t := range refusedTopics[i] {
				rg.Topics = append(rg.Topics, refusedTopic(t.Topic, t.Partitions, errTopicAuthorizationFailed))
			}
		}
	}
	for _, g := range refusedGroups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, errGroupAuthorizationFailed
		resp.Groups = append(resp.Groups, rg)
	}
	return rep
}

// authorizeListGroups: every group with Describe on the cluster, else
// those the connection may describe.
func authorizeListGroups(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
	rep := next(ctx, c, req)
	if c.allowed(acl.OpDescribe, acl.Cluster()) {
		return rep
	}
	resp := rep.resp.(*kmsg.ListGroupsResponse)
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if c.allowed(acl.OpDescribe, acl.Group(g.Group)) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return rep
}

// authorizeDescribeGroups: Describe on each group; the authorized
// operations when asked (v3+).
func authorizeDescribeGroups(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DescribeGroupsRequest)
	if req.IncludeAuthorizedOperations {
		next = after(next, func(resp *kmsg.DescribeGroupsResponse) {
			for i := range resp.Groups {
				g := &resp.Groups[i]
				g.AuthorizedOperations = c.authorizedOps(acl.Group(g.Group), groupOps)
			}
		})
	}
	return guard(ctx, c, req, &req.Groups, c.groupDenied(acl.OpDescribe), answerEmpty, next,
		func(resp *kmsg.DescribeGroupsResponse, refused []string) {
			for _, id := range refused {
				g := kmsg.NewDescribeGroupsResponseGroup()
				g.Group, g.ErrorCode = id, errGroupAuthorizationFailed
				resp.Groups = append(resp.Groups, g)
			}
		})
}

// authorizeDeleteGroups: Delete on each group.
func authorizeDeleteGroups(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DeleteGroupsRequest)
	return guard(ctx, c, req, &req.Groups, c.groupDenied(acl.OpDelete), answerEmpty, next,
		func(resp *kmsg.DeleteGroupsResponse, refused []string) {
			for _, id := range refused {
				g := kmsg.NewDeleteGroupsResponseGroup()
				g.Group, g.ErrorCode = id, errGroupAuthorizationFailed
				resp.Groups = append(resp.Groups, g)
			}
		})
}
