package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizeCreateTopics: Create on the cluster, or on each topic; the
// configs of a created topic (v5+) need DescribeConfigs on it.
func authorizeCreateTopics(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.CreateTopicsRequest)
	onCluster := c.allowed(acl.OpCreate, acl.Cluster())
	keep, refused := split(req.Topics, func(t *kmsg.CreateTopicsRequestTopic) bool {
		return !onCluster && !c.allowed(acl.OpCreate, acl.Topic(t.Topic))
	})
	req.Topics = keep
	rep := serve(ctx, c, req, len(keep) == 0, next)
	resp := rep.resp.(*kmsg.CreateTopicsResponse)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.ErrorCode == errNone && req.Version >= 5 && !c.allowed(acl.OpDescribeConfigs, acl.Topic(t.Topic)) {
			t.ConfigErrorCode, t.Configs = errTopicAuthorizationFailed, nil
			t.NumPartitions, t.ReplicationFactor = -1, -1
		}
	}
	for _, rt := range refused {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, errTopicAuthorizationFailed
		t.ErrorMessage = kmsg.StringPtr("not authorized to create the topic")
		resp.Topics = append(resp.Topics, t)
	}
	return rep
}

// authorizeDeleteTopics: Delete on each topic.
func authorizeDeleteTopics(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DeleteTopicsRequest)
	denied := func(name string) bool { return !c.allowed(acl.OpDelete, acl.Topic(name)) }
	var refusedNames []string
	var refused []kmsg.DeleteTopicsRequestTopic
	if req.Version < 6 {
		req.TopicNames, refusedNames = split(req.TopicNames, func(n *string) bool { return denied(*n) })
	} else {
		req.Topics, refused = split(req.Topics, func(t *kmsg.DeleteTopicsRequestTopic) bool {
			name, ok := c.topicOf(derefString(t.Topic), t.TopicID, t.Topic == nil)
			return ok && denied(name)
		})
	}
	if refusedNames == nil && refused == nil {
		return next(ctx, c, req)
	}
	rep := serve(ctx, c, req, len(req.TopicNames)+len(req.Topics) == 0, next)
	resp := rep.resp.(*kmsg.DeleteTopicsResponse)
	for _, name := range refusedNames {
		refused = append(refused, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr(name)})
	}
	for _, rt := range refused {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, errTopicAuthorizationFailed
		resp.Topics = append(resp.Topics, t)
	}
	return rep
}

// authorizeCreatePartitions: Alter on each topic.
func authorizeCreatePartitions(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.CreatePartitionsRequest)
	denied := func(t *kmsg.CreatePartitionsRequestTopic) bool {
		return !c.allowed(acl.OpAlter, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.CreatePartitionsResponse, refused []kmsg.CreatePartitionsRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewCreatePartitionsResponseTopic()
				t.Topic, t.ErrorCode = rt.Topic, errTopicAuthorizationFailed
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeDeleteRecords: Delete on each topic.
func authorizeDeleteRecords(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DeleteRecordsRequest)
	denied := func(t *kmsg.DeleteRecordsRequestTopic) bool {
		return !c.allowed(acl.OpDelete, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.DeleteRecordsResponse, refused []kmsg.DeleteRecordsRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewDeleteRecordsResponseTopic()
				t.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					p := kmsg.NewDeleteRecordsResponseTopicPartition()
					p.Partition, p.ErrorCode, p.LowWatermark = rp.Partition, errTopicAuthorizationFailed, -1
					t.Partitions = append(t.Partitions, p)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// configResource is the resource whose configs a DescribeConfigs or
// AlterConfigs resource is, and the code of a refusal.
func configResource(t kmsg.ConfigResourceType, name string) (acl.Resource, int16) {
	switch t {
	case kmsg.ConfigResourceTypeTopic:
		return acl.Topic(name), errTopicAuthorizationFailed
	case kmsg.ConfigResourceTypeGroupConfig:
		return acl.Group(name), errGroupAuthorizationFailed
	}
	// Brokers, broker loggers, client metrics: the cluster's.
	return acl.Cluster(), errClusterAuthorizationFailed
}

// configDenied reports whether the connection may not do op on the
// configs of the resource of type t named name.
func (c *conn) configDenied(op acl.Operation, t kmsg.ConfigResourceType, name string) bool {
	res, _ := configResource(t, name)
	return !c.allowed(op, res)
}

// authorizeDescribeConfigs: DescribeConfigs on each topic, on the cluster
// for a broker's.
func authorizeDescribeConfigs(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DescribeConfigsRequest)
	denied := func(rr *kmsg.DescribeConfigsRequestResource) bool {
		return c.configDenied(acl.OpDescribeConfigs, rr.ResourceType, rr.ResourceName)
	}
	return guard(ctx, c, req, &req.Resources, denied, answerEmpty, next,
		func(resp *kmsg.DescribeConfigsResponse, refused []kmsg.DescribeConfigsRequestResource) {
			for _, rr := range refused {
				_, code := configResource(rr.ResourceType, rr.ResourceName)
				t := kmsg.NewDescribeConfigsResponseResource()
				t.ResourceType, t.ResourceName, t.ErrorCode = rr.ResourceType, rr.ResourceName, code
				resp.Resources = append(resp.Resources, t)
			}
		})
}

// authorizeAlterConfigs: AlterConfigs on each topic, on the cluster for
// a broker's.
func authorizeAlterConfigs(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	denied := func(rr *kmsg.IncrementalAlterConfigsRequestResource) bool {
		return c.configDenied(acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName)
	}
	return guard(ctx, c, req, &req.Resources, denied, answerEmpty, next,
		func(resp *kmsg.IncrementalAlterConfigsResponse, refused []kmsg.IncrementalAlterConfigsRequestResource) {
			for _, rr := range refused {
				_, code := configResource(rr.ResourceType, rr.ResourceName)
				t := kmsg.NewIncrementalAlterConfigsResponseResource()
				t.ResourceType, t.ResourceName, t.ErrorCode = rr.ResourceType, rr.ResourceName, code
				resp.Resources = append(resp.Resources, t)
			}
		})
}
