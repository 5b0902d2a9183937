package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
)

// The transactional part of the Client (log.TxnClient), for a
// transactional log.Producer over any Kafka: InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn go to the transactional
// id's coordinator, found with FindCoordinator (key type 1) before each
// call, TxnOffsetCommit to the group's coordinator. A coordinator that
// moved, is loading or cannot be reached is looked up again and the
// request retried within ctx (client_retry.go); CONCURRENT_TRANSACTIONS
// (the previous transaction still completing) is returned, matching
// txn.ErrConcurrentTransactions, for the Producer to retry. The versions
// are those of transaction version 1: EndTxn v4 (no epoch bump per
// transaction), AddPartitionsToTxn v3 (a client's), and the group is added
// with AddOffsetsToTxn before TxnOffsetCommit.

// Versions of the transaction APIs the client sends at most.
const (
	clientAddPartitionsToTxnMax = 3
	clientAddOffsetsToTxnMax    = 3
	clientEndTxnMax             = 4
	clientTxnOffsetCommitMax    = 3
	clientTxnKeyType            = 1 // FindCoordinator's key type of a transactional id
)

var _ log.TxnClient = (*Client)(nil)

// transactionalID returns the transactional id of a transactional batch's
// producer, learned from InitTxnProducerID, for its Produce request (nil:
// none, or not transactional).
func (c *Client) transactionalID(b []byte) *string {
	h, err := batch.ParseHeader(b)
	if err != nil || !h.Transactional() || h.ProducerID < 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.txnIDs[h.ProducerID]; ok {
		return &id
	}
	return nil
}

// txnCoordinator returns the address of the transactional id's
// coordinator.
func (c *Client) txnCoordinator(ctx context.Context, id string) (string, error) {
	return c.findCoordinator(ctx, clientTxnKeyType, "transactional id", id)
}

// txnDo sends req to the transactional id's coordinator and returns the
// response, retrying while the coordinator moves, loads or cannot be
// reached, within ctx. code extracts the response's error code.
func (c *Client) txnDo(ctx context.Context, id string, req kmsg.Request, max int16, code func(kmsg.Response) int16) (kmsg.Response, error) {
	r := retrier{ctx: ctx}
	for {
		addr, err := c.txnCoordinator(ctx, id)
		if err == nil {
			var resp kmsg.Response
			resp, err = c.doOn(ctx, addr, false, req, max)
			if err == nil {
				if cc := code(resp); coordinatorMoved(cc) {
					err = codeError(cc)
				} else {
					return resp, codeError(cc)
				}
			}
		}
		if isNetError(err) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", errDial, err)
		}
		if err := r.retry(err); err != nil {
			return nil, err
		}
		c.refreshQuiet(ctx)
	}
}

// InitTxnProducerID sends InitProducerId with the transactional id to its
// coordinator: the id's producer id and a new epoch (see log.TxnClient).
func (c *Client) InitTxnProducerID(ctx context.Context, transactionalID string, timeout time.Duration, current log.ProducerID) (log.ProducerID, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &transactionalID
	req.TransactionTimeoutMillis = int32(timeout.Milliseconds())
	req.ProducerID, req.ProducerEpoch = current.ID, current.Epoch
	resp, err := c.txnDo(ctx, transactionalID, req, clientInitProducerIDMax, func(r kmsg.Response) int16 {
		return r.(*kmsg.InitProducerIDResponse).ErrorCode
	})
	if err != nil {
		return log.ProducerID{}, fmt.Errorf("kafka: init producer id of transactional id %q: %w", transactionalID, err)
	}
	r := resp.(*kmsg.InitProducerIDResponse)
	c.rememberTxnProducer(transactionalID, r.ProducerID)
	return log.ProducerID{ID: r.ProducerID, Epoch: r.ProducerEpoch}, nil
}

// rememberTxnProducer records that pid is now transactionalID's producer
// id, for the transactional id of its Produce requests, and forgets the
// ids the transactional id had before (a new id after its epochs ran out,
// or after it expired): the map holds one entry per transactional id, not
// one per producer id ever given.
func (c *Client) rememberTxnProducer(transactionalID string, pid int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.txnIDs == nil {
		c.txnIDs = map[int64]string{}
	}
	for old, id := range c.txnIDs {
		if id == transactionalID && old != pid {
			delete(c.txnIDs, old)
		}
	}
	c.txnIDs[pid] = transactionalID
}

