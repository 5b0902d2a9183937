package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

func startShare(t *testing.T, n int) (*Server, *log.Broker) {
	t.Helper()
	var recs []log.Record
	for i := range n {
		recs = append(recs, log.Record{Value: fmt.Appendf(nil, "v%d", i)})
	}
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1), logtest.Seed("t", recs...))
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, b
}

func shareHeartbeat(member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatRequest {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.SetVersion(1)
	req.GroupID, req.MemberID, req.MemberEpoch = "g", member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return req
}

// shareFetch fetches partition 0 of t with epoch, acknowledging acks
// (first, last, type).
func shareFetch(member string, epoch int32, max int32, wait int32, acks ...[3]int64) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxRecords, req.BatchSize, req.MaxWaitMillis, req.MaxBytes = epoch, max, max, wait, 1<<20
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topicID("t")
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range acks {
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: a[0], LastOffset: a[1], AcknowledgeTypes: []int8{int8(a[2])}})
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// acquired returns the acquired ranges of the answer's only partition as
// "first-last@count", and the offsets of the records returned in them.
func acquired(t *testing.T, resp *kmsg.ShareFetchResponse) (string, []int64) {
	t.Helper()
	require.Equal(t, errNone, resp.ErrorCode)
	s := ""
	var offs []int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			require.Equal(t, errNone, rp.ErrorCode)
			for _, a := range rp.AcquiredRecords {
				s += fmt.Sprintf("%d-%d@%d ", a.FirstOffset, a.LastOffset, a.DeliveryCount)
			}
			err := batch.Batches(rp.Records, func(bt []byte, h batch.Header) error {
				return batch.Records(bt, h, func(r *batch.Record) error {
					for _, a := range rp.AcquiredRecords {
						if r.Offset >= a.FirstOffset && r.Offset <= a.LastOffset {
							offs = append(offs, r.Offset)
						}
					}
					return nil
				})
			})
			require.NoError(t, err)
		}
	}
	return s, offs
}

// TestShareFetchOverTheWire: a member joins, fetches under a share
// session, acknowledges on the next fetch and with ShareAcknowledge; the
// session's epochs are checked; the group is listed and described as a
// share group and its offsets described.
func TestShareFetchOverTheWire(t *testing.T) {
	leaktest.Check(t)
	s, _ := startShare(t, 10)
	c := dial(t, s.Addr())

	hb := c.do(shareHeartbeat("m1", 0, "t")).(*kmsg.ShareGroupHeartbeatResponse)
	require.Equal(t, errNone, hb.ErrorCode)
	require.Equal(t, int32(1), hb.MemberEpoch)
	require.Equal(t, topicID("t"), hb.Assignment.TopicPartitions[0].TopicID)

	f := c.do(shareFetch("m1", 0, 5, 0)).(*kmsg.ShareFetchResponse)
	got, offs := acquired(t, f)
	require.Equal(t, "0-4@1 ", got)
	require.Equal(t, []int64{0, 1, 2, 3, 4}, offs)
	require.Equal(t, int32(30000), f.AcquisitionLockTimeoutMillis)

	// Accept 0-2, release 3-4 on the next fetch: 3-4 come again at count 2.
	f = c.do(shareFetch("m1", 1, 5, 0, [3]int64{0, 2, 1}, [3]int64{3, 4, 2})).(*kmsg.ShareFetchResponse)
	require.Equal(t, errNone, f.Topics[0].Partitions[0].AcknowledgeErrorCode)
	got, _ = acquired(t, f)
	require.Equal(t, "3-4@2 5-7@1 ", got)

	// A stale epoch is refused; acknowledging what another holds too.
	f = c.do(shareFetch("m1", 1, 5, 0)).(*kmsg.ShareFetchResponse)
	require.Equal(t, errInvalidShareSessionEpoch, f.ErrorCode)
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.SetVersion(2)
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("g"), kmsg.StringPtr("m1"), 2
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = topicID("t")
	at.Partitions = []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 3, LastOffset: 7, AcknowledgeTypes: []int8{1}},
	}}}
	ack.Topics = append(ack.Topics, at)
	ar := c.do(ack).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, errNone, ar.ErrorCode)
	require.Equal(t, errNone, ar.Topics[0].Partitions[0].ErrorCode)
	ack.ShareSessionEpoch = 3
	ar = c.do(ack).(*kmsg.ShareAcknowledgeResponse)
	require.Equal(t, errInvalidRecordState, ar.Topics[0].Partitions[0].ErrorCode)

	// Listed and described as a share group; offsets described.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(5)
	lg.TypesFilter = []string{"share"}
	lr := c.do(lg).(*kmsg.ListGroupsResponse)
	require.Len(t, lr.Groups, 1)
	require.Equal(t, "share", lr.Groups[0].GroupType)
	require.Equal(t, "Stable", lr.Groups[0].GroupState)
	dg := kmsg.NewPtrShareGroupDescribeRequest()
	dg.SetVersion(1)
	dg.GroupIDs = []string{"g", "nope"}
	dr := c.do(dg).(*kmsg.ShareGroupDescribeResponse)
	require.Equal(t, "Stable", dr.Groups[0].GroupState)
	require.Equal(t, "m1", dr.Groups[0].Members[0].MemberID)
	require.Equal(t, errGroupIDNotFound, dr.Groups[1].ErrorCode)
	do := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	do.SetVersion(1)
	do.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g"}}
	or := c.do(do).(*kmsg.DescribeShareGroupOffsetsResponse)
	require.Equal(t, int64(8), or.Groups[0].Topics[0].Partitions[0].StartOffset)
	require.Equal(t, int64(2), or.Groups[0].Topics[0].Partitions[0].Lag)
}

