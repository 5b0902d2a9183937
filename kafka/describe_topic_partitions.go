package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTopicPartitions (KIP-966) is Metadata's topic half, paged: the
// topics asked for (none: every topic) in name order, each partition's
// leader, leader epoch, replicas, ISR and offline replicas, at most
// ResponsePartitionLimit partitions (capped by the broker's limit, Kafka's
// max.request.partition.size.limit, and at least 1) from the request's
// cursor on, and the cursor where the next page starts when the limit cut
// the answer short. Strata has no eligible leader replicas (ELR, KIP-966's
// unclean-recovery half): those lists are empty.

const (
	describeTopicPartitionsKey int16 = 75
	// maxDescribePartitions is Kafka's max.request.partition.size.limit
	// default: the most partitions one response holds.
	maxDescribePartitions = 2000
)

// describeTopicPartitionsAPIs are served by every backend: what they
// answer is Metadata's.
var describeTopicPartitionsAPIs = []api{{key: describeTopicPartitionsKey, min: 0, max: 0, handle: handleDescribeTopicPartitions}}

// handleDescribeTopicPartitions answers one page. Authorization (Describe
// on each topic) is checked here, not by a guard in front: a topic the
// connection may not describe is left out of a request for every topic
// before the page is cut, so that the cursor only ever names visible
// topics; one asked for by name is answered TOPIC_AUTHORIZATION_FAILED
// with no id, as Kafka does.
func handleDescribeTopicPartitions(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeTopicPartitionsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	cursorTopic := ""
	if req.Cursor != nil {
		cursorTopic = req.Cursor.Topic
	}
	var names []string
	if all {
		names = s.b.Topics() // those Metadata lists
	} else {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	names = slices.DeleteFunc(names, func(n string) bool { return n < cursorTopic })
	if err := checkDescribeCursor(req, names, all); err != nil {
		// Kafka answers an invalid request with the error on every topic
		// asked for.
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(t.Topic), errorCode(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return reply{resp: resp}
	}
	var refused []string
	names = slices.DeleteFunc(names, func(n string) bool {
		if c.allowed(acl.OpDescribe, acl.Topic(n)) {
			return false
		}
		if !all {
			refused = append(refused, n)
		}
		return true
	})
	limit := max(min(int(req.ResponsePartitionLimit), maxDescribePartitions), 1)
	remaining := limit
	for _, name := range names {
		if remaining == 0 {
			// The previous topics are whole: the next page starts here.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		start := 0
		if req.Cursor != nil && name == cursorTopic {
			start = int(req.Cursor.Partition)
		}
		rt, next, ok := s.describeTopicPartitions(ctx, name, start, remaining)
		if !ok {
			if !all { // asked for by name: say why it is missing
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		rt.AuthorizedOperations = c.authorizedOps(acl.Topic(name), topicOps)
		resp.Topics = append(resp.Topics, rt)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(next)}
			break
		}
		remaining -= len(rt.Partitions)
	}
	for _, name := range refused {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), errTopicAuthorizationFailed
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}

// checkDescribeCursor is Kafka's check of a request's cursor: a topic
// list that names topics must name the cursor's, and its partition cannot
// be negative (INVALID_REQUEST). names are those at or after the cursor.
func checkDescribeCursor(req *kmsg.DescribeTopicPartitionsRequest, names []string, all bool) error {
	cur := req.Cursor
	if cur == nil {
		return nil
	}
	if !all && !slices.Contains(names, cur.Topic) {
		return fmt.Errorf("%w: the topic list does not contain the cursor's topic %s", errInvalidRequestErr, cur.Topic)
	}
	if cur.Partition < 0 {
		return fmt.Errorf("%w: cursor partition %d", errInvalidRequestErr, cur.Partition)
	}
	return nil
}

// describeTopicPartitions describes the partitions of topic name from
// start on, at most limit of them; next is the first one left out (-1: none
// was). ok is false for a topic that does not exist (or an invalid name):
// t then carries the error.
func (s *Server) describeTopicPartitions(ctx context.Context, name string, start, limit int) (t kmsg.DescribeTopicPartitionsResponseTopic, next int, ok bool) {
	t = kmsg.NewDescribeTopicPartitionsResponseTopic()
	t.Topic = kmsg.StringPtr(name)
	if err := log.ValidTopicName(name); err != nil {
		t.ErrorCode = errorCode(err)
		return t, -1, false
	}
	n, err := s.b.Partitions(ctx, name)
	if err != nil {
		t.ErrorCode = errorCode(err)
		return t, -1, false
	}
	t.TopicID = topicID(name)
	t.IsInternal = name == log.OffsetsTopic
	end := min(n, start+limit)
	next = -1
	if end < n {
		next = end
	}
	t.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	live := s.liveBrokerSet()
	for i := start; i < end; i++ {
		t.Partitions = append(t.Partitions, s.describePartition(name, i, live))
	}
	return t, next, true
}

// liveBrokerSet is the brokers a replica can be online on (those with an
// endpoint on this listener, as Kafka counts them), nil without a
// ClusterBackend.
func (s *Server) liveBrokerSet() map[int32]bool {
	cb := s.caps.cluster
	if cb == nil {
		return nil
	}
	live := map[int32]bool{}
	for _, b := range cb.ClusterBrokers() {
		live[b.ID] = true
	}
	return live
}

// describePartition is one partition's state: this server's as the only
// replica of a standalone backend (as Metadata says), else the cluster's.
func (s *Server) describePartition(topic string, i int, live map[int32]bool) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	p.Partition = int32(i)
	p.EligibleLeaderReplicas, p.LastKnownELR, p.OfflineReplicas = []int32{}, []int32{}, []int32{}
	cb := s.caps.cluster
	if cb == nil {
		node := s.cfg.NodeID
		p.LeaderID, p.LeaderEpoch = node, 0
		p.Replicas, p.ISR = []int32{node}, []int32{node}
		return p
	}
	leader, epoch, replicas, isr, ok := cb.PartitionState(topic, i)
	if !ok {
		p.LeaderID, p.ErrorCode = -1, errorCode(log.ErrUnknownPartition)
		return p
	}
	p.LeaderID, p.LeaderEpoch = leader, epoch
	p.Replicas, p.ISR = slices.Clone(replicas), slices.Clone(isr)
	if p.Replicas == nil {
		p.Replicas = []int32{}
	}
	if p.ISR == nil {
		p.ISR = []int32{}
	}
	for _, r := range replicas {
		if !live[r] {
			p.OfflineReplicas = append(p.OfflineReplicas, r)
		}
	}
	return p
}
