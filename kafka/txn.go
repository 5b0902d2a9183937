package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// The transaction APIs (KIP-98, KIP-360, KIP-890), served when the backend
// runs a transaction coordinator (TxnBackend) and hands out producer ids.
// The coordinator decides (package txn); these handlers translate.
const (
	addPartitionsToTxnKey int16 = 24
	addOffsetsToTxnKey    int16 = 25
	endTxnKey             int16 = 26
	writeTxnMarkersKey    int16 = 27

	// coordinatorTransaction is FindCoordinator's key type of a
	// transactional id.
	coordinatorTransaction int8 = 1

	errInvalidTxnState      = kerr.InvalidTxnState
	errTransactionAbortable = kerr.TransactionAbortable
)

var txnAPIs = []api{
	// v4+ are sent by brokers: batched, VerifyOnly (KIP-890); v5 adds for
	// transaction version 2.
	{key: addPartitionsToTxnKey, min: 0, max: 5, handle: handleAddPartitionsToTxn},
	{key: addOffsetsToTxnKey, min: 0, max: 4, handle: handleAddOffsetsToTxn},
	// v5 is transaction version 2: every EndTxn bumps the epoch.
	{key: endTxnKey, min: 0, max: 5, handle: handleEndTxn},
	{key: writeTxnMarkersKey, min: 0, max: 2, handle: handleWriteTxnMarkers},
}

// txnCoordinator returns this server's coordinator of id, without
// waiting, or the code that sends the client to look for it again
// (COORDINATOR_LOAD_IN_PROGRESS while it loads).
func (s *Server) txnCoordinator(id string) (*txn.Coordinator, int16) {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	c, err := s.caps.txns.TxnCoordinator(ctx, id)
	switch {
	case err == nil:
		return c, errNone
	case errors.Is(err, log.ErrTxnCoordinatorLoading):
		return nil, errCoordinatorLoadInProgress
	case errors.Is(err, log.ErrClosed), errors.Is(err, ErrNotCoordinator):
		return nil, errNotCoordinator
	}
	return nil, errCoordinatorNotAvailable
}

// findTxnCoordinator answers FindCoordinator for a transactional id: this
// node, which coordinates every id of a standalone broker.
func (s *Server) findTxnCoordinator(ctx context.Context, key string) (node int32, host string, port int32, code int16, msg *string) {
	switch {
	case s.caps.txns == nil:
		return -1, "", -1, errInvalidRequest, kmsg.StringPtr("transactions are not served")
	case key == "":
		return -1, "", -1, errInvalidRequest, kmsg.StringPtr("empty transactional id")
	}
	if r := s.caps.txnRouter; r != nil {
		node, host, port, code = s.findRoutedTxnCoordinator(ctx, r, key)
		return node, host, port, code, nil
	}
	host, port = s.advertised()
	return s.cfg.NodeID, host, port, errNone, nil
}

// txnErrorCode is the code of a coordinator's error for a request version
// that knows PRODUCER_FENCED (producerFenced) or not.
func txnErrorCode(err error, producerFenced bool) int16 {
	if errors.Is(err, txn.ErrClosed) {
		return errNotCoordinator
	}
	return errorCode(txn.WireError(err, producerFenced))
}

// initTxnProducerID is InitProducerId with a transactional id.
func initTxnProducerID(ctx context.Context, c *conn, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	if c.s.caps.txns == nil {
		resp.ErrorCode = errTransactionalIDAuthorizationFailed
		return
	}
	var expected *txn.ProducerIDEpoch
	if req.Version >= 3 && (req.ProducerID != -1 || req.ProducerEpoch != -1) {
		if req.ProducerID < 0 || req.ProducerEpoch < 0 {
			resp.ErrorCode = errInvalidRequest // one of the two set
			return
		}
		expected = &txn.ProducerIDEpoch{ID: req.ProducerID, Epoch: req.ProducerEpoch}
	}
	coord, code := c.s.txnCoordinator(*req.TransactionalID)
	if code != errNone {
		resp.ErrorCode = code
		return
	}
	timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
	pe, err := coord.InitProducerID(ctx, *req.TransactionalID, timeout, expected)
	if err != nil {
		resp.ErrorCode = txnErrorCode(err, req.Version >= 4)
		return
	}
	resp.ProducerID, resp.ProducerEpoch = pe.ID, pe.Epoch
}

// knownPartitions splits ps into those that exist and the code of each
// that does not.
func (s *Server) knownPartitions(ctx context.Context, ps []tp.TopicPartition) map[tp.TopicPartition]int16 {
	var missing map[tp.TopicPartition]int16
	counts := map[string]int{}
	for _, p := range ps {
		n, ok := counts[p.Topic]
		if !ok {
			var err error
			if n, err = s.b.Partitions(ctx, p.Topic); err != nil {
				n = -1
			}
			counts[p.Topic] = n
		}
		if p.Partition < 0 || p.Partition >= n {
			if missing == nil {
				missing = map[tp.TopicPartition]int16{}
			}
			missing[p] = errUnknownTopicOrPartition
		}
	}
	return missing
}

