package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// subscribeCode is the code of a group heartbeat that subscribes to topics
// by name (KIP-848's consumer group, KIP-932's share group), as Kafka 4
// checks it: Read on the group, then Describe on every topic
// (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED).
func (c *conn) subscribeCode(group string, topics []string) int16 {
	if !c.allowed(acl.OpRead, acl.Group(group)) {
		return errGroupAuthorizationFailed
	}
	for _, t := range topics {
		if !c.allowed(acl.OpDescribe, acl.Topic(t)) {
			return errTopicAuthorizationFailed
		}
	}
	return errNone
}

// authorizeConsumerGroupHeartbeat (KIP-848): subscribeCode.
func authorizeConsumerGroupHeartbeat(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	code := c.subscribeCode(req.Group, req.SubscribedTopicNames)
	if code == errNone {
		return next(ctx, c, req)
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.ErrorCode = code
	return reply{resp: resp}
}

// groupDenied is a guard's denied for an op on groups named by id.
func (c *conn) groupDenied(op acl.Operation) func(id *string) bool {
	return func(id *string) bool { return !c.allowed(op, acl.Group(*id)) }
}

// authorizeConsumerGroupDescribe: Describe on each group; the authorized
// operations when asked.
func authorizeConsumerGroupDescribe(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	if req.IncludeAuthorizedOperations {
		next = after(next, func(resp *kmsg.ConsumerGroupDescribeResponse) {
			for i := range resp.Groups {
				g := &resp.Groups[i]
				g.AuthorizedOperations = c.authorizedOps(acl.Group(g.Group), groupOps)
			}
		})
	}
	return guard(ctx, c, req, &req.Groups, c.groupDenied(acl.OpDescribe), answerEmpty, next,
		func(resp *kmsg.ConsumerGroupDescribeResponse, refused []string) {
			for _, id := range refused {
				g := kmsg.NewConsumerGroupDescribeResponseGroup()
				g.Group, g.ErrorCode = id, errGroupAuthorizationFailed
				resp.Groups = append(resp.Groups, g)
			}
		})
}
