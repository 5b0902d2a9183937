package kafka

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchesBackend is a ReplicaBatchesBackend over a standalone broker: it
// answers a follower's Fetch with handles on the partitions' segment
// files, as a cluster member does.
type batchesBackend struct {
	*log.Broker
	calls  atomic.Int64 // FetchReplicaBatches calls
	copies atomic.Int64 // FetchReplica calls (must not happen)
	fail   atomic.Bool  // FetchReplicaBatches answers ErrNotLeader
}

func (b *batchesBackend) FetchReplica(context.Context, *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	b.copies.Add(1)
	return nil, errors.New("FetchReplica called")
}

func (b *batchesBackend) OffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	return req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse), nil
}

func (b *batchesBackend) FetchReplicaBatches(_ context.Context, req *kmsg.FetchRequest) (*kmsg.FetchResponse, []log.Batches, error) {
	b.calls.Add(1)
	if b.fail.Load() {
		return nil, nil, log.ErrNotLeader
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	var recs []log.Batches
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			part, err := b.Partition(t.Topic, int(p.Partition))
			var h log.Batches
			if err == nil {
				h, err = part.Slice(p.FetchOffset, int(p.PartitionMaxBytes), part.EndOffset())
			}
			if err != nil {
				rp.ErrorCode = errorCode(err)
			} else {
				rp.HighWatermark, rp.LogStartOffset = part.HighWatermark(), part.StartOffset()
			}
			recs = append(recs, h)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, recs, nil
}

func replicaFetchReq(topic string, partitions int) *kmsg.FetchRequest {
	req := multiFetch(12, topic, partitions, 4<<20)
	req.ReplicaID = 2
	return req
}

// TestReplicaFetchSendfile: a ReplicaBatchesBackend's answer to a
// follower's Fetch goes out with sendfile from the segment files for a
// partition of sendfileMin bytes or more, copied below it, byte for byte
// the partitions' records either way, and every handle is released.
func TestReplicaFetchSendfile(t *testing.T) {
	leaktest.Check(t)
	lb := logtest.New(t, logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 3}))
	bb := &batchesBackend{Broker: lb}
	s, err := Listen("127.0.0.1:0", bb, Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	big := string(bytes.Repeat([]byte("x"), 1000))
	vals := make([]string, 40) // ~40 KB: over defaultSendfileMin
	for i := range vals {
		vals[i] = big
	}
	_, err = lb.Produce(t.Context(), log.TopicPartition{Topic: "t"}, records(vals...), log.AcksAll)
	require.NoError(t, err)
	_, err = lb.Produce(t.Context(), log.TopicPartition{Topic: "t", Partition: 1}, records("small"), log.AcksAll)
	require.NoError(t, err)
	want := make([][]byte, 3)
	for p := range 3 {
		part, err := lb.Partition("t", p)
		require.NoError(t, err)
		h, err := part.Slice(0, 4<<20, part.EndOffset())
		require.NoError(t, err)
		want[p], err = h.Bytes()
		h.Release()
		require.NoError(t, err)
	}
	require.Greater(t, int64(len(want[0])), s.sendfileMin)
	require.Less(t, int64(len(want[1])), s.sendfileMin)

	c := dial(t, s.Addr())
	req := replicaFetchReq("t", 3)
	raw := rawResponse(t, c, req, c.send(req))
	require.Equal(t, int64(1), s.sentFiles.Load(), "the big partition with sendfile, the small one copied")
	resp := req.ResponseKind()
	require.NoError(t, resp.ReadFrom(raw))
	fr := resp.(*kmsg.FetchResponse)
	for p := range 3 {
		got := fr.Topics[0].Partitions[p]
		require.Equal(t, errNone, got.ErrorCode, "partition %d", p)
		require.True(t, bytes.Equal(want[p], got.RecordBatches), "partition %d", p)
	}
	resp.SetVersion(12)
	require.Equal(t, resp.AppendTo(nil), raw, "the bytes kmsg encodes")
	require.Equal(t, int64(1), bb.calls.Load())
	require.Zero(t, bb.copies.Load(), "FetchReplica is not used when FetchReplicaBatches is there")
	require.Eventually(t, func() bool { return s.heldFiles.Load() == 0 }, 5*time.Second, time.Millisecond, "handles released")

	// With copying forced, the same bytes, no sendfile.
	s.sendfileMin = math.MaxInt64
	fr = c.do(replicaFetchReq("t", 3)).(*kmsg.FetchResponse)
	require.True(t, bytes.Equal(want[0], fr.Topics[0].Partitions[0].RecordBatches))
	require.Equal(t, int64(1), s.sentFiles.Load())

	// A consumer's fetch (replica id -1) is not the backend's.
	cf := fetchReq(12, "t", 0, 0, time.Millisecond)
	fr = c.do(cf).(*kmsg.FetchResponse)
	require.True(t, bytes.Equal(want[0], fr.Topics[0].Partitions[0].RecordBatches))
	require.Equal(t, int64(2), bb.calls.Load())

	// The backend's error is the response's.
	bb.fail.Store(true)
	fr = c.do(replicaFetchReq("t", 1)).(*kmsg.FetchResponse)
	require.Equal(t, errorCode(log.ErrNotLeader), fr.ErrorCode)
}
