package controller

import (
	"context"
	"fmt"
	"math"
)

// Producer ids for idempotent producers, allocated cluster-wide as Kafka's
// controller does (KIP-730, AllocateProducerIds): a broker asks for a block
// of ProducerIDBlockSize ids, the active controller records the block as a
// producerIDsRecord, and the broker hands the ids out one by one. The image
// keeps only the first id not yet given; it never goes down, so no id is
// given twice, whichever member is the active controller and however often
// members restart. A block a broker did not use up (it restarted) is lost,
// as in Kafka.

// ProducerIDBlockSize is the number of ids in a block (Kafka's
// PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

// ProducerIDBlock is the producer ids [Start, Start+Len).
type ProducerIDBlock struct {
	Start int64
	Len   int
}

// AllocateProducerIDsRequest asks for the next block of producer ids, for a
// registered broker at its current epoch.
type AllocateProducerIDsRequest struct {
	BrokerID    int
	BrokerEpoch int64
}

// decideAllocateProducerIDs gives the next block to a broker registered at
// the epoch the request names (Kafka checks the broker epoch the same way;
// a fenced broker may still allocate: it is registered and will unfence).
func decideAllocateProducerIDs(img *Image, req AllocateProducerIDsRequest) ([]record, ProducerIDBlock, error) {
	b, ok := img.brokers[req.BrokerID]
	if !ok {
		return nil, ProducerIDBlock{}, fmt.Errorf("%w: %d", ErrUnknownBroker, req.BrokerID)
	}
	if b.Epoch != req.BrokerEpoch {
		return nil, ProducerIDBlock{}, fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleBrokerEpoch, req.BrokerID, req.BrokerEpoch, b.Epoch)
	}
	start := img.nextProducerID
	if start > math.MaxInt64-ProducerIDBlockSize {
		return nil, ProducerIDBlock{}, fmt.Errorf("%w: next id %d", ErrProducerIDsExhausted, start)
	}
	blk := ProducerIDBlock{Start: start, Len: ProducerIDBlockSize}
	return []record{producerIDsRecord{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, NextProducerID: start + ProducerIDBlockSize}}, blk, nil
}

// AllocateProducerIDs gives the calling broker the next block of producer
// ids, once its record is committed. On ErrLeadershipLost the block may or
// may not have been recorded; either way it is never given to anyone else,
// and asking again gives a new one.
func (c *Controller) AllocateProducerIDs(ctx context.Context, req AllocateProducerIDsRequest) (ProducerIDBlock, error) {
	out, err := c.call(ctx, op{Kind: opAllocateProducerIDs, ProducerIDs: req})
	return out.ProducerIDs, err
}
