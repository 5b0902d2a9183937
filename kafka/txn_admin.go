package kafka

import (
	"context"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/txn"
)

// The transaction admin APIs (KIP-664): what kafka-transactions.sh and
// `strata transactions` read to find and abort hanging transactions.
const (
	describeProducersKey    = authzDescribeProducers
	describeTransactionsKey = authzDescribeTransactions
	listTransactionsKey     = authzListTransactions

	errTransactionalIDNotFound  = kerr.TransactionalIDNotFound
	errInvalidRegularExpression = kerr.InvalidRegularExpression
)

var txnAdminAPIs = []api{
	{key: describeProducersKey, min: 0, max: 0, handle: handleDescribeProducers},
	{key: describeTransactionsKey, min: 0, max: 0, handle: handleDescribeTransactions},
	// v1 filters by duration (KIP-994), v2 by a pattern of ids (KIP-1152).
	{key: listTransactionsKey, min: 0, max: 2, handle: handleListTransactions},
}

func handleDescribeProducers(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			infos, err := c.s.caps.txns.Producers(ctx, log.TopicPartition{Topic: t.Topic, Partition: int(p)})
			if err != nil {
				rp.ErrorCode, rp.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
			}
			for _, info := range infos {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = info.ProducerID, int32(info.Epoch)
				ap.LastSequence, ap.LastTimestamp = info.LastSequence, info.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = info.CoordinatorEpoch, info.CurrentTxnFirstOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{resp: resp}
}

func handleDescribeTransactions(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		coord, code := c.s.txnCoordinator(id)
		var m txn.Metadata
		ok := false
		if code == errNone {
			m, ok = coord.Describe(id)
		}
		switch {
		case code != errNone:
			st.ErrorCode = code
		case !ok:
			st.ErrorCode = errTransactionalIDNotFound
		default:
			st.State = m.State.String()
			st.TimeoutMillis = m.TimeoutMs
			st.StartTimestamp = m.StartMs
			st.ProducerID, st.ProducerEpoch = m.ProducerID, m.ProducerEpoch
			for _, p := range m.Partitions { // sorted: by topic, then partition
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = p.Topic
					st.Topics = append(st.Topics, t)
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, int32(p.Partition))
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{resp: resp}
}

func handleListTransactions(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var f txn.ListFilter
	for _, name := range req.StateFilters {
		s, ok := txn.ParseState(name)
		if !ok {
			// Kafka lists the names it does not know and matches none.
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		f.States = append(f.States, s)
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return reply{resp: resp} // only unknown states: nothing matches
	}
	f.ProducerIDs = req.ProducerIDFilters
	if req.Version >= 1 && req.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if pattern, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = errInvalidRegularExpression
			return reply{resp: resp}
		}
	}
	var listings []txn.Listing
	if r := c.s.caps.txnRouter; r != nil {
		for _, coord := range r.TxnCoordinators() { // this node's, as a Kafka broker lists
			listings = append(listings, coord.List(f)...)
		}
	} else {
		coord, code := c.s.txnCoordinator("")
		if code != errNone {
			resp.ErrorCode = code
			return reply{resp: resp}
		}
		listings = coord.List(f)
	}
	for _, l := range listings {
		if pattern != nil && !pattern.MatchString(l.ID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.ID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{resp: resp}
}
