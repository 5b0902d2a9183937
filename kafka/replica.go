package kafka

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReplicaBackend is implemented by a Backend that is a member of a
// replicating cluster (the adapter a replica member hands to Listen). The
// server hands it, as they are, the Fetch requests of follower replicas
// (ReplicaID ≥ 0) and the OffsetForLeaderEpoch requests; a Backend without
// it answers followers as consumers and does not serve
// OffsetForLeaderEpoch.
type ReplicaBackend interface {
	// FetchReplica answers a follower's Fetch (request version ≤ 12:
	// partitions by topic name). The response's record bytes are sent as
	// they are.
	FetchReplica(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error)
	// OffsetForLeaderEpoch answers Kafka's OffsetForLeaderEpoch.
	OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error)
}

const offsetForLeaderEpochKey int16 = 23

// replicaAPIs are the APIs the server adds for a ReplicaBackend.
var replicaAPIs = []api{{key: offsetForLeaderEpochKey, min: 3, max: 4, handle: handleOffsetForLeaderEpoch}}

// handleReplicaFetch serves a follower's Fetch through the ReplicaBackend;
// ok false when the request is not one (a consumer's, or no such backend).
func handleReplicaFetch(ctx context.Context, c *conn, req *kmsg.FetchRequest) (reply, bool) {
	rb := c.s.caps.replica
	if rb == nil || req.ReplicaID < 0 || req.Version > 12 {
		return reply{}, false
	}
	resp, err := rb.FetchReplica(ctx, req)
	if err != nil {
		resp = req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = errorCode(err)
	}
	if c.s.cfg.Metrics != nil {
		c.s.reportReplicaFetch(resp)
	}
	return reply{resp: resp}, true
}

func handleOffsetForLeaderEpoch(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp, err := c.s.caps.replica.OffsetForLeaderEpoch(ctx, req)
	if err != nil {
		resp = req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errorCode(err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return reply{resp: resp}
}

// ClusterBackend is implemented by a Backend that is a member of a
// cluster: Metadata and DescribeCluster then list every live broker and
// each partition's leader, leader epoch, replicas and ISR as it says,
// rather than this server as the only broker and leader.
type ClusterBackend interface {
	// ClusterBrokers returns the live brokers, by ID.
	ClusterBrokers() []ClusterBroker
	// ControllerID returns the active controller's ID, -1 if none is known.
	ControllerID() int32
	// PartitionState returns a partition's leader (-1: none), leader
	// epoch, replicas and ISR.
	PartitionState(topic string, partition int) (leader, leaderEpoch int32, replicas, isr []int32, ok bool)
}

// ListenerBackend is implemented by a ClusterBackend serving one of
// several listeners (Kafka's listeners), whose brokers need not all have
// it, so that ClusterBrokers lists only some of the cluster's.
// LeaderOffListener reports a partition whose leader is a live broker
// without an endpoint on this listener: PartitionState gives it leader
// -1, and Metadata answers it LISTENER_NOT_FOUND from v6 on, as Kafka
// does, LEADER_NOT_AVAILABLE to older versions. LiveBrokers is how many
// live brokers the whole cluster has: what CreateTopics checks a
// replication factor against, as Kafka's controller does.
type ListenerBackend interface {
	LeaderOffListener(topic string, partition int) bool
	LiveBrokers() int
}

// ClusterBroker is one broker of a ClusterBackend's cluster.
type ClusterBroker struct {
	ID   int32
	Host string
	Port int32
}

// clusterBrokers returns the brokers Metadata lists: the cluster's, or
// this server alone.
func (s *Server) clusterBrokers() ([]kmsg.MetadataResponseBroker, int32) {
	cb := s.caps.cluster
	if cb == nil {
		host, port := s.advertised()
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = s.cfg.NodeID, host, port
		return []kmsg.MetadataResponseBroker{br}, s.cfg.NodeID
	}
	var out []kmsg.MetadataResponseBroker
	for _, b := range cb.ClusterBrokers() {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = b.ID, b.Host, b.Port
		out = append(out, br)
	}
	return out, cb.ControllerID()
}

// clusterPartition fills a partition's leader, epoch, replicas and ISR
// from a ClusterBackend, for a Metadata request of version; false when the
// backend is not one.
func (s *Server) clusterPartition(topic string, p *kmsg.MetadataResponseTopicPartition, version int16) bool {
	cb := s.caps.cluster
	if cb == nil {
		return false
	}
	leader, epoch, replicas, isr, ok := cb.PartitionState(topic, int(p.Partition))
	if !ok {
		p.Leader, p.ErrorCode = -1, errorCode(log.ErrUnknownPartition)
		return true
	}
	p.Leader, p.LeaderEpoch, p.Replicas, p.ISR = leader, epoch, replicas, isr
	if leader < 0 {
		p.ErrorCode = errLeaderNotAvailable
		if lb := s.caps.listener; lb != nil && version >= 6 && lb.LeaderOffListener(topic, int(p.Partition)) {
			p.ErrorCode = errListenerNotFound
		}
	}
	return true
}
