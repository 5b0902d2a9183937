package kafka

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// txnBatchOf is one transactional batch of producer pid at epoch, from
// sequence seq.
func txnBatchOf(pid int64, epoch int16, seq int32, values ...string) []byte {
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

// txnClient is a Client to a server over a fresh broker with topic t (2
// partitions), its coordinator loaded.
func txnClient(t *testing.T) (*Client, *log.Broker) {
	t.Helper()
	_, c, b := txnServer(t)
	return c, b
}

// txnServer is txnClient with its server.
func txnServer(t *testing.T) (*Server, *Client, *log.Broker) {
	t.Helper()
	return txnServerWith(t, Config{})
}

// txnServerWith is txnServer with the server's Config.
func txnServerWith(t *testing.T, cfg Config) (*Server, *Client, *log.Broker) {
	t.Helper()
	leaktest.Check(t)
	s, b, _ := start(t, cfg, logtest.Topic("t", 2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := b.TxnCoordinator(ctx, "")
	require.NoError(t, err)
	c, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return s, c, b
}

func request[R kmsg.Response](t *testing.T, c *Client, req kmsg.Request, version int16) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.Request(ctx, req, version)
	require.NoError(t, err)
	require.Equal(t, version, req.GetVersion(), "the version asked for")
	return resp.(R)
}

func initTxn(t *testing.T, c *Client, id string, version int16, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(id)
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return request[*kmsg.InitProducerIDResponse](t, c, req, version)
}

func addTxnPartitions(t *testing.T, c *Client, id string, version int16, pid int64, epoch int16, ps ...tp.TopicPartition) map[tp.TopicPartition]int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, p := range ps {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = p.Topic, []int32{int32(p.Partition)}
		req.Topics = append(req.Topics, rt)
	}
	resp := request[*kmsg.AddPartitionsToTxnResponse](t, c, req, version)
	out := map[tp.TopicPartition]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[tp.TopicPartition{Topic: rt.Topic, Partition: int(rp.Partition)}] = rp.ErrorCode
		}
	}
	return out
}

func endTxn(t *testing.T, c *Client, id string, version int16, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return request[*kmsg.EndTxnResponse](t, c, req, version)
}

