package replica_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/txn"
)

// txnBatch is a transactional batch of producer pid at epoch, its first
// sequence seq, one record per value.
func txnBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	var bd batch.Builder
	ts := time.Now().UnixMilli()
	bd.Reset(ts)
	bd.SetProducer(pid, epoch, seq)
	for _, v := range values {
		bd.Append(ts, nil, []byte(v), nil)
	}
	b := slices.Clone(bd.Bytes())
	b[22] |= 0x10 // attributes bit 4: transactional
	batch.SetCRC(b)
	return b
}

// Transaction version 2 (KIP-890 part 2) on cluster members, as a Kafka 4
// client speaks it: every member finalizes transaction.version 2; a
// transaction's partition is added by a produce v12 to its leader, a
// member that does not coordinate the transaction, and its group by a
// TxnOffsetCommit v5 to the group's coordinator, a third member — no
// AddPartitionsToTxn, no AddOffsetsToTxn —; EndTxn v5 bumps the epoch
// each time. The next transaction's produce, sent as soon as the commit
// is answered (its markers may still be being written), waits for the id
// to be idle and is added. A READ_COMMITTED reader sees the committed
// records and not the aborted ones, and the offsets committed with the
// transaction are visible through every member.
func TestTxnVersion2OnMembers(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { testTxnVersion2OnMembers(t, tr) })
	}
}

