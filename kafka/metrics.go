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
	case nil:
		return false
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			return true
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				return true
			}
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
	case *kmsg.OffsetFetchResponse:
		if r.ErrorCode != 0 {
			return true
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return true
			}
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						return true
					}
				}
			}
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return true
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if r.ErrorCode != 0 {
			return true
		}
		for _, c := range r.Coordinators {
			if c.ErrorCode != 0 {
				return true
			}
		}
	case *kmsg.LeaveGroupResponse:
		if r.ErrorCode != 0 {
			return true
		}
		for _, m := range r.Members {
			if m.ErrorCode != 0 {
				return true
			}
		}
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return true
			}
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			if g.ErrorCode != 0 {
				return true
			}
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				return true
			}
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode != 0 {
				return true
			}
		}
	case *kmsg.DescribeConfigsResponse:
		for _, rs := range r.Resources {
			if rs.ErrorCode != 0 {
				return true
			}
		}
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
