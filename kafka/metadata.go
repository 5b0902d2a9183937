package kafka

import (
	"context"
	"errors"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleMetadata answers with this broker as the only one: the leader of
// every partition and its only in-sync replica.
func handleMetadata(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.MetadataRequest)
	s := c.s
	resp := kmsg.NewPtrMetadataResponse()
	resp.Brokers, resp.ControllerID = s.clusterBrokers()
	resp.ClusterID = &s.cfg.ClusterID

	// v0: an empty list means every topic; v1+: a null list does.
	if req.Topics == nil || req.Version == 0 && len(req.Topics) == 0 {
		for _, name := range s.b.Topics() {
			resp.Topics = append(resp.Topics, s.topicMetadata(name, [16]byte{}, req.Version))
		}
		return reply{resp: resp}
	}
	// Before v4 clients could not say; Kafka then allowed it.
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, t := range req.Topics {
		name := ""
		switch {
		case t.Topic != nil:
			name = *t.Topic
			if autoCreate && log.ValidTopicName(name) == nil {
				if _, err := s.b.Partitions(name); errors.Is(err, log.ErrUnknownTopic) {
					err := s.b.CreateTopicContext(ctx, name, log.TopicConfig{})
					if err != nil && !errors.Is(err, log.ErrTopicExists) {
						c.logger.Warn("kafka: auto-create topic", "topic", name, "err", err)
					}
				}
			}
		default: // v10+: by id
			name, _ = s.topicName(t.TopicID)
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(name, t.TopicID, req.Version))
	}
	return reply{resp: resp}
}

// topicMetadata describes one topic, at the request's version; id is the
// id it was asked by, if any.
func (s *Server) topicMetadata(name string, id [16]byte, version int16) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	if name == "" && id != ([16]byte{}) {
		t.TopicID, t.ErrorCode = id, errUnknownTopicID
		return t
	}
	t.Topic = kmsg.StringPtr(name)
	if err := log.ValidTopicName(name); err != nil {
		t.ErrorCode = errorCode(err)
		return t
	}
	n, err := s.b.Partitions(name)
	if err != nil {
		t.ErrorCode = errorCode(err)
		return t
	}
	t.TopicID = topicID(name)
	t.IsInternal = name == log.OffsetsTopic
	node := s.cfg.NodeID
	for i := range n {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		if s.clusterPartition(name, &p, version) {
			t.Partitions = append(t.Partitions, p)
			continue
		}
		p.Leader = node
		p.LeaderEpoch = 0
		p.Replicas = []int32{node}
		p.ISR = []int32{node}
		t.Partitions = append(t.Partitions, p)
	}
	return t
}

// topicName returns the topic whose id is id.
func (s *Server) topicName(id [16]byte) (string, bool) {
	for _, name := range s.b.Topics() {
		if topicID(name) == id {
			return name, true
		}
	}
	return "", false
}

// topicNames maps the ids of every topic to their names.
func (s *Server) topicNames() map[[16]byte]string {
	names := s.b.Topics()
	m := make(map[[16]byte]string, len(names))
	for _, name := range names {
		m[topicID(name)] = name
	}
	return m
}

func handleDescribeCluster(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeClusterRequest)
	s := c.s
	resp := kmsg.NewPtrDescribeClusterResponse()
	switch {
	case req.Version == 0, req.EndpointType == 1: // brokers
	case req.EndpointType == 2:
		// Controllers: this server is a broker, not one of them.
		resp.ErrorCode = errMismatchedEndpointType
		return reply{resp: resp}
	default:
		resp.ErrorCode = errUnsupportedEndpointType
		return reply{resp: resp}
	}
	resp.EndpointType = 1
	resp.ClusterID = s.cfg.ClusterID
	// The cluster's brokers as Metadata lists them (this server alone
	// without a ClusterBackend).
	brokers, controller := s.clusterBrokers()
	resp.ControllerID = controller
	for _, b := range brokers {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port, br.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, br)
	}
	return reply{resp: resp}
}
