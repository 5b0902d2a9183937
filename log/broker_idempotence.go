package log

import (
	"context"
	"fmt"
)

// InitProducerID gives a new producer id, with epoch 0 (see DataClient).
// Ids come from blocks of DefaultProducerIDBlockSize reserved durably in the
// data dir's producer-id-block file before any of their ids is handed out,
// so no id is given twice, across restarts and crashes included: a restart
// skips the rest of the block in use.
//
// A reservation holds the broker's read lock, so Close (which takes the
// write lock first) never releases the data dir under one.
func (b *Broker) InitProducerID(ctx context.Context) (ProducerID, error) {
	if err := ctx.Err(); err != nil {
		return ProducerID{}, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ProducerID{}, fmt.Errorf("log: init producer id: %w", ErrClosed)
	}
	b.pidMu.Lock()
	defer b.pidMu.Unlock()
	if b.pids == nil {
		src, err := OpenProducerIDBlocks(b.fs, b.dir, 0)
		if err != nil {
			return ProducerID{}, fmt.Errorf("log: init producer id: %w", err)
		}
		b.pids = NewProducerIDAllocator(src)
	}
	id, epoch, err := b.pids.InitProducerID(ctx)
	if err != nil {
		return ProducerID{}, fmt.Errorf("log: init producer id: %w", err)
	}
	return ProducerID{ID: id, Epoch: epoch}, nil
}
