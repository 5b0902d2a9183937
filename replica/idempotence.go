package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
)

// ErrProducerIDsUnsupported was returned by InitProducerID before members
// allocated producer ids through the controller.
//
// Deprecated: no member returns it; it stays for callers that test for it.
var ErrProducerIDsUnsupported = fmt.Errorf("replica: a cluster member does not allocate producer ids yet: %w", log.ErrInvalidConfig)

// InitProducerID gives an idempotent producer a new id, with epoch 0. The
// ids come from blocks of controller.ProducerIDBlockSize that the active
// controller allocates to this member (Kafka's AllocateProducerIds,
// KIP-730) and records in the metadata before handing them out, so an id
// is unique cluster-wide and never given twice, across member restarts and
// controller failovers. A member asks for the next block when its block
// is used up; a restart skips the rest of the block in use, as in Kafka.
//
// The partitions' producer state (last sequences per producer) is in the
// log itself: a follower rebuilds it from the batches it appends, so a
// producer retrying a batch at a new leader after a failover gets the
// first append's offsets, not a duplicate.
//
// While no controller can be reached InitProducerID waits; it ends with
// the context's error (Kafka's REQUEST_TIMED_OUT on the wire, retriable).
func (b *Broker) InitProducerID(ctx context.Context) (log.ProducerID, error) {
	if err := ctx.Err(); err != nil {
		return log.ProducerID{}, err
	}
	if b.ctx.Err() != nil {
		return log.ProducerID{}, log.ErrClosed
	}
	id, epoch, err := b.pids.InitProducerID(ctx)
	if err != nil {
		return log.ProducerID{}, fmt.Errorf("replica: init producer id: %w", err)
	}
	return log.ProducerID{ID: id, Epoch: epoch}, nil
}

// controllerProducerIDs is the log.ProducerIDBlockSource of a member:
// blocks allocated by the active controller to this member's current
// broker epoch. The allocator serializes the calls.
type controllerProducerIDs struct{ b *Broker }

// NextProducerIDBlock asks the controller for a block, once this member is
// registered. A stale broker epoch (the member is registering again), a
// lost controller leadership and an active controller that is closing are
// retried: a block whose record may have committed is never given to
// anyone else, so asking again is safe.
func (s controllerProducerIDs) NextProducerIDBlock(ctx context.Context) (log.ProducerIDBlock, error) {
	b := s.b
	backoff := 5 * time.Millisecond
	for {
		ch := b.metaWatch()
		var err error
		if epoch := b.brokerEpoch.Load(); epoch != 0 {
			var blk controller.ProducerIDBlock
			blk, err = b.ctl.AllocateProducerIDs(ctx, controller.AllocateProducerIDsRequest{BrokerID: b.cfg.ID, BrokerEpoch: epoch})
			switch {
			case err == nil:
				return log.ProducerIDBlock{Start: blk.Start, Len: blk.Len}, nil
			case errors.Is(err, controller.ErrProducerIDsExhausted):
				return log.ProducerIDBlock{}, fmt.Errorf("%w: %w", log.ErrProducerIDsExhausted, err)
			case errors.Is(err, controller.ErrClosed) && b.ctx.Err() != nil:
				return log.ProducerIDBlock{}, log.ErrClosed
			case errors.Is(err, controller.ErrClosed):
				// The active controller is closing, not this member: the
				// next one is asked (a block is never given twice).
			case !errors.Is(err, controller.ErrStaleBrokerEpoch) && !errors.Is(err, controller.ErrUnknownBroker) &&
				!errors.Is(err, controller.ErrLeadershipLost) && !errors.Is(err, controller.ErrNotController):
				return log.ProducerIDBlock{}, err
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ch:
		case <-t.C:
			backoff = min(2*backoff, 100*time.Millisecond)
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return log.ProducerIDBlock{}, fmt.Errorf("%w (%w)", ctx.Err(), err)
			}
			return log.ProducerIDBlock{}, fmt.Errorf("%w: member %d is not registered with the controller yet", ctx.Err(), b.cfg.ID)
		case <-b.ctx.Done():
			t.Stop()
			return log.ProducerIDBlock{}, log.ErrClosed
		}
		t.Stop()
	}
}