// addPartitions adds (or, verifyOnly, checks) one transaction's
// partitions, returning each partition's code.
func (s *Server) addPartitions(ctx context.Context, id string, pid int64, epoch int16, ps []tp.TopicPartition, verifyOnly bool, clientTV int16, producerFenced bool) map[tp.TopicPartition]int16 {
	out := make(map[tp.TopicPartition]int16, len(ps))
	all := func(code int16) map[tp.TopicPartition]int16 {
		for _, p := range ps {
			out[p] = code
		}
		return out
	}
	coord, code := s.txnCoordinator(id)
	if code != errNone {
		return all(code)
	}
	if verifyOnly {
		for p, err := range coord.VerifyPartitions(id, pid, epoch, ps) {
			out[p] = errNone
			if err != nil {
				out[p] = txnErrorCode(err, producerFenced)
			}
		}
		return out
	}
	if missing := s.knownPartitions(ctx, ps); missing != nil {
		// Kafka adds none then: the others are not attempted.
		for _, p := range ps {
			out[p] = errOperationNotAttempted
			if c, ok := missing[p]; ok {
				out[p] = c
			}
		}
		return out
	}
	if err := coord.AddPartitions(ctx, id, pid, epoch, ps, clientTV); err != nil {
		return all(txnErrorCode(err, producerFenced))
	}
	return all(errNone)
}

func handleAddPartitionsToTxn(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var ps []tp.TopicPartition
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, tp.TopicPartition{Topic: t.Topic, Partition: int(p)})
			}
		}
		codes := c.s.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, ps, false, 0, req.Version >= 2)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = codes[tp.TopicPartition{Topic: t.Topic, Partition: int(p)}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return reply{resp: resp}
	}
	// v5+ adds for transaction version 2 (KIP-890 part 2).
	clientTV := int16(0)
	if req.Version >= 5 {
		clientTV = txn.TV2
	}
	for _, tr := range req.Transactions {
		var ps []tp.TopicPartition
		for _, t := range tr.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, tp.TopicPartition{Topic: t.Topic, Partition: int(p)})
			}
		}
		codes := c.s.addPartitions(ctx, tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, ps, tr.VerifyOnly, clientTV, true)
		rtr := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtr.TransactionalID = tr.TransactionalID
		for _, t := range tr.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition = p
				rp.ErrorCode = codes[tp.TopicPartition{Topic: t.Topic, Partition: int(p)}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtr.Topics = append(rtr.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtr)
	}
	return reply{resp: resp}
}

// groupOffsetsPartition is the partition of __consumer_offsets that holds
// a group's offsets: Kafka's hash of the group id over the topic's
// partitions (one on a standalone broker, before its first commit too).
func (s *Server) groupOffsetsPartition(ctx context.Context, group string) int {
	n, err := s.b.Partitions(ctx, log.OffsetsTopic)
	if err != nil || n < 1 {
		n = 1
	}
	return txn.PartitionFor(group, n)
}

func handleAddOffsetsToTxn(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = errInvalidGroupID
		return reply{resp: resp}
	}
	coord, code := c.s.txnCoordinator(req.TransactionalID)
	if code != errNone {
		resp.ErrorCode = code
		return reply{resp: resp}
	}
	gp := c.s.groupOffsetsPartition(ctx, req.Group)
	if err := coord.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, gp, 0); err != nil {
		resp.ErrorCode = txnErrorCode(err, req.Version >= 2)
	}
	return reply{resp: resp}
}

func handleEndTxn(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	coord, code := c.s.txnCoordinator(req.TransactionalID)
	if code != errNone {
		resp.ErrorCode = code
		return reply{resp: resp}
	}
	clientTV := int16(0)
	if req.Version >= 5 {
		clientTV = txn.TV2 // KIP-890 part 2: the epoch is bumped
	}
	unlock := c.s.caps.txnEnds.end(req.TransactionalID) // after the produces checked against it
	pe, err := coord.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, clientTV)
	unlock()
	if err != nil {
		resp.ErrorCode = txnErrorCode(err, req.Version >= 2)
		return reply{resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = pe.ID, pe.Epoch
	return reply{resp: resp}
}

// handleWriteTxnMarkers applies each marker to the partitions named, all
// this node's (a standalone broker leads every partition): what a
// coordinator sends partition leaders, and what `strata transactions
// abort` sends to end a hanging transaction.
func handleWriteTxnMarkers(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	now := time.Now().UnixMilli()
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		marker := batch.Marker{Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch,
			ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Timestamp: now}
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				err := c.s.caps.txns.WriteTxnMarker(ctx, log.TopicPartition{Topic: t.Topic, Partition: int(p)}, marker)
				rp.ErrorCode = errorCode(err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return reply{resp: resp}
}
