package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizeConsumerGroupHeartbeat (KIP-848): Read on the group, and
// Describe on every topic subscribed by name (TOPIC_AUTHORIZATION_FAILED
// otherwise, as Kafka 4 answers).
func authorizeConsumerGroupHeartbeat(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	code := errNone
	if !c.allowed(acl.OpRead, acl.Group(req.Group)) {
		code = errGroupAuthorizationFailed
	} else {
		for _, t := range req.SubscribedTopicNames {
			if !c.allowed(acl.OpDescribe, acl.Topic(t)) {
				code = errTopicAuthorizationFailed
				break
			}
		}
	}
	if code == errNone {
		return next(ctx, c, req)
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.ErrorCode = code
	return reply{resp: resp}
}

// authorizeConsumerGroupDescribe: Describe on each group; the authorized
// operations when asked.
func authorizeConsumerGroupDescribe(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	keep, refused := split(req.Groups, func(g *string) bool { return !c.allowed(acl.OpDescribe, acl.Group(*g)) })
	req.Groups = keep
	rep := serve(ctx, c, req, len(keep) == 0, next)
	resp := rep.resp.(*kmsg.ConsumerGroupDescribeResponse)
	if req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			g := &resp.Groups[i]
			g.AuthorizedOperations = c.authorizedOps(acl.Group(g.Group), groupOps)
		}
	}
	for _, id := range refused {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.ErrorCode = id, errGroupAuthorizationFailed
		resp.Groups = append(resp.Groups, g)
	}
	return rep
}
