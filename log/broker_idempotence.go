package log

import (
	"context"
	"fmt"
)

// InitProducerID gives a new producer id, with epoch 0 (see DataClient).
// Each id is reserved durably in the data dir's producer-id-block file
// before it is returned (a block of one id: FileProducerIDBlocks), so no id
// is given twice, across restarts and crashes included. It costs a file
// write and its fsyncs; a producer calls it once.
//
// The reservation holds the checkpoint mutex: that serializes the calls,
// and Close writes its checkpoints (under the same mutex) before it
// releases the data dir, so a reservation never outlives the Broker.
func (b *Broker) InitProducerID(ctx context.Context) (ProducerID, error) {
	if err := ctx.Err(); err != nil {
		return ProducerID{}, err
	}
	b.ckptMu.Lock()
	defer b.ckptMu.Unlock()
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return ProducerID{}, fmt.Errorf("log: init producer id: %w", ErrClosed)
	}
	src, err := OpenProducerIDBlocks(b.fs, b.dir, 1)
	if err != nil {
		return ProducerID{}, fmt.Errorf("log: init producer id: %w", err)
	}
	id, epoch, err := NewProducerIDAllocator(src).InitProducerID(ctx)
	if err != nil {
		return ProducerID{}, fmt.Errorf("log: init producer id: %w", err)
	}
	return ProducerID{ID: id, Epoch: epoch}, nil
}
