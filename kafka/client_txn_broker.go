package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

// What a cluster member sends other members for transactions, through its
// Client: a coordinator's markers to a partition's leader
// (WriteTxnMarkers) and a partition leader's check of a transactional
// produce at the coordinator (AddPartitionsToTxn v4+, as a broker sends
// it: KIP-890). Each is sent once; the caller retries.

// WriteTxnMarker sends the marker m of partition tp to tp's leader
// (WriteTxnMarkers v1). The leader's refusal comes back as its sentinel
// (log.ErrProducerFenced, log.ErrTransactionCoordinatorFenced,
// log.ErrNotLeader, ...); a leadership error refreshes the metadata first.
func (c *Client) WriteTxnMarker(ctx context.Context, tp log.TopicPartition, m batch.Marker) error {
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	bc, err := c.leader(ctx, tp, laneControl)
	if err != nil {
		c.refreshQuiet(ctx) // the leader may have moved, or gone
		return err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{int32(tp.Partition)}
	rm.Topics = append(rm.Topics, rt)
	req.Markers = append(req.Markers, rm)
	resp, err := bc.do(ctx, req, 1)
	if err != nil {
		c.refreshQuiet(ctx)
		return err
	}
	r := resp.(*kmsg.WriteTxnMarkersResponse)
	if len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 || len(r.Markers[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("kafka: write transaction marker to %s: malformed response", tp)
	}
	if err := codeError(r.Markers[0].Topics[0].Partitions[0].ErrorCode); err != nil {
		c.refreshQuiet(ctx) // the leader may have moved
		return fmt.Errorf("kafka: write transaction marker to %s: %w", tp, err)
	}
	return nil
}

// VerifyTxnPartition asks the transactional id's coordinator whether tp is
// in the producer's transaction (AddPartitionsToTxn v4, VerifyOnly), or,
// with add, adds it (v5: KIP-890 part 2, a produce v12 adds its partition
// itself). The coordinator's answer comes back as its sentinel
// (txn.ErrTransactionAbortable, ...).
func (c *Client) VerifyTxnPartition(ctx context.Context, transactionalID string, pid log.ProducerID, tp log.TopicPartition, add bool) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addr, err := c.txnCoordinator(ctx, transactionalID)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = transactionalID, pid.ID, pid.Epoch, !add
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{int32(tp.Partition)}
	tr.Topics = append(tr.Topics, rt)
	req.Transactions = append(req.Transactions, tr)
	max := int16(4)
	if add {
		max = 5
	}
	resp, err := c.doOn(ctx, addr, false, req, max)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.AddPartitionsToTxnResponse)
	if err := codeError(r.ErrorCode); err != nil {
		return err
	}
	for _, t := range r.Transactions {
		for _, rt := range t.Topics {
			for _, p := range rt.Partitions {
				if err := codeError(p.ErrorCode); err != nil {
					return fmt.Errorf("kafka: verify %s in transaction of %q: %w", tp, transactionalID, err)
				}
			}
		}
	}
	return nil
}