// TestShareSessionClosedWithTheConnection: a member's connection closes
// mid-batch; its records are released at once and another member, parked
// in a fetch, gets them with delivery count 2. An offsets change needs
// the group empty.
func TestShareSessionClosedWithTheConnection(t *testing.T) {
	leaktest.Check(t)
	s, _ := startShare(t, 4)
	c1, c2 := dial(t, s.Addr()), dial(t, s.Addr())
	c1.do(shareHeartbeat("m1", 0, "t"))
	c2.do(shareHeartbeat("m2", 0, "t"))
	got, _ := acquired(t, c1.do(shareFetch("m1", 0, 10, 0)).(*kmsg.ShareFetchResponse))
	require.Equal(t, "0-3@1 ", got)
	got, _ = acquired(t, c2.do(shareFetch("m2", 0, 10, 0)).(*kmsg.ShareFetchResponse))
	require.Equal(t, "", got)

	corr := c2.send(shareFetch("m2", 1, 10, 60000)) // parks
	require.NoError(t, c1.nc.Close())
	got, offs := acquired(t, c2.recv(shareFetch("m2", 1, 10, 60000), corr).(*kmsg.ShareFetchResponse))
	require.Equal(t, "0-3@2 ", got)
	require.Equal(t, []int64{0, 1, 2, 3}, offs)

	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "g"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 2}}}}
	require.Equal(t, errorCode(share.ErrNonEmptyGroup), c2.do(alter).(*kmsg.AlterShareGroupOffsetsResponse).ErrorCode)
}

// TestShareGroupConfigs: share.* group configs set with
// IncrementalAlterConfigs on the GROUP resource are described and used; a
// bad value or unknown config changes nothing.
func TestShareGroupConfigs(t *testing.T) {
	leaktest.Check(t)
	s, b := startShare(t, 3)
	c := dial(t, s.Addr())
	alter := func(name, value string, validateOnly bool) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g2",
			Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: opSet, Value: kmsg.StringPtr(value)}}}}
		return c.do(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	require.Equal(t, errNone, alter("share.record.lock.duration.ms", "15000", false))
	require.Equal(t, errNone, alter("share.auto.offset.reset", "earliest", true)) // checked only
	require.Equal(t, errInvalidConfig, alter("share.auto.offset.reset", "never", false))
	require.Equal(t, errInvalidConfig, alter("share.bogus", "1", false))
	require.Equal(t, share.GroupConfig{LockDuration: 15 * time.Second}, b.ShareCoordinator().GroupConfig("g2"))

	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g2"}}
	got := map[string]string{}
	for _, rc := range c.do(req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		got[rc.Name] = *rc.Value
	}
	require.Equal(t, map[string]string{"share.auto.offset.reset": "latest", "share.delivery.count.limit": "5", "share.record.lock.duration.ms": "15000"}, got)
}

