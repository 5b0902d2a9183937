package log

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/timingwheel"
)

var _ Client = (*Broker)(nil)

// Partitions returns the number of partitions of topic. A standalone broker
// answers from memory: ctx is not waited on.
func (b *Broker) Partitions(_ context.Context, topic string) (int, error) {
	t, err := b.Topic(topic)
	if err != nil {
		return 0, err
	}
	return t.Partitions(), nil
}

// Produce appends one record batch to a partition and returns its base
// offset: ProduceBatch's BaseOffset.
func (b *Broker) Produce(ctx context.Context, tp TopicPartition, batch []byte, acks Acks) (int64, error) {
	res, err := b.ProduceBatch(ctx, tp, batch, acks)
	if err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// ProduceBatch appends one record batch to a partition (see DataClient). On
// a standalone broker the only replica is the leader and is always in sync:
// AcksAll fails with ErrNotEnoughReplicas only when the topic asks for more
// than one in-sync replica. Batches keep the producer's timestamps
// (LogAppendTime -1). A duplicate of one of an idempotent producer's last 5
// batches appends nothing and is answered as the first time: its
// BaseOffset is the one the batch got then (see Partition.AppendBatch).
func (b *Broker) ProduceBatch(ctx context.Context, tp TopicPartition, batch []byte, acks Acks) (ProduceResult, error) {
	return b.produceWith(ctx, tp, batch, acks, (*Partition).AppendBatch)
}

// produceWith is a produce whose batch append is appendTo: AppendBatch for
// bytes from anywhere, appendBuilt for the in-process Producer's own.
func (b *Broker) produceWith(ctx context.Context, tp TopicPartition, batch []byte, acks Acks,
	appendTo func(*Partition, []byte) (base, next int64, err error)) (ProduceResult, error) {
	if err := ctx.Err(); err != nil {
		return ProduceResult{}, err
	}
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return ProduceResult{}, err
	}
	if acks == AcksAll && p.config().MinInSyncReplicas > 1 {
		return ProduceResult{}, fmt.Errorf("%w: %s needs %d in-sync replicas, a standalone broker has 1", ErrNotEnoughReplicas, p, p.config().MinInSyncReplicas)
	}
	base, _, err := appendTo(p, batch)
	if err != nil {
		return ProduceResult{}, err
	}
	return ProduceResult{BaseOffset: base, LogAppendTime: -1, LogStartOffset: p.StartOffset()}, nil
}

// ListOffset returns the log start offset (EarliestOffset), the high
// watermark (LatestOffset), the last stable offset (LatestStableOffset) or
// the first offset at or after a timestamp (ms).
// A standalone broker answers from its own partitions: ctx is not waited on.
func (b *Broker) ListOffset(_ context.Context, tp TopicPartition, at int64) (int64, error) {
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return 0, err
	}
	switch {
	case at == EarliestOffset:
		return p.StartOffset(), nil
	case at == LatestOffset:
		return p.HighWatermark(), nil
	case at == LatestStableOffset:
		return p.LastStableOffset(), nil
	case at < 0:
		return 0, fmt.Errorf("%w: ListOffset at %d", ErrInvalidConfig, at)
	}
	return p.OffsetForTime(time.UnixMilli(at))
}

// Fetch reads the requested partitions: consumers below the high
// watermark, or the last stable offset for FetchTxnCommitted (with the
// aborted transactions of what was read), replicas below the end offset
// (FetchRequest.Isolation, ReplicaID). With fewer than MinBytes readable it
// parks in the purgatory until enough is readable below those bounds (an
// append, a transaction marker, or the high watermark moving), MaxWait
// passes, ctx is done or the broker closes, then
// reads again. The records are handles on the segment files: release them
// (FetchResponse.Release).
func (b *Broker) Fetch(ctx context.Context, req FetchRequest) (FetchResponse, error) {
	return b.fetch(ctx, req, (*Partition).HighWatermark)
}

