package kafka

import (
	"context"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/internal/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The authorization of the transaction APIs (KIP-98), ready for when they
// are served: the rules apply to a key only once a table serves it.
const (
	authzAddPartitionsToTxn   int16 = 24
	authzAddOffsetsToTxn      int16 = 25
	authzEndTxn               int16 = 26
	authzTxnOffsetCommit      int16 = 28
	authzDescribeProducers    int16 = 61
	authzDescribeTransactions int16 = 65
	authzListTransactions     int16 = 66

	errOperationNotAttempted = kerr.OperationNotAttempted
)

// txnRules are authorizeRules' entries of the transaction APIs.
// WriteTxnMarkers (27) is between brokers: ClusterAction (guard).
var txnRules = map[int16]rule{
	authzAddPartitionsToTxn:   authorizeAddPartitionsToTxn,
	authzAddOffsetsToTxn:      authorizeAddOffsetsToTxn,
	authzEndTxn:               authorizeEndTxn,
	authzTxnOffsetCommit:      authorizeTxnOffsetCommit,
	authzDescribeProducers:    authorizeDescribeProducers,
	authzDescribeTransactions: authorizeDescribeTransactions,
	authzListTransactions:     authorizeListTransactions,
}

// authorizeAddPartitionsToTxn: a client's (v0–v3) needs Write on the
// transactional id and on every topic: if one topic is refused, none is
// added (the others OPERATION_NOT_ATTEMPTED). v4+ are sent by brokers:
// ClusterAction.
func authorizeAddPartitionsToTxn(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		if c.allowed(acl.OpClusterAction, acl.Cluster()) {
			return next(ctx, c, req)
		}
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		resp.ErrorCode = errClusterAuthorizationFailed
		return reply{resp: resp}
	}
	txnDenied := !c.allowed(acl.OpWrite, acl.TransactionalID(req.TransactionalID))
	refused := map[string]bool{}
	for _, t := range req.Topics {
		if !txnDenied && !c.allowed(acl.OpWrite, acl.Topic(t.Topic)) {
			refused[t.Topic] = true
		}
	}
	if !txnDenied && len(refused) == 0 {
		return next(ctx, c, req)
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		code := errOperationNotAttempted
		switch {
		case txnDenied:
			code = errTransactionalIDAuthorizationFailed
		case refused[t.Topic]:
			code = errTopicAuthorizationFailed
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}

// authorizeAddOffsetsToTxn: Write on the transactional id, Read on the
// group.
func authorizeAddOffsetsToTxn(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.AddOffsetsToTxnRequest)
	code := errNone
	switch {
	case !c.allowed(acl.OpWrite, acl.TransactionalID(req.TransactionalID)):
		code = errTransactionalIDAuthorizationFailed
	case !c.allowed(acl.OpRead, acl.Group(req.Group)):
		code = errGroupAuthorizationFailed
	default:
		return next(ctx, c, req)
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return reply{resp: resp}
}

// authorizeEndTxn: Write on the transactional id.
func authorizeEndTxn(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.EndTxnRequest)
	if c.allowed(acl.OpWrite, acl.TransactionalID(req.TransactionalID)) {
		return next(ctx, c, req)
	}
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = errTransactionalIDAuthorizationFailed
	return reply{resp: resp}
}

// authorizeTxnOffsetCommit: Write on the transactional id and Read on the
// group (every partition refused otherwise), then Read on each topic.
func authorizeTxnOffsetCommit(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	whole := errNone
	switch {
	case !c.allowed(acl.OpWrite, acl.TransactionalID(req.TransactionalID)):
		whole = errTransactionalIDAuthorizationFailed
	case !c.allowed(acl.OpRead, acl.Group(req.Group)):
		whole = errGroupAuthorizationFailed
	}
	byID := req.Version >= 6
	code := errTopicAuthorizationFailed
	if whole != errNone {
		code = whole
	}
	denied := func(t *kmsg.TxnOffsetCommitRequestTopic) bool {
		if whole != errNone {
			return true
		}
		name, ok := c.topicOf(t.Topic, t.TopicID, byID)
		return ok && !c.allowed(acl.OpRead, acl.Topic(name))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.TxnOffsetCommitResponse, refused []kmsg.TxnOffsetCommitRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewTxnOffsetCommitResponseTopic()
				t.Topic, t.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, code
					t.Partitions = append(t.Partitions, p)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeDescribeProducers: Read on each topic.
func authorizeDescribeProducers(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DescribeProducersRequest)
	denied := func(t *kmsg.DescribeProducersRequestTopic) bool {
		return !c.allowed(acl.OpRead, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.DescribeProducersResponse, refused []kmsg.DescribeProducersRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewDescribeProducersResponseTopic()
				t.Topic = rt.Topic
				for _, p := range rt.Partitions {
					rp := kmsg.NewDescribeProducersResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, errTopicAuthorizationFailed
					t.Partitions = append(t.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeDescribeTransactions: Describe on each transactional id.
func authorizeDescribeTransactions(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DescribeTransactionsRequest)
	denied := func(id *string) bool {
		return !c.allowed(acl.OpDescribe, acl.TransactionalID(*id))
	}
	return guard(ctx, c, req, &req.TransactionalIDs, denied, answerEmpty, next,
		func(resp *kmsg.DescribeTransactionsResponse, refused []string) {
			for _, id := range refused {
				s := kmsg.NewDescribeTransactionsResponseTransactionState()
				s.TransactionalID, s.ErrorCode = id, errTransactionalIDAuthorizationFailed
				s.ProducerID, s.ProducerEpoch = -1, -1
				resp.TransactionStates = append(resp.TransactionStates, s)
			}
		})
}

// authorizeListTransactions: the transactions whose id the connection may
// describe.
func authorizeListTransactions(ctx context.Context, c *conn, req kmsg.Request, next handler) reply {
	rep := next(ctx, c, req)
	resp := rep.resp.(*kmsg.ListTransactionsResponse)
	kept := resp.TransactionStates[:0]
	for _, s := range resp.TransactionStates {
		if c.allowed(acl.OpDescribe, acl.TransactionalID(s.TransactionalID)) {
			kept = append(kept, s)
		}
	}
	resp.TransactionStates = kept
	return rep
}