// TestShareFetchTakesTurns: a session's fetches start each at the next
// partition, so that a backlog on one does not starve the other.
func TestShareFetchTakesTurns(t *testing.T) {
	leaktest.Check(t)
	var recs []log.Record
	for i := range 40 {
		recs = append(recs, log.Record{Partition: i % 2, Value: fmt.Appendf(nil, "v%d", i)})
	}
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 2), logtest.Seed("t", recs...))
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c := dial(t, s.Addr())
	c.do(shareHeartbeat("m1", 0, "t"))
	seen := map[int32]int{}
	for epoch := int32(0); epoch < 4; epoch++ {
		req := shareFetch("m1", epoch, 5, 0)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, kmsg.ShareFetchRequestTopicPartition{Partition: 1})
		for _, rt := range c.do(req).(*kmsg.ShareFetchResponse).Topics {
			for _, rp := range rt.Partitions {
				for _, a := range rp.AcquiredRecords {
					seen[rp.Partition] += int(a.LastOffset - a.FirstOffset + 1)
				}
			}
		}
	}
	require.Equal(t, map[int32]int{0: 10, 1: 10}, seen)
}

// TestGroupIDsAcrossTypes: a share group's id cannot be taken by a
// classic group (JoinGroup: INCONSISTENT_GROUP_PROTOCOL) nor by a
// consumer group (ConsumerGroupHeartbeat: GROUP_ID_NOT_FOUND), and a
// classic or consumer group's cannot be taken by a share group
// (ShareGroupHeartbeat and ShareFetch: GROUP_ID_NOT_FOUND), with Kafka's
// messages; the refused requests make no group.
func TestGroupIDsAcrossTypes(t *testing.T) {
	leaktest.Check(t)
	s, b := startShare(t, 10)
	c := dial(t, s.Addr())

	hb := c.do(shareHeartbeat("m1", 0, "t")).(*kmsg.ShareGroupHeartbeatResponse)
	require.Equal(t, errNone, hb.ErrorCode)

	join := func(g string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(3) // before KIP-394: joined at once
		req.Group, req.ProtocolType = g, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 6000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}}}
		return c.do(req).(*kmsg.JoinGroupResponse)
	}
	consumerHB := func(g string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1)
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = g, "c-member", 0, 5000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return c.do(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	shareHB := func(g string) *kmsg.ShareGroupHeartbeatResponse {
		req := shareHeartbeat("m2", 0, "t")
		req.GroupID = g
		return c.do(req).(*kmsg.ShareGroupHeartbeatResponse)
	}

	// The share group's id, to the other types.
	jr := join("g")
	require.Equal(t, errInconsistentGroupProtocol, jr.ErrorCode)
	require.Empty(t, jr.MemberID)
	cr := consumerHB("g")
	require.Equal(t, errGroupIDNotFound, cr.ErrorCode)
	require.Equal(t, "Group g is not a consumer group.", *cr.ErrorMessage)
	_, other := b.GroupCoordinator().Type("g")
	require.False(t, other, "no classic or consumer group g was made")

	// A classic and a consumer group's ids, to a share group.
	require.Equal(t, errNone, join("classic").ErrorCode)
	nr := consumerHB("next")
	require.Equal(t, errNone, nr.ErrorCode, "%v", nr.ErrorMessage)
	for _, g := range []string{"classic", "next"} {
		sr := shareHB(g)
		require.Equal(t, errGroupIDNotFound, sr.ErrorCode, g)
		require.Equal(t, "Group "+g+" is not a share group.", *sr.ErrorMessage)
		fr := shareFetch("m2", 0, 10, 0)
		fr.GroupID = kmsg.StringPtr(g)
		require.Equal(t, errGroupIDNotFound, c.do(fr).(*kmsg.ShareFetchResponse).ErrorCode, g)
		require.False(t, b.ShareCoordinator().Exists(g), "no share group %s was made", g)
	}
	require.True(t, b.ShareCoordinator().Exists("g"))
}

