package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rules of DescribeTopicPartitions, DescribeLogDirs, OffsetDelete and
// AlterConfigs, as Kafka's KafkaApis checks them.
func init() {
	// Describe on each topic, checked by the handler as it pages
	// (describe_topic_partitions.go): a topic the connection may not
	// describe must be left out before the page is cut.
	authorizeRules[describeTopicPartitionsKey] = nil
	authorizeRules[describeLogDirsKey] = authorizeDescribeLogDirs
	authorizeRules[offsetDeleteKey] = authorizeOffsetDelete
	authorizeRules[legacyAlterConfigsKey] = authorizeLegacyAlterConfigs
}

// authorizeDescribeLogDirs: Describe on the cluster. Refused, no
// directory is described: v3+ say why (CLUSTER_AUTHORIZATION_FAILED),
// older versions answer an empty list, as Kafka does.
func authorizeDescribeLogDirs(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
	if c.allowed(acl.OpDescribe, acl.Cluster()) {
		return next(ctx, c, req)
	}
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = errClusterAuthorizationFailed
	return reply{resp: resp}
}

// authorizeOffsetDelete: Delete on the group (refused: GROUP_AUTHORIZATION_FAILED
// alone), then Read on each topic: a refused topic's partitions are
// TOPIC_AUTHORIZATION_FAILED, the others deleted, as Kafka checks it. The
// group is still asked when every topic is refused (its own errors come
// first, as in Kafka).
func authorizeOffsetDelete(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.OffsetDeleteRequest)
	if !c.allowed(acl.OpDelete, acl.Group(req.Group)) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errGroupAuthorizationFailed
		return reply{resp: resp}
	}
	denied := func(t *kmsg.OffsetDeleteRequestTopic) bool { return !c.allowed(acl.OpRead, acl.Topic(t.Topic)) }
	return guard(ctx, c, req, &req.Topics, denied, serveEmpty, next,
		func(resp *kmsg.OffsetDeleteResponse, refused []kmsg.OffsetDeleteRequestTopic) {
			if resp.ErrorCode != errNone {
				return
			}
			for _, rt := range refused {
				t := kmsg.NewOffsetDeleteResponseTopic()
				t.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					p := kmsg.NewOffsetDeleteResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, errTopicAuthorizationFailed
					t.Partitions = append(t.Partitions, p)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeLegacyAlterConfigs: AlterConfigs on each topic, on the cluster
// for a broker's (as IncrementalAlterConfigs); refused resources are
// answered with their *_AUTHORIZATION_FAILED and change nothing.
func authorizeLegacyAlterConfigs(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.AlterConfigsRequest)
	denied := func(rr *kmsg.AlterConfigsRequestResource) bool {
		return c.configDenied(acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName)
	}
	return guard(ctx, c, req, &req.Resources, denied, answerEmpty, next,
		func(resp *kmsg.AlterConfigsResponse, refused []kmsg.AlterConfigsRequestResource) {
			for _, rr := range refused {
				_, code := configResource(rr.ResourceType, rr.ResourceName)
				t := kmsg.NewAlterConfigsResponseResource()
				t.ResourceType, t.ResourceName, t.ErrorCode = rr.ResourceType, rr.ResourceName, code
				resp.Resources = append(resp.Resources, t)
			}
		})
}