// fetch is Fetch with the high watermark read by hw: a seam for the tests
// of a high watermark behind the end offset.
func (b *Broker) fetch(ctx context.Context, req FetchRequest, hw func(*Partition) int64) (FetchResponse, error) {
	if err := req.validate(); err != nil {
		return FetchResponse{}, err
	}
	req = req.withDefaults()
	parts := make([]*Partition, len(req.Partitions))
	op := &fetchOp{
		parts: parts, bounds: make([]int64, len(parts)), counts: make([]int64, len(parts)),
		req: &req, hw: hw,
	}
	resp, n := b.readFetch(req, op)
	if n >= req.MinBytes || req.MaxWait <= 0 || fetchFailed(resp) {
		return resp, nil
	}
	resp.Release() // read again once there is enough
	op.done = make(chan struct{})
	keys := make([]TopicPartition, 0, len(parts))
	for _, p := range parts {
		if p != nil {
			keys = append(keys, TopicPartition{Topic: p.topic, Partition: p.id})
		}
	}
	d, done := b.fetches.TryCompleteElseWatch(op, req.MaxWait, keys...)
	if !done && b.cfg.Metrics != nil {
		b.reportFetchPurgatory()
		defer b.reportFetchPurgatory()
	}
	if !done {
		select {
		case <-op.done:
		case <-ctx.Done():
			if d.Cancel() {
				return FetchResponse{}, ctx.Err()
			}
			<-op.done
		case <-b.stop:
			d.Cancel()
			return FetchResponse{}, fmt.Errorf("log: fetch: %w", ErrClosed)
		}
	}
	resp, _ = b.readFetch(req, op)
	return resp, nil
}

// readFetch reads every requested partition within the byte budgets and
// returns the response and the number of bytes in it. op gets the
// partitions it found, the bound each was read to and the bytes read.
func (b *Broker) readFetch(req FetchRequest, op *fetchOp) (FetchResponse, int) {
	resp := FetchResponse{Partitions: make([]FetchedPartition, len(req.Partitions))}
	total := 0
	for i, fp := range req.Partitions {
		out := &resp.Partitions[i]
		out.TopicPartition = fp.TopicPartition
		p := op.parts[i]
		if p == nil {
			var err error
			if p, err = b.Partition(fp.Topic, fp.Partition); err != nil {
				out.Err = err
				continue
			}
			op.parts[i] = p
		}
		// The high watermark and the LSO are read once: the bound of the
		// read is the one reported (read again, either could have moved,
		// and a READ_COMMITTED answer carried records past its LSO).
		hw := op.hw(p)
		lso := min(p.LastStableOffset(), hw)
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = hw, lso, p.StartOffset()
		bound := op.boundOf(p, hw, lso)
		op.bounds[i], op.counts[i] = bound, 0
		budget := min(fp.maxBytes(&req), req.MaxBytes-total)
		if budget <= 0 && total > 0 {
			continue
		}
		// Kafka's rule (KIP-74): the first partition with data returns at
		// least one batch, however large; the others only what fits.
		recs, err := p.slice(fp.Offset, max(budget, 1), bound, total == 0)
		if err != nil {
			out.Err = err
			continue
		}
		if req.isolation() == FetchTxnCommitted && recs.Len() > 0 {
			// The aborted transactions of what was read (Kafka's
			// collectAbortedTransactions up to the read's end).
			if out.AbortedTransactions, err = p.AbortedTransactions(nil, fp.Offset, recs.next); err != nil {
				recs.Release()
				out.Err = err
				continue
			}
		}
		out.Records = recs
		op.counts[i] = recs.Len()
		total += int(recs.Len())
	}
	return resp, total
}

// fetchFailed reports whether a partition of resp failed (unknown, out of
// range, unreadable): the fetch answers at once, as Kafka's does, so that
// the client can act on the error rather than wait MaxWait for it.
func fetchFailed(resp FetchResponse) bool {
	for _, p := range resp.Partitions {
		if p.Err != nil {
			return true
		}
	}
	return false
}