// TestShareFetchReadsOnlyAcquiredBatches: a share fetch answers the
// batches that hold the records it acquired and none past them, however
// large MaxBytes (it had read up to MaxBytes of the log: every batch to
// the partition's end for a fetch of a few records).
func TestShareFetchReadsOnlyAcquiredBatches(t *testing.T) {
	leaktest.Check(t)
	s := startShareBatches(t, 50, 10)
	c := dial(t, s.Addr())
	c.do(shareHeartbeat("m1", 0, "t"))

	total := 0
	for epoch := int32(0); total < 500; epoch++ {
		req := shareFetch("m1", epoch, 15, 0)
		req.MaxBytes = 50 << 20
		req.ShareAcquireMode = shareAcquireRecordLimit
		f := c.do(req).(*kmsg.ShareFetchResponse)
		_, offs := acquired(t, f)
		require.NotEmpty(t, offs)
		rp := f.Topics[0].Partitions[0]
		first, last := rp.AcquiredRecords[0].FirstOffset, rp.AcquiredRecords[len(rp.AcquiredRecords)-1].LastOffset
		var bases []int64
		require.NoError(t, batch.Batches(rp.Records, func(_ []byte, h batch.Header) error {
			require.LessOrEqual(t, h.BaseOffset, last, "a batch past the acquired records")
			require.GreaterOrEqual(t, h.LastOffset(), first, "a batch before the acquired records")
			bases = append(bases, h.BaseOffset)
			return nil
		}))
		require.LessOrEqual(t, len(bases), 3, "batches %v for offsets %d-%d", bases, first, last)
		total += len(offs)
	}
	require.Equal(t, 500, total)
}

// startShareBatches serves topic t of one partition holding batches
// batches of size records each, the group g reading from the start.
func startShareBatches(t *testing.T, batches, size int) *Server {
	t.Helper()
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	part, err := b.Partition("t", 0)
	require.NoError(t, err)
	var bd batch.Builder
	for range batches {
		bd.Reset(1)
		for i := range size {
			bd.Append(1, nil, fmt.Appendf(nil, "v%d", i), nil)
		}
		_, _, err := part.AppendBatch(bd.Bytes())
		require.NoError(t, err)
	}
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// TestShareFetchWholeBatches: in ShareFetch's default acquire mode
// (batch_optimized, KIP-1206) a fetch acquires the rest of the last batch
// it returns, past MaxRecords, so no batch goes out with records the
// member does not hold; in record_limit mode MaxRecords is strict. A
// released record comes back alone, its batch with it.
func TestShareFetchWholeBatches(t *testing.T) {
	leaktest.Check(t)
	s := startShareBatches(t, 5, 10)
	c := dial(t, s.Addr())
	c.do(shareHeartbeat("m1", 0, "t"))

	got, offs := acquired(t, c.do(shareFetch("m1", 0, 3, 0)).(*kmsg.ShareFetchResponse))
	require.Equal(t, "0-9@1 ", got)
	require.Len(t, offs, 10)

	strict := shareFetch("m1", 1, 3, 0)
	strict.ShareAcquireMode = shareAcquireRecordLimit
	got, _ = acquired(t, c.do(strict).(*kmsg.ShareFetchResponse))
	require.Equal(t, "10-12@1 ", got)

	// 12 taken strictly, the rest of its batch is taken by the next fetch
	// in the default mode, which stops at its batch's end (MaxRecords 5
	// reached at 17).
	got, _ = acquired(t, c.do(shareFetch("m1", 2, 5, 0)).(*kmsg.ShareFetchResponse))
	require.Equal(t, "13-19@1 ", got)

	// Release 5 and accept the rest of 0-19: 5 comes again alone (its
	// batch is the member's no more), then 20-29 whole.
	f := c.do(shareFetch("m1", 3, 1, 0, [3]int64{0, 4, 1}, [3]int64{5, 5, 2}, [3]int64{6, 19, 1})).(*kmsg.ShareFetchResponse)
	require.Equal(t, errNone, f.Topics[0].Partitions[0].AcknowledgeErrorCode)
	got, offs = acquired(t, f)
	require.Equal(t, "5-5@2 ", got)
	require.Equal(t, []int64{5}, offs)
	got, _ = acquired(t, c.do(shareFetch("m1", 4, 1, 0)).(*kmsg.ShareFetchResponse))
	require.Equal(t, "20-29@1 ", got)

	// An unknown mode is refused, the session and its acknowledgement
	// left as they were: 20-29 are still m1's to accept.
	for _, mode := range []int8{2, -1} {
		bad := shareFetch("m1", 5, 1, 0, [3]int64{20, 29, 1})
		bad.ShareAcquireMode = mode
		f = c.do(bad).(*kmsg.ShareFetchResponse)
		require.Equal(t, errInvalidRequest, f.ErrorCode)
		require.Empty(t, f.Topics)
	}
	f = c.do(shareFetch("m1", 5, 1, 0, [3]int64{20, 29, 1})).(*kmsg.ShareFetchResponse)
	require.Equal(t, errNone, f.Topics[0].Partitions[0].AcknowledgeErrorCode)
	got, _ = acquired(t, f)
	require.Equal(t, "30-39@1 ", got)
}