func produceTxn(t *testing.T, c *Client, id string, version int16, partition int32, recs []byte) int16 {
	req := kmsg.NewPtrProduceRequest()
	if id != "" {
		req.TransactionID = kmsg.StringPtr(id)
	}
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "t", topicID("t")
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, recs
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	resp := request[*kmsg.ProduceResponse](t, c, req, version)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// awaitEnd waits with READ_COMMITTED long polls (no sleeps) until the
// partition's last stable offset reaches end: a marker ending every
// transaction before it (the LSO is published just after the end offset).
func awaitEnd(t *testing.T, b *log.Broker, topic string, partition int, end int64) *log.Partition {
	t.Helper()
	p, err := b.Partition(topic, partition)
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for p.LastStableOffset() < end {
		require.True(t, time.Now().Before(deadline), "%s: LSO %d, end %d, awaited %d", p, p.LastStableOffset(), p.EndOffset(), end)
		_, err := b.Fetch(context.Background(), log.FetchRequest{MaxWait: 5 * time.Second, Isolation: log.FetchTxnCommitted,
			Partitions: []log.FetchPartition{{TopicPartition: log.TopicPartition{Topic: topic, Partition: partition}, Offset: p.LastStableOffset()}}})
		require.NoError(t, err)
	}
	return p
}

// lastMarker is the marker at the end of p.
func lastMarker(t *testing.T, p *log.Partition) batch.Marker {
	t.Helper()
	raw, err := p.ReadBatches(p.EndOffset()-1, 1<<20, p.EndOffset())
	require.NoError(t, err)
	m, _, err := batch.ParseMarker(raw[:batch.MarkerSize])
	require.NoError(t, err)
	return m
}

// awaitTxnEnded waits until id's transaction is complete (its markers all
// written, CompleteCommit or CompleteAbort applied): until the coordinator
// says the id is idle (txn.Coordinator.Idle), then asks
// DescribeTransactions.
func awaitTxnEnded(t *testing.T, c *Client, b *log.Broker, id string) {
	t.Helper()
	coord, err := b.TxnCoordinator(context.Background(), id)
	require.NoError(t, err)
	select {
	case <-coord.Idle(id):
	case <-time.After(time.Minute):
		t.Fatalf("%s still busy after a minute", id)
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	st := request[*kmsg.DescribeTransactionsResponse](t, c, req, 0).TransactionStates[0]
	require.Contains(t, []string{"CompleteCommit", "CompleteAbort"}, st.State, "%s ended", id)
}

func TestFindCoordinatorTransaction(t *testing.T) {
	c, _ := txnClient(t)
	for _, v := range []int16{1, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorType = "etl", coordinatorTransaction
		resp := request[*kmsg.FindCoordinatorResponse](t, c, req, v)
		require.Equal(t, errNone, resp.ErrorCode)
		require.GreaterOrEqual(t, resp.NodeID, int32(0))
		require.NotZero(t, resp.Port, "this server")
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys, req.CoordinatorType = []string{"etl", ""}, coordinatorTransaction
	resp := request[*kmsg.FindCoordinatorResponse](t, c, req, 4)
	require.Len(t, resp.Coordinators, 2)
	require.Equal(t, errNone, resp.Coordinators[0].ErrorCode)
	require.Equal(t, errInvalidRequest, resp.Coordinators[1].ErrorCode, "an empty transactional id")
}

func TestInitProducerIDTransactional(t *testing.T) {
	c, _ := txnClient(t)
	first := initTxn(t, c, "etl", 1, -1, -1)
	require.Equal(t, errNone, first.ErrorCode)
	require.Equal(t, int16(0), first.ProducerEpoch)
	// A second producer of the id fences the first: same id, next epoch.
	second := initTxn(t, c, "etl", 4, -1, -1)
	require.Equal(t, errNone, second.ErrorCode)
	require.Equal(t, first.ProducerID, second.ProducerID)
	require.Equal(t, int16(1), second.ProducerEpoch)
	// KIP-360: the producer at epoch 1 recovers (bump to 2); the retry of
	// that bump is answered the same epoch; the fenced epoch 0 is refused.
	rec := initTxn(t, c, "etl", 3, second.ProducerID, 1)
	require.Equal(t, errNone, rec.ErrorCode)
	require.Equal(t, int16(2), rec.ProducerEpoch)
	retry := initTxn(t, c, "etl", 3, second.ProducerID, 1)
	require.Equal(t, errNone, retry.ErrorCode)
	require.Equal(t, int16(2), retry.ProducerEpoch)
	require.Equal(t, kerrProducerFenced, initTxn(t, c, "etl", 4, second.ProducerID, 0).ErrorCode)
	require.Equal(t, errInvalidProducerEpoch, initTxn(t, c, "etl", 3, second.ProducerID, 0).ErrorCode, "v3 predates PRODUCER_FENCED")
	require.Equal(t, errInvalidRequest, initTxn(t, c, "etl", 3, second.ProducerID, -1).ErrorCode, "an id without an epoch")

	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("etl"), int32(time.Hour/time.Millisecond)
	resp := request[*kmsg.InitProducerIDResponse](t, c, req, 4)
	require.Equal(t, kerrInvalidTransactionTimeout, resp.ErrorCode, "above transaction.max.timeout.ms")
	require.Equal(t, int64(-1), resp.ProducerID)

	other := initTxn(t, c, "other", 4, -1, -1)
	require.NotEqual(t, first.ProducerID, other.ProducerID)
}

// A transaction over the wire, as a KIP-890 part 1 client runs it: the
// partitions added, a transactional produce checked against them, commit
// and abort with their markers, zombies fenced.
func TestTxnCommitAbortOverTheWire(t *testing.T) {
	c, b := txnClient(t)
	init := initTxn(t, c, "etl", 4, -1, -1)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	t0, t1 := tp.TopicPartition{Topic: "t", Partition: 0}, tp.TopicPartition{Topic: "t", Partition: 1}

	// An unknown partition: nothing is added.
	codes := addTxnPartitions(t, c, "etl", 3, pid, epoch, t0, tp.TopicPartition{Topic: "t", Partition: 9})
	require.Equal(t, errOperationNotAttempted, codes[t0])
	require.Equal(t, errUnknownTopicOrPartition, codes[tp.TopicPartition{Topic: "t", Partition: 9}])
	require.Equal(t, errInvalidTxnState, produceTxn(t, c, "etl", 9, 0, txnBatchOf(pid, epoch, 0, "a")), "t-0 is not in the transaction")

	codes = addTxnPartitions(t, c, "etl", 3, pid, epoch, t0)
	require.Equal(t, errNone, codes[t0])
	require.Equal(t, errNone, produceTxn(t, c, "etl", 9, 0, txnBatchOf(pid, epoch, 0, "a", "b")))
	require.Equal(t, errTransactionAbortable, produceTxn(t, c, "etl", 11, 1, txnBatchOf(pid, epoch, 0, "x")), "t-1 is not in it")
	require.Equal(t, errInvalidTxnState, produceTxn(t, c, "etl", 9, 1, txnBatchOf(pid, epoch, 0, "x")), "v9 predates TRANSACTION_ABORTABLE")
	require.Equal(t, errTransactionalIDAuthorizationFailed, produceTxn(t, c, "", 9, 1, txnBatchOf(pid, epoch, 0, "x")), "no transactional id")
	p0, _ := b.Partition("t", 0)
	require.Equal(t, int64(0), p0.LastStableOffset())

	require.Equal(t, errNone, endTxn(t, c, "etl", 3, pid, epoch, true).ErrorCode)
	p0 = awaitEnd(t, b, "t", 0, 3)
	m := lastMarker(t, p0)
	require.True(t, m.Commit)
	require.Equal(t, pid, m.ProducerID)
	require.Equal(t, int64(3), p0.LastStableOffset())
	p1, _ := b.Partition("t", 1)
	require.Equal(t, int64(0), p1.EndOffset(), "no marker where nothing was added")
	awaitTxnEnded(t, c, b, "etl")

	// The next transaction is aborted.
	require.Equal(t, errNone, addTxnPartitions(t, c, "etl", 3, pid, epoch, t1)[t1])
	require.Equal(t, errNone, produceTxn(t, c, "etl", 9, 1, txnBatchOf(pid, epoch, 0, "y")))
	require.Equal(t, errNone, endTxn(t, c, "etl", 3, pid, epoch, false).ErrorCode)
	require.False(t, lastMarker(t, awaitEnd(t, b, "t", 1, 2)).Commit)
	awaitTxnEnded(t, c, b, "etl")

	// A new producer of the id fences this one.
	require.Equal(t, int16(1), initTxn(t, c, "etl", 4, -1, -1).ProducerEpoch)
	require.Equal(t, kerrProducerFenced, addTxnPartitions(t, c, "etl", 3, pid, epoch, t0)[t0])
	require.Equal(t, errInvalidProducerEpoch, addTxnPartitions(t, c, "etl", 1, pid, epoch, t0)[t0], "v1 predates PRODUCER_FENCED")
	require.Equal(t, kerrProducerFenced, endTxn(t, c, "etl", 3, pid, epoch, true).ErrorCode)
	require.Equal(t, errInvalidProducerEpoch, produceTxn(t, c, "etl", 9, 0, txnBatchOf(pid, epoch, 2, "z")))
	require.Equal(t, kerrInvalidProducerIDMapping, endTxn(t, c, "nobody", 3, pid, 1, true).ErrorCode)
	require.Equal(t, kerrInvalidTxnState, endTxn(t, c, "etl", 3, pid, 1, true).ErrorCode, "no transaction open")
}

// Transaction version 2 (KIP-890 part 2): produce v12 adds its partition
// itself, EndTxn v5 bumps the epoch; v4+ AddPartitionsToTxn verifies.
func TestTxnV2OverTheWire(t *testing.T) {
	c, b := txnClient(t)
	init := initTxn(t, c, "etl", 5, -1, -1)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	require.Equal(t, errNone, produceTxn(t, c, "etl", 12, 1, txnBatchOf(pid, epoch, 0, "a")), "added by the produce")

	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = "etl", pid, epoch, true
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 1}
	tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{rt}
	verify.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tr}
	vresp := request[*kmsg.AddPartitionsToTxnResponse](t, c, verify, 4)
	require.Len(t, vresp.Transactions, 1)
	got := map[int32]int16{}
	for _, p := range vresp.Transactions[0].Topics[0].Partitions {
		got[p.Partition] = p.ErrorCode
	}
	require.Equal(t, map[int32]int16{0: errTransactionAbortable, 1: errNone}, got)

	end := endTxn(t, c, "etl", 5, pid, epoch, true)
	require.Equal(t, errNone, end.ErrorCode)
	require.Equal(t, pid, end.ProducerID)
	require.Equal(t, epoch+1, end.ProducerEpoch, "every EndTxn bumps the epoch")
	m := lastMarker(t, awaitEnd(t, b, "t", 1, 2))
	require.True(t, m.Commit)
	require.Equal(t, epoch+1, m.ProducerEpoch, "the marker carries the new epoch")
	awaitTxnEnded(t, c, b, "etl")
	// A retry of the EndTxn (old epoch) is answered the same.
	retry := endTxn(t, c, "etl", 5, pid, epoch, true)
	require.Equal(t, errNone, retry.ErrorCode)
	require.Equal(t, epoch+1, retry.ProducerEpoch)
	// The old epoch's late write is fenced.
	require.Equal(t, errInvalidProducerEpoch, produceTxn(t, c, "etl", 12, 1, txnBatchOf(pid, epoch, 1, "late")))
}

func TestAddOffsetsToTxn(t *testing.T) {
	c, b := txnClient(t)
	init := initTxn(t, c, "etl", 4, -1, -1)
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "etl", init.ProducerID, init.ProducerEpoch, "g"
	require.Equal(t, errNone, request[*kmsg.AddOffsetsToTxnResponse](t, c, req, 3).ErrorCode)
	coord, err := b.TxnCoordinator(context.Background(), "etl")
	require.NoError(t, err)
	m, ok := coord.Describe("etl")
	require.True(t, ok)
	require.Equal(t, txn.Ongoing, m.State)
	require.Equal(t, []tp.TopicPartition{{Topic: log.OffsetsTopic, Partition: 0}}, m.Partitions)
	req.Group = ""
	require.Equal(t, errInvalidGroupID, request[*kmsg.AddOffsetsToTxnResponse](t, c, req, 3).ErrorCode)
	req.Group, req.ProducerEpoch = "g", init.ProducerEpoch+1
	require.Equal(t, kerrProducerFenced, request[*kmsg.AddOffsetsToTxnResponse](t, c, req, 3).ErrorCode)
}

// WriteTxnMarkers ends a hanging transaction: data a producer wrote with
// no coordinator knowing (here appended straight to the partition).
func TestWriteTxnMarkers(t *testing.T) {
	c, b := txnClient(t)
	p1, _ := b.Partition("t", 1)
	_, _, err := p1.AppendBatch(txnBatchOf(4242, 3, 0, "hanging"))
	require.NoError(t, err)
	require.Equal(t, int64(0), p1.LastStableOffset())

	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = 4242, 3, false
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = "t", []int32{1, 7}
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{rt}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	resp := request[*kmsg.WriteTxnMarkersResponse](t, c, req, 1)
	require.Equal(t, int64(4242), resp.Markers[0].ProducerID)
	codes := resp.Markers[0].Topics[0].Partitions
	require.Equal(t, errNone, codes[0].ErrorCode)
	require.Equal(t, errUnknownTopicOrPartition, codes[1].ErrorCode)
	require.Equal(t, int64(2), p1.LastStableOffset())
	require.False(t, lastMarker(t, p1).Commit)

	// An older epoch is refused and appends nothing.
	req.Markers[0].ProducerEpoch = 2
	req.Markers[0].Topics[0].Partitions = []int32{1}
	resp = request[*kmsg.WriteTxnMarkersResponse](t, c, req, 1)
	require.Equal(t, errInvalidProducerEpoch, resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(2), p1.EndOffset())
}

const (
	kerrProducerFenced            = int16(90)
	kerrInvalidTransactionTimeout = int16(50)
	kerrInvalidProducerIDMapping  = int16(49)
	kerrInvalidTxnState           = int16(48)
)

// A consume-transform-produce step's offsets: committed in the
// transaction (AddOffsetsToTxn, TxnOffsetCommit), visible to OffsetFetch
// only once EndTxn's marker reached the group's coordinator; aborted, they
// never are.
func TestTxnOffsetsCompletedByEndTxn(t *testing.T) {
	c, b := txnClient(t)
	init := initTxn(t, c, "etl", 4, -1, -1)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	fetched := func() int64 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0}
		req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
		resp := request[*kmsg.OffsetFetchResponse](t, c, req, 5)
		return resp.Topics[0].Partitions[0].Offset
	}
	commit := func(offset int64, end bool) {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "etl", pid, epoch, "g"
		require.Equal(t, errNone, request[*kmsg.AddOffsetsToTxnResponse](t, c, add, 3).ErrorCode)
		oc := kmsg.NewPtrTxnOffsetCommitRequest()
		oc.TransactionalID, oc.Group, oc.ProducerID, oc.ProducerEpoch = "etl", "g", pid, epoch
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
		oc.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
		ocr := request[*kmsg.TxnOffsetCommitResponse](t, c, oc, 3)
		require.Equal(t, errNone, ocr.Topics[0].Partitions[0].ErrorCode)
		require.Equal(t, int64(-1), fetched(), "pending until the transaction ends")
		offsets, err := b.Partition(log.OffsetsTopic, 0)
		require.NoError(t, err)
		before := offsets.EndOffset()
		require.Equal(t, errNone, endTxn(t, c, "etl", 3, pid, epoch, end).ErrorCode)
		m := lastMarker(t, awaitEnd(t, b, log.OffsetsTopic, 0, before+1))
		require.Equal(t, end, m.Commit)
		awaitTxnEnded(t, c, b, "etl") // the group applied or dropped the offsets before
	}
	commit(7, false)
	require.Equal(t, int64(-1), fetched(), "aborted: never committed")
	commit(9, true)
	require.Equal(t, int64(9), fetched())
}

