package kafka

import (
	"context"
	"testing"

	"github.com/strata-log/strata/acl"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction APIs' rules, with a handler that records what reaches
// it (they are not served yet).
func TestAuthorizeTxnRules(t *testing.T) {
	a := startAuthz(t, Config{})
	a.grant(allowTo("alice", acl.OpWrite, acl.TransactionalID("tx")),
		allowTo("alice", acl.OpWrite, acl.Topic("orders")),
		allowTo("alice", acl.OpRead, acl.Topic("orders")),
		allowTo("alice", acl.OpRead, acl.Group("g")))
	as := func(user string) *conn {
		return &conn{s: a.s, logger: a.s.logger, sasl: &saslState{done: true, user: user}, ip: "127.0.0.1"}
	}
	var reached kmsg.Request
	next := func(_ context.Context, _ *conn, req kmsg.Request) reply {
		reached = req
		resp := req.ResponseKind()
		defaults(resp)
		return reply{resp: resp}
	}
	run := func(user string, key int16, req kmsg.Request) kmsg.Response {
		t.Helper()
		reached = nil
		r, ok := ruleFor(key)
		require.True(t, ok)
		return r(context.Background(), as(user), req, next).resp
	}

	apt := func(v int16, txn string, topics ...string) *kmsg.AddPartitionsToTxnRequest {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(v)
		req.TransactionalID = txn
		for _, name := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = name, []int32{0}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	codes := func(resp *kmsg.AddPartitionsToTxnResponse) map[string]int16 {
		out := map[string]int16{}
		for _, t := range resp.Topics {
			out[t.Topic] = t.Partitions[0].ErrorCode
		}
		return out
	}
	resp := run("alice", authzAddPartitionsToTxn, apt(3, "tx", "orders", "secret")).(*kmsg.AddPartitionsToTxnResponse)
	require.Nil(t, reached, "nothing is added when one topic is refused")
	require.Equal(t, map[string]int16{"orders": errOperationNotAttempted, "secret": errTopicAuthorizationFailed}, codes(resp))
	resp = run("bob", authzAddPartitionsToTxn, apt(3, "tx", "orders")).(*kmsg.AddPartitionsToTxnResponse)
	require.Nil(t, reached)
	require.Equal(t, map[string]int16{"orders": errTransactionalIDAuthorizationFailed}, codes(resp))
	run("alice", authzAddPartitionsToTxn, apt(3, "tx", "orders"))
	require.NotNil(t, reached)
	resp = run("alice", authzAddPartitionsToTxn, apt(4, "tx")).(*kmsg.AddPartitionsToTxnResponse)
	require.Nil(t, reached, "v4+ is between brokers")
	require.Equal(t, errClusterAuthorizationFailed, resp.ErrorCode)

	aot := kmsg.NewPtrAddOffsetsToTxnRequest()
	aot.TransactionalID, aot.Group = "tx", "other"
	require.Equal(t, errGroupAuthorizationFailed, run("alice", authzAddOffsetsToTxn, aot).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
	require.Equal(t, errTransactionalIDAuthorizationFailed, run("bob", authzAddOffsetsToTxn, aot).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
	aot.Group = "g"
	run("alice", authzAddOffsetsToTxn, aot)
	require.NotNil(t, reached)

	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID = "tx"
	require.Equal(t, errTransactionalIDAuthorizationFailed, run("bob", authzEndTxn, end).(*kmsg.EndTxnResponse).ErrorCode)
	require.Nil(t, reached)
	run("alice", authzEndTxn, end)
	require.NotNil(t, reached)

	toc := func(group string, topics ...string) *kmsg.TxnOffsetCommitRequest {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(3)
		req.TransactionalID, req.Group = "tx", group
		for _, name := range topics {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = name
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	tr := run("alice", authzTxnOffsetCommit, toc("other", "orders")).(*kmsg.TxnOffsetCommitResponse)
	require.Nil(t, reached)
	require.Equal(t, errGroupAuthorizationFailed, tr.Topics[0].Partitions[0].ErrorCode)
	tr = run("alice", authzTxnOffsetCommit, toc("g", "orders", "secret")).(*kmsg.TxnOffsetCommitResponse)
	require.Len(t, reached.(*kmsg.TxnOffsetCommitRequest).Topics, 1, "orders is committed")
	require.Equal(t, "secret", tr.Topics[0].Topic)
	require.Equal(t, errTopicAuthorizationFailed, tr.Topics[0].Partitions[0].ErrorCode)

	dp := kmsg.NewPtrDescribeProducersRequest()
	for _, name := range []string{"orders", "secret"} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = name, []int32{0}
		dp.Topics = append(dp.Topics, rt)
	}
	dr := run("alice", authzDescribeProducers, dp).(*kmsg.DescribeProducersResponse)
	require.Len(t, reached.(*kmsg.DescribeProducersRequest).Topics, 1)
	require.Equal(t, errTopicAuthorizationFailed, dr.Topics[0].Partitions[0].ErrorCode)

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx", "other"}
	dtr := run("alice", authzDescribeTransactions, dt).(*kmsg.DescribeTransactionsResponse)
	require.Equal(t, []string{"tx"}, reached.(*kmsg.DescribeTransactionsRequest).TransactionalIDs)
	require.Equal(t, "other", dtr.TransactionStates[0].TransactionalID)
	require.Equal(t, errTransactionalIDAuthorizationFailed, dtr.TransactionStates[0].ErrorCode)

	listNext := func(_ context.Context, _ *conn, req kmsg.Request) reply {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		for _, id := range []string{"tx", "other"} {
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID = id
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
		return reply{resp: resp}
	}
	lt := authorizeListTransactions(context.Background(), as("alice"), kmsg.NewPtrListTransactionsRequest(), listNext).resp.(*kmsg.ListTransactionsResponse)
	require.Len(t, lt.TransactionStates, 1)
	require.Equal(t, "tx", lt.TransactionStates[0].TransactionalID)
}
