package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster-operation APIs' rules, as Kafka's ControllerApis and
// KafkaApis check them: DescribeQuorum needs Describe on the cluster;
// AddRaftVoter, RemoveRaftVoter, UnregisterBroker and ElectLeaders need
// Alter on it (so do the reassignment APIs', in reassign.go). A refused
// request is answered CLUSTER_AUTHORIZATION_FAILED and reaches no handler.
func init() {
	authorizeRules[describeQuorumKey] = authorizeCluster(acl.OpDescribe)
	authorizeRules[addRaftVoterKey] = authorizeCluster(acl.OpAlter)
	authorizeRules[removeRaftVoterKey] = authorizeCluster(acl.OpAlter)
	authorizeRules[unregisterBrokerKey] = authorizeCluster(acl.OpAlter)
	authorizeRules[electLeadersKey] = authorizeCluster(acl.OpAlter)
}

// authorizeCluster is the rule of an API that needs op on the cluster.
func authorizeCluster(op acl.Operation) rule {
	return func(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
		if c.allowed(op, acl.Cluster()) {
			return next(ctx, c, req)
		}
		msg := kmsg.StringPtr("not authorized on the cluster")
		code := errClusterAuthorizationFailed
		switch req := req.(type) {
		case *kmsg.DescribeQuorumRequest:
			resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return reply{resp: resp}
		case *kmsg.AddRaftVoterRequest:
			resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return reply{resp: resp}
		case *kmsg.RemoveRaftVoterRequest:
			resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return reply{resp: resp}
		case *kmsg.UnregisterBrokerRequest:
			resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return reply{resp: resp}
		case *kmsg.AlterPartitionAssignmentsRequest:
			resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return reply{resp: resp}
		case *kmsg.ListPartitionReassignmentsRequest:
			resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
			resp.ErrorCode, resp.ErrorMessage = code, msg
			return reply{resp: resp}
		case *kmsg.ElectLeadersRequest:
			// v1+ answers at the top; v0, which has no top-level code,
			// answers every partition asked for.
			resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
			resp.ErrorCode = code
			for _, t := range req.Topics {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewElectLeadersResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, msg
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return reply{resp: resp}
		}
		return reply{none: true, closeAfter: true}
	}
}
