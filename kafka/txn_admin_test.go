package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/tp"
)

// KIP-664's admin APIs over the wire: an open transaction is listed and
// described by its coordinator, its producer described by the partition
// with the transaction's first offset, and the filters select as Kafka's.
func TestTxnAdminAPIs(t *testing.T) {
	c, b := txnClient(t)
	open := initTxn(t, c, "open", 4, -1, -1)
	done := initTxn(t, c, "done", 4, -1, -1)
	t1 := tp.TopicPartition{Topic: "t", Partition: 1}
	// Something before the transaction, so that its first offset is not 0.
	p1, _ := b.Partition("t", 1)
	_, _, err := p1.AppendBatch(records("plain"))
	require.NoError(t, err)
	require.Equal(t, errNone, addTxnPartitions(t, c, "open", 3, open.ProducerID, open.ProducerEpoch, t1)[t1])
	require.Equal(t, errNone, produceTxn(t, c, "open", 9, 1, txnBatchOf(open.ProducerID, open.ProducerEpoch, 0, "a", "b")))

	list := func(version int16, states []string, pids []int64, pattern *string) *kmsg.ListTransactionsResponse {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters, req.ProducerIDFilters, req.TransactionalIDPattern = states, pids, pattern
		return request[*kmsg.ListTransactionsResponse](t, c, req, version)
	}
	ids := func(resp *kmsg.ListTransactionsResponse) map[string]string {
		out := map[string]string{}
		for _, s := range resp.TransactionStates {
			out[s.TransactionalID] = s.TransactionState
		}
		return out
	}
	require.Equal(t, map[string]string{"open": "Ongoing", "done": "Empty"}, ids(list(0, nil, nil, nil)))
	resp := list(1, []string{"Ongoing", "Bogus"}, nil, nil)
	require.Equal(t, map[string]string{"open": "Ongoing"}, ids(resp))
	require.Equal(t, []string{"Bogus"}, resp.UnknownStateFilters)
	require.Empty(t, ids(list(1, []string{"Bogus"}, nil, nil)), "only unknown states: none")
	require.Equal(t, map[string]string{"done": "Empty"}, ids(list(1, nil, []int64{done.ProducerID}, nil)))
	require.Equal(t, map[string]string{"open": "Ongoing"}, ids(list(2, nil, nil, kmsg.StringPtr("op.*"))))
	require.Empty(t, ids(list(2, nil, nil, kmsg.StringPtr("pe"))), "the pattern matches whole ids")
	require.Equal(t, errInvalidRegularExpression, list(2, nil, nil, kmsg.StringPtr("(")).ErrorCode)

	dreq := kmsg.NewPtrDescribeTransactionsRequest()
	dreq.TransactionalIDs = []string{"open", "nobody"}
	dresp := request[*kmsg.DescribeTransactionsResponse](t, c, dreq, 0)
	require.Len(t, dresp.TransactionStates, 2)
	st := dresp.TransactionStates[0]
	require.Equal(t, errNone, st.ErrorCode)
	require.Equal(t, "Ongoing", st.State)
	require.Equal(t, open.ProducerID, st.ProducerID)
	require.Equal(t, int32(60000), st.TimeoutMillis)
	require.Greater(t, st.StartTimestamp, int64(0))
	require.Len(t, st.Topics, 1)
	require.Equal(t, "t", st.Topics[0].Topic)
	require.Equal(t, []int32{1}, st.Topics[0].Partitions)
	require.Equal(t, errTransactionalIDNotFound, dresp.TransactionStates[1].ErrorCode)

	preq := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{1, 5}
	preq.Topics = []kmsg.DescribeProducersRequestTopic{rt}
	presp := request[*kmsg.DescribeProducersResponse](t, c, preq, 0)
	parts := presp.Topics[0].Partitions
	require.Equal(t, errNone, parts[0].ErrorCode)
	require.Len(t, parts[0].ActiveProducers, 1)
	ap := parts[0].ActiveProducers[0]
	require.Equal(t, open.ProducerID, ap.ProducerID)
	require.Equal(t, int32(open.ProducerEpoch), ap.ProducerEpoch)
	require.Equal(t, int32(1), ap.LastSequence)
	require.Equal(t, int64(1), ap.CurrentTxnStartOffset, "after the plain record")
	require.Equal(t, errUnknownTopicOrPartition, parts[1].ErrorCode)

	// Once committed, the producer has no open transaction.
	require.Equal(t, errNone, endTxn(t, c, "open", 3, open.ProducerID, open.ProducerEpoch, true).ErrorCode)
	awaitEnd(t, b, "t", 1, 4)
	presp = request[*kmsg.DescribeProducersResponse](t, c, preq, 0)
	require.Equal(t, int64(-1), presp.Topics[0].Partitions[0].ActiveProducers[0].CurrentTxnStartOffset)
}