func testTxnVersion2OnMembers(t *testing.T, tr string) {
	leaktest.Check(t)
	c := startClusterOver(t, 3, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic("t", log.TopicConfig{Partitions: 3, ReplicationFactor: 3, MinInSyncReplicas: 2})
	c.createTopic("in", log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	createTxnStateTopic(t, c)
	const coordNode = 1
	id := txnIDOn(t, c, coordNode)
	p := -1
	for q := range 3 {
		if c.leader("t", q) != coordNode {
			p = q
			break
		}
	}
	require.GreaterOrEqual(t, p, 0, "a partition of t led by a member other than %d", coordNode)
	leader := c.member(c.leader("t", p))
	g := groupNotOn(ctx, t, c, coordNode)
	gp := replica.GroupPartition(g, replica.DefaultOffsetsTopicPartitions)
	groupCoord := c.member(c.leader(log.OffsetsTopic, gp))
	in0 := log.TopicPartition{Topic: "in", Partition: 0}
	dial := dialTCP
	if tr == "kafka" { // the members listen on the testnet
		dial = c.net.Node("client").Dial
	}
	kafkaRequest := func(addr string, req kmsg.Request) (kmsg.Response, error) {
		return kafkaRequestVia(dial, addr, req)
	}

	for _, b := range c.members {
		avr := kmsg.NewPtrApiVersionsRequest()
		avr.Version, avr.ClientSoftwareName, avr.ClientSoftwareVersion = 3, "test", "1"
		resp, err := kafkaRequest(b.Addr(), avr)
		require.NoError(t, err)
		av := resp.(*kmsg.ApiVersionsResponse)
		var finalized int16 = -1
		for _, f := range av.FinalizedFeatures {
			if f.Name == "transaction.version" {
				finalized = f.MaxVersionLevel
			}
		}
		require.EqualValues(t, 2, finalized, "member %d: %+v", b.ID(), av.FinalizedFeatures)
	}

	// send sends req to addr until it is answered with a code other than
	// a retriable one (the coordinator loading or moving, the id busy).
	send := func(addr string, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, int16) {
		t.Helper()
		for {
			resp, err := kafkaRequest(addr, req)
			if err == nil {
				switch cd := code(resp); cd {
				case 14, 15, 16, 19, 51: // COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, NOT_ENOUGH_REPLICAS, CONCURRENT_TRANSACTIONS
					err = fmt.Errorf("error code %d", cd)
				default:
					return resp, cd
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%T: %v", req, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	coordAddr := c.member(coordNode).Addr()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 5, &id, 30000
	resp, code := send(coordAddr, init, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode })
	require.Zero(t, code)
	pid, epoch := resp.(*kmsg.InitProducerIDResponse).ProducerID, resp.(*kmsg.InitProducerIDResponse).ProducerEpoch

	produce := func(epoch int16, seq int32, value string) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = 12, &id, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), txnBatch(pid, epoch, seq, value)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := kafkaRequest(leader.Addr(), req)
		require.NoError(t, err)
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	endTxn := func(epoch int16, commit bool) *kmsg.EndTxnResponse {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 5, id, pid, epoch, commit
		resp, code := send(coordAddr, req, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode })
		require.Zero(t, code)
		return resp.(*kmsg.EndTxnResponse)
	}

	require.Zero(t, produce(epoch, 0, "c1"), "the produce v12 adds its partition")
	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.Version, oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch, oc.Generation = 5, id, g, pid, epoch, -1
	ot := kmsg.NewTxnOffsetCommitRequestTopic()
	ot.Topic = "in"
	op := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset = 0, 7
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	_, code = send(groupCoord.Addr(), oc, func(r kmsg.Response) int16 {
		return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	})
	require.Zero(t, code, "the TxnOffsetCommit v5 adds its group")

	coord, err := replica.TxnBackend(c.member(coordNode)).TxnCoordinator(ctx, id)
	require.NoError(t, err)
	meta, ok := coord.Describe(id)
	require.True(t, ok)
	require.Equal(t, txn.Ongoing, meta.State)
	require.ElementsMatch(t, []log.TopicPartition{{Topic: log.OffsetsTopic, Partition: gp}, {Topic: "t", Partition: p}}, meta.Partitions)
	require.NotEqual(t, coordNode, leader.ID())
	require.NotEqual(t, coordNode, groupCoord.ID())

	end := endTxn(epoch, true)
	require.Equal(t, pid, end.ProducerID)
	require.Equal(t, epoch+1, end.ProducerEpoch, "EndTxn v5 bumps the epoch")
	next := end.ProducerEpoch
	// At once, as a client does: the last transaction may be completing.
	require.Zero(t, produce(next, 0, "a1"), "the next transaction's produce, at the bumped epoch")
	require.Equal(t, int16(47), produce(epoch, 1, "late"), "the old epoch: INVALID_PRODUCER_EPOCH")
	end = endTxn(next, false)
	require.Equal(t, next+1, end.ProducerEpoch)
	require.Zero(t, produce(end.ProducerEpoch, 0, "end"))
	end = endTxn(end.ProducerEpoch, true)

	for _, b := range c.members {
		got := readCommittedUntil(ctx, t, b, "t", []int{p}, "end")
		require.Equal(t, []string{"c1", "end"}, got[p], "t-%d read through member %d", p, b.ID())
		offs, err := b.FetchOffsets(ctx, g, []log.TopicPartition{in0})
		require.NoError(t, err)
		require.EqualValues(t, 7, offs[in0], "the offsets committed with the transaction, through member %d", b.ID())
	}
	coord, _ = txnCoordinatorOf(ctx, t, c, id)
	meta, ok = coord.Describe(id)
	require.True(t, ok)
	require.Equal(t, txn.CompleteCommit, meta.State)
	require.Equal(t, end.ProducerEpoch, meta.ProducerEpoch)
}

// Config.TransactionVersion: negative finalizes none (Kafka's
// transaction.version=0: clients add partitions and groups themselves);
// above 2 is refused.
func TestTxnVersionConfigOnMembers(t *testing.T) {
	leaktest.Check(t)
	_, err := replica.Start(replica.Config{ID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", TransactionVersion: 3})
	require.ErrorIs(t, err, replica.ErrInvalidConfig)

	c := startClusterWith(t, 1, "local", func(cfg *replica.Config) { cfg.TransactionVersion = -1 })
	avr := kmsg.NewPtrApiVersionsRequest()
	avr.Version, avr.ClientSoftwareName, avr.ClientSoftwareVersion = 3, "test", "1"
	resp, err := kafkaRequestVia(dialTCP, c.member(1).Addr(), avr)
	require.NoError(t, err)
	av := resp.(*kmsg.ApiVersionsResponse)
	require.Zero(t, av.ErrorCode)
	for _, f := range av.FinalizedFeatures {
		require.NotEqual(t, "transaction.version", f.Name, "finalized with Config.TransactionVersion -1: %+v", f)
	}
}