// fetchOp is a fetch parked in the purgatory. It completes once the bytes
// readable from its offsets below its bounds (the high watermark for a
// consumer, the end offset for a replica) reach MinBytes, or one of its
// partitions is closed (its topic deleted) or cannot be read at its offset:
// the fetch then answers at once, with the error.
//
// It counts again only the partitions whose bound moved since it last
// counted, and reads nothing when a moved bound settles it: appends past the
// high watermark, and the appends that complete a fetch for MinBytes 1,
// cost no read.
type fetchOp struct {
	parts  []*Partition
	bounds []int64 // the bound each partition was last counted to
	counts []int64 // the bytes readable then, up to the partition's MaxBytes
	req    *FetchRequest
	hw     func(*Partition) int64
	done   chan struct{}
}

// bound is the offset the fetch reads p below.
func (o *fetchOp) bound(p *Partition) int64 {
	hw := o.hw(p)
	lso := hw
	if o.req.isolation() == FetchTxnCommitted {
		lso = min(p.LastStableOffset(), hw)
	}
	return o.boundOf(p, hw, lso)
}

// boundOf is bound with p's high watermark and last stable offset (at
// most hw) already read.
func (o *fetchOp) boundOf(p *Partition, hw, lso int64) int64 {
	switch o.req.isolation() {
	case FetchLogEnd:
		return p.EndOffset()
	case FetchTxnCommitted:
		return lso
	}
	return hw
}

func (o *fetchOp) TryComplete() bool {
	// First without reading: a bound that moved past a partition's offset
	// makes at least one batch readable there, and a batch is at least a
	// header. That settles the usual fetch (MinBytes 1) at no cost.
	var n int64
	moved := false
	for i, p := range o.parts {
		if p == nil {
			continue
		}
		if p.closed.Load() {
			return true // deleted: answer now, with its error
		}
		c := o.counts[i]
		if bound := o.bound(p); bound != o.bounds[i] {
			moved = true
			if bound > o.req.Partitions[i].Offset {
				c = max(c, batch.HeaderSize)
			}
		}
		n += c
	}
	if n >= int64(o.req.MinBytes) {
		return true
	}
	if !moved {
		return false
	}
	// Then count the partitions whose bound moved.
	n = 0
	for i, p := range o.parts {
		if p == nil {
			continue
		}
		if bound := o.bound(p); bound != o.bounds[i] {
			fp := &o.req.Partitions[i]
			c, err := p.readable(fp.Offset, bound, fp.maxBytes(o.req))
			if err != nil {
				return true // truncated or deleted below the offset: answer with the error
			}
			o.bounds[i], o.counts[i] = bound, min(c, int64(fp.maxBytes(o.req)))
		}
		n += o.counts[i]
	}
	return n >= int64(o.req.MinBytes)
}

func (o *fetchOp) OnComplete()   { close(o.done) }
func (o *fetchOp) OnExpiration() {}

// startPurgatory starts the timing wheel and the fetch purgatory.
func (b *Broker) startPurgatory() error {
	w, err := timingwheel.Start(timingwheel.Config{Tick: time.Millisecond, WheelSize: 20, Clock: b.cfg.Clock})
	if err != nil {
		return err
	}
	b.wheel = w
	f, err := timingwheel.NewPurgatory[TopicPartition](b.wheel, timingwheel.PurgatoryConfig{})
	if err != nil {
		b.wheel.Stop()
		return err
	}
	b.fetches = f
	return nil
}

// appended wakes the fetches parked on p: call it after an append and
// whenever p's high watermark moves.
func (b *Broker) appended(p *Partition) {
	b.fetches.CheckAndComplete(TopicPartition{Topic: p.topic, Partition: p.id})
}
