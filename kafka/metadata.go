package kafka

import (
	"context"
	"errors"
	"slices"

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
		names := s.b.Topics()
		// Kafka lists its internal topics too, marked IsInternal; a
		// standalone log.Broker keeps __consumer_offsets and
		// __transaction_state out of Topics.
		for _, internal := range []string{log.OffsetsTopic, log.TransactionStateTopic} {
			if !slices.Contains(names, internal) {
				if _, err := s.b.Partitions(ctx, internal); err == nil {
					names = append(names, internal)
				}
			}
		}
		for _, name := range names {
			resp.Topics = append(resp.Topics, s.topicMetadata(ctx, name, [16]byte{}, req.Version))
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
				if _, err := s.b.Partitions(ctx, name); errors.Is(err, log.ErrUnknownTopic) {
					err := s.b.CreateTopicContext(ctx, name, log.TopicConfig{})
					if err != nil && !errors.Is(err, log.ErrTopicExists) {
						c.logger.Warn("kafka: auto-create topic", "topic", name, "err", err)
					}
				}
			}
		default: // v10+: by id
			name, _ = s.topicName(t.TopicID)
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(ctx, name, t.TopicID, req.Version))
	}
	return reply{resp: resp}
}

// topicMetadata describes one topic, at the request's version; id is the
// id it was asked by, if any.
func (s *Server) topicMetadata(ctx context.Context, name string, id [16]byte, version int16) kmsg.MetadataResponseTopic {
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
	n, err := s.b.Partitions(ctx, name)
	if err != nil {
		t.ErrorCode = errorCode(err)
		return t
	}
	t.TopicID = topicID(name)
	t.IsInternal = name == log.OffsetsTopic || name == log.TransactionStateTopic || name == log.ShareStateTopic
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

// topicName returns the topic whose id (topicID) is id, false if no topic
// has it. The ids of the topics seen are cached: an id is derived from its
// name with SHA-256, and Produce and Fetch v13+ name topics by id, so
// deriving every topic's id for each request cost a hash per topic per
// request. An id not in the cache makes it derive those of the backend's
// topics not seen yet.
func (s *Server) topicName(id [16]byte) (string, bool) {
	if v, ok := s.idNames.Load(id); ok {
		name := v.(string)
		if _, err := s.b.Partitions(context.Background(), name); err == nil { // the backend answers from its metadata
			return name, true
		}
		return "", false // deleted (an id is its name's: it comes back with it)
	}
	s.idMu.Lock()
	defer s.idMu.Unlock()
	names := s.b.Topics()
	if len(s.idKnown) > 2*len(names)+64 {
		// Mostly deleted topics: start again, so that topics coming and
		// going do not grow the cache for good.
		clear(s.idKnown)
		s.idNames.Clear()
	}
	for _, name := range names {
		if _, ok := s.idKnown[name]; !ok {
			s.idKnown[name] = struct{}{}
			s.idNames.Store(topicID(name), name)
		}
	}
	if v, ok := s.idNames.Load(id); ok {
		return v.(string), true
	}
	return "", false
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
