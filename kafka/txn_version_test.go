package kafka

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// TestTransactionVersion2: a standalone broker advertises the finalized
// feature transaction.version 2 (KIP-890 part 2) and serves what it
// promises: TxnOffsetCommit v5 adds the group to the transaction itself
// (no AddOffsetsToTxn), a produce v12 its partition, and EndTxn v5 bumps
// the epoch; the offsets are visible once the transaction commits. A
// TxnOffsetCommit v5 of a fenced epoch adds nothing and commits nothing.
func TestTransactionVersion2(t *testing.T) {
	_, c, b := txnServerWith(t, Config{TransactionVersion: 2})
	av := request[*kmsg.ApiVersionsResponse](t, c, kmsg.NewPtrApiVersionsRequest(), 3)
	var finalized, supported bool
	for _, f := range av.FinalizedFeatures {
		finalized = finalized || f.Name == "transaction.version" && f.MaxVersionLevel == 2 && f.MinVersionLevel == 2
	}
	for _, f := range av.SupportedFeatures {
		supported = supported || f.Name == "transaction.version" && f.MinVersion == 0 && f.MaxVersion == 2
	}
	require.True(t, finalized && supported, "features: %+v %+v", av.SupportedFeatures, av.FinalizedFeatures)
	require.GreaterOrEqual(t, av.FinalizedFeaturesEpoch, int64(0))
	maxOf := map[int16]int16{}
	for _, k := range av.ApiKeys {
		maxOf[k.ApiKey] = k.MaxVersion
	}
	require.GreaterOrEqual(t, maxOf[int16(kmsg.TxnOffsetCommit)], int16(5))
	require.GreaterOrEqual(t, maxOf[int16(kmsg.EndTxn)], int16(5))
	require.GreaterOrEqual(t, maxOf[int16(kmsg.Produce)], int16(12))

	init := initTxn(t, c, "etl", 5, -1, -1)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	fetched := func() int64 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
		return request[*kmsg.OffsetFetchResponse](t, c, req, 5).Topics[0].Partitions[0].Offset
	}
	commitOffset := func(epoch int16, offset int64) int16 {
		oc := kmsg.NewPtrTxnOffsetCommitRequest()
		oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch = "etl", "g", pid, epoch
		oc.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
		oc.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
		return request[*kmsg.TxnOffsetCommitResponse](t, c, oc, 5).Topics[0].Partitions[0].ErrorCode
	}
	require.Equal(t, errNone, produceTxn(t, c, "etl", 12, 1, txnBatchOf(pid, epoch, 0, "a")))
	require.Equal(t, errNone, commitOffset(epoch, 4), "the group joins the transaction with its commit")
	coord, err := b.TxnCoordinator(context.Background(), "etl")
	require.NoError(t, err)
	m, _ := coord.Describe("etl")
	require.Equal(t, txn.Ongoing, m.State)
	require.Equal(t, []tp.TopicPartition{{Topic: log.OffsetsTopic, Partition: 0}, {Topic: "t", Partition: 1}}, m.Partitions)
	require.Equal(t, int64(-1), fetched(), "pending until the transaction commits")

	end := endTxn(t, c, "etl", 5, pid, epoch, true)
	require.Equal(t, errNone, end.ErrorCode)
	require.Equal(t, epoch+1, end.ProducerEpoch)
	awaitTxnEnded(t, c, b, "etl")
	require.Equal(t, int64(4), fetched())

	// The old epoch is fenced: nothing added, nothing committed.
	require.Equal(t, kerrProducerFenced, commitOffset(epoch, 9))
	m, _ = coord.Describe("etl")
	require.Empty(t, m.Partitions)
	require.Equal(t, int64(4), fetched())

	// The next transaction's produce to the partition whose last batch
	// (sequence 0) and marker had the old epoch, in the order a client
	// may send them: the bumped epoch starts a new sequence at 0; a late
	// batch of the old epoch is INVALID_PRODUCER_EPOCH (what Kafka
	// answers a produce, PRODUCER_FENCED being for the coordinator's
	// requests) and is neither appended nor added to the transaction.
	next := epoch + 1
	for _, c2 := range []struct {
		name  string
		epoch int16
		seq   int32
		want  int16
	}{
		{"bumped epoch, sequence 1", next, 1, errOutOfOrderSequenceNumber},
		{"bumped epoch, sequence 0", next, 0, errNone},
		{"bumped epoch, sequence 1 after 0", next, 1, errNone},
		{"old epoch, next sequence", epoch, 1, errInvalidProducerEpoch},
		{"old epoch, sequence 0", epoch, 0, errInvalidProducerEpoch},
	} {
		require.Equal(t, c2.want, produceTxn(t, c, "etl", 12, 1, txnBatchOf(pid, c2.epoch, c2.seq, "b")), c2.name)
	}
	m, _ = coord.Describe("etl")
	require.Equal(t, txn.Ongoing, m.State)
	require.Equal(t, next, m.ProducerEpoch)
	require.Equal(t, []tp.TopicPartition{{Topic: "t", Partition: 1}}, m.Partitions)
	end = endTxn(t, c, "etl", 5, pid, next, false)
	require.Equal(t, errNone, end.ErrorCode)
	require.Equal(t, next+1, end.ProducerEpoch)
}

// By default a server finalizes transaction.version 2, as Kafka 4 does for
// a new cluster; a negative TransactionVersion (0) or 1 finalizes none, so
// clients add partitions and groups with AddPartitionsToTxn and
// AddOffsetsToTxn, and a TxnOffsetCommit v5 adds nothing to the
// transaction. Above 2 is refused.
func TestTransactionVersionDefault(t *testing.T) {
	for _, c := range []struct {
		tv   int16
		want int16 // finalized; -1 none
	}{{0, 2}, {2, 2}, {1, -1}, {-1, -1}} {
		_, cl, b := txnServerWith(t, Config{TransactionVersion: c.tv})
		av := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest(), 3)
		got := int16(-1)
		for _, f := range av.FinalizedFeatures {
			if f.Name == "transaction.version" {
				got = f.MaxVersionLevel
			}
		}
		require.Equal(t, c.want, got, "Config.TransactionVersion %d: %+v", c.tv, av.FinalizedFeatures)
		if c.want >= 0 {
			continue
		}
		// Without TV2 a TxnOffsetCommit v5 needs its AddOffsetsToTxn.
		init := initTxn(t, cl, "tv0", 5, -1, -1)
		oc := kmsg.NewPtrTxnOffsetCommitRequest()
		oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch = "tv0", "g", init.ProducerID, init.ProducerEpoch
		oc.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 3
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
		oc.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
		request[*kmsg.TxnOffsetCommitResponse](t, cl, oc, 5)
		coord, err := b.TxnCoordinator(context.Background(), "tv0")
		require.NoError(t, err)
		m, _ := coord.Describe("tv0")
		require.Empty(t, m.Partitions, "Config.TransactionVersion %d: the group was added", c.tv)
	}
	_, err := Listen("127.0.0.1:0", logtest.New(t, logtest.InMemory()), Config{TransactionVersion: 3})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