// AddPartitionsToTxn sends AddPartitionsToTxn (a client's, v3 at most).
func (c *Client) AddPartitionsToTxn(ctx context.Context, transactionalID string, pid log.ProducerID, tps []log.TopicPartition) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = transactionalID, pid.ID, pid.Epoch
	for _, tp := range tps {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, int32(tp.Partition))
	}
	_, err := c.txnDo(ctx, transactionalID, req, clientAddPartitionsToTxnMax, func(r kmsg.Response) int16 {
		resp := r.(*kmsg.AddPartitionsToTxnResponse)
		if resp.ErrorCode != errNone {
			return resp.ErrorCode
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != errNone && p.ErrorCode != errOperationNotAttempted {
					return p.ErrorCode
				}
			}
		}
		return errNone
	})
	if err != nil {
		return fmt.Errorf("kafka: add partitions to transaction of %q: %w", transactionalID, err)
	}
	return nil
}

// AddOffsetsToTxn sends AddOffsetsToTxn.
func (c *Client) AddOffsetsToTxn(ctx context.Context, transactionalID string, pid log.ProducerID, groupID string) error {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = transactionalID, pid.ID, pid.Epoch, groupID
	_, err := c.txnDo(ctx, transactionalID, req, clientAddOffsetsToTxnMax, func(r kmsg.Response) int16 {
		return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	})
	if err != nil {
		return fmt.Errorf("kafka: add offsets of group %q to transaction of %q: %w", groupID, transactionalID, err)
	}
	return nil
}

// EndTxn sends EndTxn (v4 at most: the producer keeps its epoch).
func (c *Client) EndTxn(ctx context.Context, transactionalID string, pid log.ProducerID, commit bool) (log.ProducerID, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = transactionalID, pid.ID, pid.Epoch, commit
	resp, err := c.txnDo(ctx, transactionalID, req, clientEndTxnMax, func(r kmsg.Response) int16 {
		return r.(*kmsg.EndTxnResponse).ErrorCode
	})
	if err != nil {
		return log.ProducerID{}, fmt.Errorf("kafka: end transaction of %q: %w", transactionalID, err)
	}
	if r := resp.(*kmsg.EndTxnResponse); r.Version >= 5 && r.ProducerID >= 0 {
		return log.ProducerID{ID: r.ProducerID, Epoch: r.ProducerEpoch}, nil
	}
	return pid, nil
}

// TxnCommitOffsets sends TxnOffsetCommit to the group's coordinator.
func (c *Client) TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error {
	if len(req.Offsets) == 0 {
		return nil
	}
	kr := kmsg.NewPtrTxnOffsetCommitRequest()
	kr.TransactionalID, kr.Group, kr.ProducerID, kr.ProducerEpoch = req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch
	kr.Generation, kr.MemberID = req.Generation, req.MemberID
	if req.GroupInstanceID != "" {
		kr.InstanceID = &req.GroupInstanceID
	}
	for _, tp := range slices.SortedFunc(maps.Keys(req.Offsets), tp.Compare) {
		if n := len(kr.Topics); n == 0 || kr.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = tp.Topic
			kr.Topics = append(kr.Topics, rt)
		}
		co := req.Offsets[tp]
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = int32(tp.Partition), co.Offset, co.LeaderEpoch
		if co.Metadata != "" {
			p.Metadata = &co.Metadata
		}
		rt := &kr.Topics[len(kr.Topics)-1]
		rt.Partitions = append(rt.Partitions, p)
	}
	code := func(r kmsg.Response) int16 {
		for _, t := range r.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != errNone {
					return p.ErrorCode
				}
			}
		}
		return errNone
	}
	resp, err := c.groupDo(ctx, req.Group, false, kr, clientTxnOffsetCommitMax, code)
	if err == nil {
		err = codeError(code(resp))
	}
	if err != nil {
		return fmt.Errorf("kafka: commit offsets of group %q in transaction of %q: %w", req.Group, req.TransactionalID, err)
	}
	return nil
}
