package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnCommitReq(v int16, groupID string, pid int64, epoch int16, topic string, offsets ...int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = v, "tx", groupID, pid, epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for i, off := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = int32(i), off, kmsg.StringPtr("m")
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func offsetFetchStable(v int16, groupID, topic string, partitions ...int32) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = v, true
	if v < 8 {
		req.Group = groupID
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
		return req
	}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = groupID
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, partitions
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	return req
}

// fetchedPartitions returns the partitions of an OffsetFetch response's one
// group (any version) as offset and error code.
func fetchedPartitions(resp *kmsg.OffsetFetchResponse) map[int32][2]int64 {
	out := map[int32][2]int64{}
	if resp.Version < 8 {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out[p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
			}
		}
		return out
	}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = [2]int64{p.Offset, int64(p.ErrorCode)}
		}
	}
	return out
}

// TxnOffsetCommit in every served version: the offsets are pending —
// OffsetFetch without RequireStable shows the old ones, with it
// UNSTABLE_OFFSET_COMMIT (KIP-447) — until the transaction's marker; an
// abort drops them. Unknown partitions, long metadata and an older
// producer epoch get their codes.
func TestTxnOffsetCommitEveryVersion(t *testing.T) {
	leaktest.Check(t)
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 2))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c := dial(t, s.Addr())
	ctx := context.Background()
	gc := b.GroupCoordinator()
	unstable := int64(kerr.UnstableOffsetCommit)
	for v := int16(0); v <= 4; v++ {
		pid := int64(100 + v)
		groupID := "g" + string(rune('0'+v))
		req := txnCommitReq(v, groupID, pid, 0, "t", 10, 20)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
		req.Topics[0].Partitions[2].Partition = 7 // t has 2
		resp := c.do(req).(*kmsg.TxnOffsetCommitResponse)
		codes := []int16{}
		for _, p := range resp.Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		require.Equal(t, []int16{errNone, errNone, errUnknownTopicOrPartition}, codes, "v%d", v)

		for _, fv := range []int16{7, 8} {
			plain := offsetFetchStable(fv, groupID, "t", 0, 1)
			plain.RequireStable = false
			require.Equal(t, map[int32][2]int64{0: {-1, 0}, 1: {-1, 0}}, fetchedPartitions(c.do(plain).(*kmsg.OffsetFetchResponse)), "v%d", v)
			got := fetchedPartitions(c.do(offsetFetchStable(fv, groupID, "t", 0, 1)).(*kmsg.OffsetFetchResponse))
			require.Equal(t, map[int32][2]int64{0: {-1, unstable}, 1: {-1, unstable}}, got, "v%d fetch v%d", v, fv)
		}
		commit := v%2 == 0
		require.NoError(t, gc.CompleteTxn(ctx, pid, 0, commit))
		want := map[int32][2]int64{0: {-1, 0}, 1: {-1, 0}}
		if commit {
			want = map[int32][2]int64{0: {10, 0}, 1: {20, 0}}
		}
		require.Equal(t, want, fetchedPartitions(c.do(offsetFetchStable(8, groupID, "t", 0, 1)).(*kmsg.OffsetFetchResponse)), "v%d", v)
		if commit {
			co := gc.CommittedWithMetadata(groupID, nil)[log.TopicPartition{Topic: "t", Partition: 0}]
			require.Equal(t, "m", co.Metadata)
		}

		// An epoch older than the producer's.
		require.Equal(t, errNone, c.do(txnCommitReq(v, groupID, pid, 2, "t", 1)).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
		old := c.do(txnCommitReq(v, groupID, pid, 1, "t", 1)).(*kmsg.TxnOffsetCommitResponse)
		require.Equal(t, kerr.InvalidProducerEpoch, old.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		require.NoError(t, gc.CompleteTxn(ctx, pid, 2, false))
	}
	long := txnCommitReq(3, "g", 1, 0, "t", 5)
	long.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(string(make([]byte, maxOffsetMetadata+1)))
	require.Equal(t, errOffsetMetadataTooLarge, c.do(long).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	empty := txnCommitReq(3, "", 1, 0, "t", 5)
	require.Equal(t, errInvalidGroupID, c.do(empty).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
}

// TxnOffsetCommit v3+ fences members as OffsetCommit does (KIP-447): an
// unknown member, an old generation and a zombie static member are refused
// and nothing becomes pending.
func TestTxnOffsetCommitFencesMembers(t *testing.T) {
	leaktest.Check(t)
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c := dial(t, s.Addr())
	jr := joinReq(5, "g", "", 10*time.Second, 10*time.Second, "t")
	jr.InstanceID = kmsg.StringPtr("i1")
	j := c.do(jr).(*kmsg.JoinGroupResponse)
	require.Equal(t, errNone, j.ErrorCode)
	sr := c.do(syncReq(3, "g", j.MemberID, j.Generation, nil)).(*kmsg.SyncGroupResponse)
	require.Equal(t, errNone, sr.ErrorCode)

	as := func(member string, instance *string, gen int32) int16 {
		req := txnCommitReq(3, "g", 9, 0, "t", 4)
		req.MemberID, req.InstanceID, req.Generation = member, instance, gen
		return c.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, errUnknownMemberID, as("nobody", nil, j.Generation))
	require.Equal(t, errIllegalGeneration, as(j.MemberID, kmsg.StringPtr("i1"), j.Generation+1))
	require.Equal(t, errFencedInstanceID, as("zombie", kmsg.StringPtr("i1"), j.Generation))
	require.Empty(t, b.GroupCoordinator().PendingTxn("g", nil))
	require.Equal(t, errNone, as(j.MemberID, kmsg.StringPtr("i1"), j.Generation))
	require.Len(t, b.GroupCoordinator().PendingTxn("g", nil), 1)
}