// EndTxn waits for the produces checked against the transaction: a batch
// checked while the transaction was open is appended before the commit's
// marker, never after it (where it would open a transaction no coordinator
// knows). The test holds the produce side of the id's lock, as a produce
// between its check and its append does, and appends meanwhile.
func TestEndTxnWaitsForCheckedProduce(t *testing.T) {
	s, c, b := txnServer(t)
	init := initTxn(t, c, "etl", 4, -1, -1)
	pid, epoch := init.ProducerID, init.ProducerEpoch
	t0 := tp.TopicPartition{Topic: "t", Partition: 0}
	require.Equal(t, errNone, addTxnPartitions(t, c, "etl", 3, pid, epoch, t0)[t0])
	require.Equal(t, errNone, produceTxn(t, c, "etl", 9, 0, txnBatchOf(pid, epoch, 0, "a")))

	unlock := s.caps.txnEnds.produce("etl") // checked, not yet appended
	done := make(chan int16, 1)
	go func() {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "etl", pid, epoch, true
		resp, err := c.Request(context.Background(), req, 3)
		if err != nil {
			done <- -100
			return
		}
		done <- resp.(*kmsg.EndTxnResponse).ErrorCode
	}()
	// EndTxn must not be decided meanwhile. This cannot be awaited (it
	// must not happen): the check gives an EndTxn that does not wait
	// half a second to be answered, which it is in well under that.
	select {
	case code := <-done:
		t.Fatalf("EndTxn answered (%d) while a checked produce was not appended", code)
	case <-time.After(500 * time.Millisecond):
	}
	p0, _ := b.Partition("t", 0)
	_, _, err := p0.AppendBatch(txnBatchOf(pid, epoch, 1, "b"))
	require.NoError(t, err)
	unlock()
	require.Equal(t, errNone, <-done)
	m := lastMarker(t, awaitEnd(t, b, "t", 0, 3))
	require.True(t, m.Commit)
	require.Equal(t, int64(3), p0.LastStableOffset(), "both records committed, nothing left open")
}
