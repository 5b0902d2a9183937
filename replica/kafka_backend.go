package replica

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/transport"
)

// kafkaBackend is the member as its kafka.Server on Addr (the
// inter-broker listener) sees it: the member's own verbs, and what only the
// server needs — followers' Fetch requests and OffsetForLeaderEpoch (the
// leader's side of the Kafka-protocol transport), the cluster's brokers,
// leaders and ISRs for Metadata, each group's coordinator. A client
// listener's server has a listenerBackend over it (listeners.go). These
// methods are the server's, not the member's users': they live here so that
// Broker exports only what an application calls.
type kafkaBackend struct{ *Broker }

var (
	_ kafka.Backend               = kafkaBackend{}
	_ kafka.ReplicaBackend        = kafkaBackend{}
	_ kafka.ReplicaBatchesBackend = kafkaBackend{}
	_ kafka.ClusterBackend        = kafkaBackend{}
	_ kafka.GroupRouter           = kafkaBackend{}
	_ kafka.ProducerIDBackend     = kafkaBackend{}
	_ kafka.PartitionCreator      = kafkaBackend{}
	_ kafka.BatchBorrower         = kafkaBackend{}
)

// Kafka error codes. internal/kerr is Strata's one table (the server's and
// the client's); replicaCodes are the replication path's own conditions,
// which Kafka gives codes of their own and log has no sentinel for.
var replicaCodes = []kerr.Row{
	{Err: ErrNotReplica, Code: kerr.NotLeaderOrFollower},
	// A log.ErrNotEnoughReplicas too (mapReplicaErr): it goes first.
	{Err: ErrNotEnoughReplicasAfterAppend, Code: kerr.NotEnoughReplicasAfterAppend},
	{Err: ErrFencedLeaderEpoch, Code: kerr.FencedLeaderEpoch},
	{Err: ErrUnknownLeaderEpoch, Code: kerr.UnknownLeaderEpoch},
}

// codeOf is the Kafka error code the member answers for err.
func codeOf(err error) int16 {
	if err == nil {
		return kerr.None
	}
	for _, r := range replicaCodes {
		if errors.Is(err, r.Err) {
			return r.Code
		}
	}
	return kerr.Code(err)
}

// errOf is the error of a Kafka error code, as the replication path and
// the routing read it: the sentinel, or for a code Strata has none for an
// error that names it (kafka.CodeError).
func errOf(code int16) error {
	switch code {
	case kerr.None:
		return nil
	case kerr.NotEnoughReplicasAfterAppend:
		return mapReplicaErr(ErrNotEnoughReplicasAfterAppend) // as the leader's own produce answers
	case kerr.FencedLeaderEpoch:
		return ErrFencedLeaderEpoch
	case kerr.UnknownLeaderEpoch:
		return ErrUnknownLeaderEpoch
	}
	if err := kerr.ErrorOf(code); err != nil {
		return err
	}
	return kafka.CodeError(code)
}

// FetchReplica answers a follower's Fetch (kafka.ReplicaBackend) with the
// record bytes in the response. The server prefers FetchReplicaBatches,
// which lets it send them from the segment files.
func (b kafkaBackend) FetchReplica(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, recs, err := b.fetchReplica(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() {
		for i := range recs {
			recs[i].Release()
		}
	}()
	k := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if r := &recs[k]; r.Len() > 0 {
				if raw, err := r.Bytes(); err != nil {
					rp.ErrorCode = kerr.UnknownServerError
				} else {
					rp.RecordBatches = raw
				}
			}
			k++
		}
	}
	return resp, nil
}

// FetchReplicaBatches answers a follower's Fetch
// (kafka.ReplicaBatchesBackend): the records of each partition are handles
// on the leader's segment files, which the server sends with sendfile.
func (b kafkaBackend) FetchReplicaBatches(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, []log.Batches, error) {
	return b.fetchReplica(ctx, req)
}

// fetchReplica answers a follower's Fetch: the response without records,
// and each partition's records in response order (the caller releases
// them).
func (b *Broker) fetchReplica(ctx context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, []log.Batches, error) {
	rr := transport.ReplicaFetchRequest{ReplicaID: int(req.ReplicaID), MaxWait: int64(req.MaxWaitMillis)}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			rr.Partitions = append(rr.Partitions, transport.ReplicaFetchPartition{
				TopicPartition:     log.TopicPartition{Topic: t.Topic, Partition: int(p.Partition)},
				CurrentLeaderEpoch: p.CurrentLeaderEpoch,
				FetchOffset:        p.FetchOffset,
				LastFetchedEpoch:   p.LastFetchedEpoch,
				LogStartOffset:     p.LogStartOffset,
				MaxBytes:           int(p.PartitionMaxBytes),
			})
		}
	}
	res, err := b.serveReplicaFetch(ctx, rr)
	if err != nil {
		return nil, nil, err
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	recs := make([]log.Batches, len(res.Partitions))
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(t.Partitions))
		for range t.Partitions {
			r := &res.Partitions[i]
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(r.Partition)
			rp.ErrorCode = codeOf(r.Err)
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = r.HighWatermark, r.HighWatermark, r.LogStartOffset
			if r.Diverging != nil {
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = r.Diverging.Epoch, r.Diverging.EndOffset
			}
			if r.Err == nil {
				recs[i], r.Records = r.Records, log.Batches{}
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	res.Release() // what was not moved to recs
	return resp, recs, nil
}

// OffsetForLeaderEpoch answers Kafka's OffsetForLeaderEpoch
// (kafka.ReplicaBackend).
func (b kafkaBackend) OffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			ans := b.serveEpochEnd(transport.EpochEndRequest{
				TopicPartition:     log.TopicPartition{Topic: t.Topic, Partition: int(p.Partition)},
				CurrentLeaderEpoch: p.CurrentLeaderEpoch, Epoch: p.LeaderEpoch,
			})
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeOf(ans.Err)
			rp.LeaderEpoch, rp.EndOffset = ans.End.Epoch, ans.End.EndOffset
			if ans.Err != nil {
				rp.LeaderEpoch, rp.EndOffset = machine.NoEpoch, machine.NoOffset
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// ClusterBrokers returns the live brokers with their data-plane addresses
// (kafka.ClusterBackend): what Metadata lists on Addr (a client
// listener's lists their addresses on it: listeners.go).
func (b kafkaBackend) ClusterBrokers() []kafka.ClusterBroker { return b.brokersOn("") }

// ControllerID returns the active controller (kafka.ClusterBackend).
func (b kafkaBackend) ControllerID() int32 {
	if id, ok := b.Controller(); ok {
		return int32(id)
	}
	return -1
}

// PartitionState returns a partition's leader, leader epoch, replicas and
// ISR as this member knows them (kafka.ClusterBackend).
func (b kafkaBackend) PartitionState(topic string, partition int) (leader, leaderEpoch int32, replicas, isr []int32, ok bool) {
	st, ok := b.img.Load().Partition(topic, partition)
	if !ok {
		return -1, -1, nil, nil, false
	}
	conv := func(xs []int) []int32 {
		out := make([]int32, len(xs))
		for i, x := range xs {
			out[i] = int32(x)
		}
		return out
	}
	return int32(st.Leader), st.LeaderEpoch, conv(st.Replicas), conv(st.ISR), true
}
