package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
)

// This file makes a member a log.Client: every call
// goes to the partition's current leader — this member, or another over
// the Transport — and is retried there after a leadership change.

var errNoLeader = errors.New("replica: partition has no leader")

// retriable reports whether a routed call may be tried again at the
// leader the next metadata names.
func retriable(err error) bool {
	return errors.Is(err, log.ErrNotLeader) || errors.Is(err, errNoLeader) || errors.Is(err, log.ErrUnreachable)
}

// behind reports whether err is a leader's "unknown topic" (or
// partition) for a partition this member knows: the leader has not
// applied its creation yet.
func (b *Broker) behind(tp log.TopicPartition, err error) bool {
	if !errors.Is(err, log.ErrUnknownTopic) && !errors.Is(err, log.ErrUnknownPartition) {
		return false
	}
	n, ok := b.img.Load().PartitionCount(tp.Topic)
	return ok && tp.Partition < n
}

// leaderOf returns the leader of tp in the current image. It copies
// nothing: every routed call asks it, and a copy of the topic (Image.Topic)
// cost 76 µs and 2,000 allocations for 1,000 partitions
// (controller's BenchmarkImageLeader).
func (b *Broker) leaderOf(tp log.TopicPartition) (int, error) {
	img := b.img.Load()
	l, ok := img.Leader(tp.Topic, tp.Partition)
	switch {
	case ok && l != controller.NoLeader:
		return l, nil
	case ok:
		return 0, fmt.Errorf("%w: %s-%d", errNoLeader, tp.Topic, tp.Partition)
	}
	if _, known := img.PartitionCount(tp.Topic); !known {
		return 0, fmt.Errorf("%w: %s", log.ErrUnknownTopic, tp.Topic)
	}
	return 0, fmt.Errorf("%w: %s-%d", log.ErrUnknownPartition, tp.Topic, tp.Partition)
}

// route calls fn at tp's leader until it answers with something other
// than a leadership error, or ctx ends.
func (b *Broker) route(ctx context.Context, tp log.TopicPartition, fn func(leader int) error) error {
	if err := b.waitReady(ctx); err != nil {
		return err
	}
	backoff := 5 * time.Millisecond
	for {
		ch := b.metaWatch()
		leader, err := b.leaderOf(tp)
		if err == nil {
			err = fn(leader)
			if leader != b.cfg.ID && errors.Is(err, log.ErrClosed) && b.ctx.Err() == nil {
				// Another member, stopping, answered: its successor
				// will lead (seen replacing a voter while producing).
				err = fmt.Errorf("%w: leader %d is stopping (%w)", log.ErrNotLeader, leader, err)
			}
		}
		if err == nil || !retriable(err) && !b.behind(tp, err) {
			return err
		}
		if err := b.retryWait(ctx, ch, &backoff, err); err != nil {
			return err
		}
	}
}

// retryWait waits before a routed call is tried again: until the metadata
// changes (ch), the backoff passes (then doubled, to 100 ms at most), ctx
// ends (ctx's error, with last) or the member closes (log.ErrClosed).
func (b *Broker) retryWait(ctx context.Context, ch <-chan struct{}, backoff *time.Duration, last error) error {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		*backoff = min(2**backoff, 100*time.Millisecond)
	case <-ctx.Done():
		return fmt.Errorf("%w (%w)", ctx.Err(), last)
	case <-b.ctx.Done():
		return log.ErrClosed
	}
	return nil
}

// Partitions returns the number of partitions of topic, as this member's
// metadata image has it: ctx is not waited on.
func (b *Broker) Partitions(_ context.Context, topic string) (int, error) {
	n, ok := b.img.Load().PartitionCount(topic)
	if !ok {
		return 0, fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
	}
	return n, nil
}

// Produce is ProduceBatch answering the base offset.
func (b *Broker) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	res, err := b.ProduceBatch(ctx, tp, batch, acks)
	if err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// BorrowsBatches reports that Produce and ProduceBatch keep no part of the
