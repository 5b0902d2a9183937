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
