package kafka

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
)

// The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, served with the other group APIs by the group's
// coordinator (group.Coordinator.ConsumerHeartbeat). Topics are named by
// id on the wire (topicID), by name in the coordinator.

const (
	consumerGroupHeartbeatKey int16 = 68
	consumerGroupDescribeKey  int16 = 69
)

// consumerGroupAPIs are served with groupAPIs. Heartbeat v0 has the
// coordinator make a joining member's id; v1 (Kafka 4, KIP-1082) has the
// member make it, and adds subscription by regex.
var consumerGroupAPIs = []api{
	{key: consumerGroupHeartbeatKey, min: 0, max: 1, handle: handleConsumerGroupHeartbeat},
	{key: consumerGroupDescribeKey, min: 0, max: 1, handle: handleConsumerGroupDescribe},
}

func handleConsumerGroupHeartbeat(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, err error) reply {
		resp.ErrorCode = code
		if err != nil {
			resp.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		return reply{resp: resp}
	}
	if req.Version >= 1 && req.MemberID == "" {
		return fail(errInvalidRequest, errors.New("MemberId can't be empty"))
	}
	for _, s := range []*string{req.InstanceID, req.RackID} {
		if s != nil && *s == "" {
			return fail(errInvalidRequest, errors.New("InstanceId and RackId can't be empty"))
		}
	}
	gc, code := c.s.coordinatorFor(ctx, req.Group)
	if code != errNone {
		return fail(code, nil)
	}
	if c.s.isShareGroup(req.Group) { // a share group's id (share.go)
		resp.ErrorCode, resp.ErrorMessage = errGroupIDNotFound, kmsg.StringPtr("Group "+req.Group+" is not a consumer group.")
		return reply{resp: resp}
	}
	gr := group.ConsumerHeartbeatRequest{
		Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		SubscribedTopics:     req.SubscribedTopicNames,
		SubscribedTopicRegex: req.SubscribedTopicRegex,
		ClientHost:           c.remoteHost(),
	}
	if req.RebalanceTimeoutMillis < 0 {
		gr.RebalanceTimeout = -1
	}
	if req.InstanceID != nil {
		gr.InstanceID = *req.InstanceID
	}
	if req.RackID != nil {
		gr.RackID = *req.RackID
	}
	if req.ServerAssignor != nil {
		gr.ServerAssignor = *req.ServerAssignor
	}
	if h := requestHeader(ctx); h != nil && h.clientID != nil {
		gr.ClientID = *h.clientID
	}
	if req.Topics != nil {
		gr.Owned = []group.TopicPartition{}
		for _, t := range req.Topics {
			name, ok := c.s.topicName(t.TopicID)
			if !ok {
				continue // a deleted topic: nothing of it is held any more
			}
			for _, p := range t.Partitions {
				gr.Owned = append(gr.Owned, group.TopicPartition{Topic: name, Partition: int(p)})
			}
		}
	}
	gresp, err := gc.ConsumerHeartbeat(ctx, gr)
	if err != nil {
		return fail(groupCode(ctx, err), err)
	}
	resp.MemberID = kmsg.StringPtr(gresp.MemberID)
	resp.MemberEpoch = gresp.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(gresp.HeartbeatInterval / time.Millisecond)
	if gresp.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, p := range gresp.Assignment {
			id := topicID(p.Topic)
			i := slices.IndexFunc(a.Topics, func(t kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic) bool { return t.TopicID == id })
			if i < 0 {
				a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: id, Partitions: []int32{}})
				i = len(a.Topics) - 1
			}
			a.Topics[i].Partitions = append(a.Topics[i].Partitions, int32(p.Partition))
		}
		resp.Assignment = &a
	}
	return reply{resp: resp}
}

func handleConsumerGroupDescribe(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		gc, code := c.s.coordinatorFor(ctx, id)
		if code != errNone {
			rg.ErrorCode = code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		d, ok := gc.DescribeConsumerGroup(id)
		if !ok {
			// Kafka: GROUP_ID_NOT_FOUND for a group that is not a consumer
			// group (or none).
			rg.ErrorCode = errorCode(group.ErrGroupNotFound)
			rg.ErrorMessage = kmsg.StringPtr("group " + id + " is not a consumer group")
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.State, rg.Epoch, rg.AssignmentEpoch, rg.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.Assignor
		for _, m := range d.Members {
			rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				rm.InstanceID = kmsg.StringPtr(m.InstanceID)
			}
			if m.RackID != "" {
				rm.RackID = kmsg.StringPtr(m.RackID)
			}
			rm.SubscribedTopics = slices.Clone(m.SubscribedTopics)
			if rm.SubscribedTopics == nil {
				rm.SubscribedTopics = []string{}
			}
			if m.SubscribedTopicRegex != "" {
				rm.SubscribedTopicRegex = kmsg.StringPtr(m.SubscribedTopicRegex)
			}
			rm.Assignment = describeAssignment(m.Assignment)
			rm.TargetAssignment = describeAssignment(m.TargetAssignment)
			rm.MemberType = 1 // the consumer protocol (v1+)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply{resp: resp}
}

func describeAssignment(tps []group.TopicPartition) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, p := range tps {
		i := slices.IndexFunc(a.TopicPartitions, func(t kmsg.AssignmentTopicPartition) bool { return t.Topic == p.Topic })
		if i < 0 {
			a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: topicID(p.Topic), Topic: p.Topic})
			i = len(a.TopicPartitions) - 1
		}
		a.TopicPartitions[i].Partitions = append(a.TopicPartitions[i].Partitions, int32(p.Partition))
	}
	return a
}