// batch once they return (kafka.BatchBorrower): the leader appends it in
// place, and a batch sent on to another member is copied into the request
// before it goes.
func (kafkaBackend) BorrowsBatches() bool { return true }

// ProduceBatch appends a batch at the partition's leader. AcksAll returns
// once the HW covers the batch; ErrNotEnoughReplicas when the ISR is below
// the topic's MinInSyncReplicas. A produce whose leader moved is sent
// again to the new one (without idempotence it may then be stored twice).
// The batches of an idempotent producer to a partition reach the leader
// in their sequence order, however the calls race (order.go).
func (b *Broker) ProduceBatch(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.ProduceTimeout)
		defer cancel()
	}
	var res log.ProduceResult
	key, seq, n, ordered := orderOf(tp, batch)
	err := b.route(ctx, tp, func(leader int) (err error) {
		actx := ctx
		if ordered {
			var done func()
			actx, done = b.order.enter(ctx, key, seq, n)
			defer done()
		}
		if leader == b.cfg.ID {
			// The batch is appended in place, as the Client contract
			// allows (its base offset and leader epoch are written): an
			// attempt sent on after this one carries those, which the
			// next leader overwrites. A copy cost a fresh buffer, faulted
			// in page by page, per batch.
			res, err = b.produceLocal(actx, tp, batch, acks)
		} else {
			res, err = b.tr.Produce(actx, leader, tp, batch, acks)
		}
		return err
	})
	return res, err
}

// ListOffset answers at the partition's leader, within ctx and at most
// Config.ProduceTimeout, and until the member closes.
func (b *Broker) ListOffset(ctx context.Context, tp log.TopicPartition, at int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProduceTimeout)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)()
	var off int64
	err := b.route(ctx, tp, func(leader int) (err error) {
		if leader == b.cfg.ID {
			off, err = b.listOffsetLocal(tp, at)
		} else {
			off, err = b.tr.ListOffset(ctx, leader, tp, at)
		}
		return err
	})
	return off, err
}

// Fetch reads each partition at its leader: the partitions are grouped
// by leader and each group is one request, the groups in parallel. A
// partition whose leader is unknown, moving or unreachable comes back
// empty, after a short wait, so that a consumer polls again.
func (b *Broker) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	if len(req.Partitions) == 0 {
		return log.FetchResponse{}, fmt.Errorf("%w: fetch of no partition", log.ErrInvalidRequest)
	}
	if err := b.waitReady(ctx); err != nil {
		return log.FetchResponse{}, err
	}
	resp := log.FetchResponse{Partitions: make([]log.FetchedPartition, len(req.Partitions))}
	groups := map[int][]int{} // leader → indexes into req.Partitions
	unrouted := false
	for i, fp := range req.Partitions {
		resp.Partitions[i].TopicPartition = fp.TopicPartition
		leader, err := b.leaderOf(fp.TopicPartition)
		switch {
		case errors.Is(err, errNoLeader):
			unrouted = true
		case err != nil:
			resp.Partitions[i].Err = err
		default:
			groups[leader] = append(groups[leader], i)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for leader, idx := range groups {
		sub := req
		sub.Partitions = make([]log.FetchPartition, len(idx))
		for j, i := range idx {
			sub.Partitions[j] = req.Partitions[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r log.FetchResponse
			var err error
			if leader == b.cfg.ID {
				r, err = b.fetchLocal(ctx, sub)
			} else {
				r, err = b.tr.Fetch(ctx, leader, sub)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if retriable(err) {
					unrouted = true
				} else if firstErr == nil {
					firstErr = err
				}
				return
			}
			for j, i := range idx {
				if j >= len(r.Partitions) {
					break
				}
				fp := r.Partitions[j]
				if retriable(fp.Err) {
					fp.Records.Release()
					unrouted = true
					continue
				}
				resp.Partitions[i] = fp
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		resp.Release()
		return log.FetchResponse{}, firstErr
	}
	if unrouted {
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-b.metaWatch():
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return resp, nil
}
