package kafka

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The pushed metrics of the server (Config.Metrics, a metrics.Hooks): the
// request paths ask whether it is set, one predictable branch, and call
// these only if it is.

// observed is what a pending request carries for its metrics.
type observed struct {
	start    time.Time // its frame fully read
	reqBytes int64     // its frame, size prefix included
	failed   bool      // its response carries an error code
}

// report tells the hooks of p, answered (written, or not for acks=0):
// outBytes is its response's size.
func (c *conn) report(p *pending, outBytes int64) {
	m := c.s.cfg.Metrics
	if p.obs.start.IsZero() {
		return // a raw SASL token: no API
	}
	m.Request(p.h.key, time.Since(p.obs.start), p.obs.failed)
	m.RequestBytes(p.h.key, p.obs.reqBytes, outBytes)
}

// responseBytes is the size of p's response frame: its buffers and the
// record batches sent from files between them.
func responseBytes(p *pending) int64 {
	var n int64
	for _, b := range p.out {
		n += int64(len(b))
	}
	for i := range p.files {
		n += p.files[i].b.Len()
	}
	return n
}

// batchRecords counts the records of the record batches in b (each
// batch's header says how many it holds); a torn tail counts nothing.
func batchRecords(b []byte) int64 {
	var n int64
	for len(b) >= 61 {
		n += int64(int32(binary.BigEndian.Uint32(b[57:61])))
		size := 12 + int64(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 61 || size > int64(len(b)) {
			break
		}
		b = b[size:]
	}
	return n
}

// reportReplicaFetch tells the hooks of the record bytes a follower
// fetched (Kafka's ReplicationBytesOutPerSec).
func (s *Server) reportReplicaFetch(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			if n := len(t.Partitions[j].RecordBatches); n > 0 {
				s.cfg.Metrics.Fetched(t.Topic, int64(n), true)
			}
		}
	}
}

// responseFailed reports whether resp carries an error code anywhere: at
// the top, or for one of its topics, partitions, groups or members (Kafka's
// RequestMetrics ErrorsPerSec counts a response's error codes; this counts
// the response once). A response type it does not know is not failed.
func responseFailed(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		return anyIn(r.Topics, func(t *kmsg.ProduceResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.ProduceResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.FetchResponse:
		return r.ErrorCode != 0 || anyIn(r.Topics, func(t *kmsg.FetchResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.FetchResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.ListOffsetsResponse:
		return anyIn(r.Topics, func(t *kmsg.ListOffsetsResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.ListOffsetsResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.MetadataResponse:
		return anyIn(r.Topics, func(t *kmsg.MetadataResponseTopic) bool {
			return t.ErrorCode != 0 || anyCode(t.Partitions, func(p *kmsg.MetadataResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.OffsetCommitResponse:
		return anyIn(r.Topics, func(t *kmsg.OffsetCommitResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.OffsetCommitResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.OffsetFetchResponse:
		return r.ErrorCode != 0 || anyIn(r.Topics, func(t *kmsg.OffsetFetchResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.OffsetFetchResponseTopicPartition) int16 { return p.ErrorCode })
		}) || anyIn(r.Groups, func(g *kmsg.OffsetFetchResponseGroup) bool {
			return g.ErrorCode != 0 || anyIn(g.Topics, func(t *kmsg.OffsetFetchResponseGroupTopic) bool {
				return anyCode(t.Partitions, func(p *kmsg.OffsetFetchResponseGroupTopicPartition) int16 { return p.ErrorCode })
			})
		})
	case *kmsg.OffsetForLeaderEpochResponse:
		return anyIn(r.Topics, func(t *kmsg.OffsetForLeaderEpochResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.OffsetForLeaderEpochResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.DeleteRecordsResponse:
		return anyIn(r.Topics, func(t *kmsg.DeleteRecordsResponseTopic) bool {
			return anyCode(t.Partitions, func(p *kmsg.DeleteRecordsResponseTopicPartition) int16 { return p.ErrorCode })
		})
	case *kmsg.FindCoordinatorResponse:
		return r.ErrorCode != 0 || anyCode(r.Coordinators, func(c *kmsg.FindCoordinatorResponseCoordinator) int16 { return c.ErrorCode })
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode != 0 || anyCode(r.Members, func(m *kmsg.LeaveGroupResponseMember) int16 { return m.ErrorCode })
	case *kmsg.DescribeGroupsResponse:
		return anyCode(r.Groups, func(g *kmsg.DescribeGroupsResponseGroup) int16 { return g.ErrorCode })
	case *kmsg.DeleteGroupsResponse:
		return anyCode(r.Groups, func(g *kmsg.DeleteGroupsResponseGroup) int16 { return g.ErrorCode })
	case *kmsg.CreateTopicsResponse:
		return anyCode(r.Topics, func(t *kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.DeleteTopicsResponse:
		return anyCode(r.Topics, func(t *kmsg.DeleteTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.CreatePartitionsResponse:
		return anyCode(r.Topics, func(t *kmsg.CreatePartitionsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.DescribeConfigsResponse:
		return anyCode(r.Resources, func(rs *kmsg.DescribeConfigsResponseResource) int16 { return rs.ErrorCode })
	case *kmsg.IncrementalAlterConfigsResponse:
		return anyCode(r.Resources, func(rs *kmsg.IncrementalAlterConfigsResponseResource) int16 { return rs.ErrorCode })
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode != 0
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode != 0
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode != 0
	case *kmsg.ListGroupsResponse:
		return r.ErrorCode != 0
	case *kmsg.ApiVersionsResponse:
		return r.ErrorCode != 0
	case *kmsg.SASLHandshakeResponse:
		return r.ErrorCode != 0
	case *kmsg.SASLAuthenticateResponse:
		return r.ErrorCode != 0
	case *kmsg.InitProducerIDResponse:
		return r.ErrorCode != 0
	case *kmsg.DescribeClusterResponse:
		return r.ErrorCode != 0
	}
	return false
}

// anyCode reports whether the code of an element of xs is an error.
func anyCode[T any](xs []T, code func(*T) int16) bool {
	for i := range xs {
		if code(&xs[i]) != 0 {
			return true
		}
	}
	return false
}

// anyIn reports whether failed holds for an element of xs.
func anyIn[T any](xs []T, failed func(*T) bool) bool {
	for i := range xs {
		if failed(&xs[i]) {
			return true
		}
	}
	return false
}
