package log

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/timingwheel"
)

var _ Client = (*Broker)(nil)

// Partitions returns the number of partitions of topic.
func (b *Broker) Partitions(topic string) (int, error) {
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
// (LogAppendTime -1).
func (b *Broker) ProduceBatch(ctx context.Context, tp TopicPartition, batch []byte, acks Acks) (ProduceResult, error) {
	if err := ctx.Err(); err != nil {
		return ProduceResult{}, err
	}
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return ProduceResult{}, err
	}
	if acks == AcksAll && p.cfg.MinInSyncReplicas > 1 {
		return ProduceResult{}, fmt.Errorf("%w: %s needs %d in-sync replicas, a standalone broker has 1", ErrNotEnoughReplicas, p, p.cfg.MinInSyncReplicas)
	}
	base, _, err := p.AppendBatch(batch)
	if err != nil {
		return ProduceResult{}, err
	}
	return ProduceResult{BaseOffset: base, LogAppendTime: -1, LogStartOffset: p.StartOffset()}, nil
}

// ListOffset returns the log start offset (EarliestOffset), the high
// watermark (LatestOffset) or the first offset at or after a timestamp (ms).
func (b *Broker) ListOffset(tp TopicPartition, at int64) (int64, error) {
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return 0, err
	}
	switch {
	case at == EarliestOffset:
		return p.StartOffset(), nil
	case at == LatestOffset:
		return p.HighWatermark(), nil
	case at < 0:
		return 0, fmt.Errorf("%w: ListOffset at %d", ErrInvalidConfig, at)
	}
	return p.OffsetForTime(time.UnixMilli(at))
}

// Fetch reads the requested partitions. With fewer than MinBytes available
// it parks in the purgatory until an append to one of them brings enough,
// MaxWait passes, ctx is done or the broker closes, then reads again.
func (b *Broker) Fetch(ctx context.Context, req FetchRequest) (FetchResponse, error) {
	req = req.withDefaults()
	parts := make([]*Partition, len(req.Partitions))
	resp, n := b.readFetch(req, parts)
	if n >= req.MinBytes || req.MaxWait <= 0 || fetchFailed(resp) {
		return resp, nil
	}
	op := &fetchOp{parts: parts, seen: make([]int64, len(parts)), have: n, min: req.MinBytes, done: make(chan struct{})}
	keys := make([]TopicPartition, 0, len(parts))
	for i, p := range parts {
		if p != nil {
			op.seen[i] = p.bytesIn.Load()
			keys = append(keys, TopicPartition{Topic: p.topic, Partition: p.id})
		}
	}
	d, done := b.fetches.TryCompleteElseWatch(op, req.MaxWait, keys...)
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
	resp, _ = b.readFetch(req, parts)
	return resp, nil
}

// readFetch reads every requested partition within the byte budgets and
// returns the response and the number of bytes in it. parts gets the
// partitions it found.
func (b *Broker) readFetch(req FetchRequest, parts []*Partition) (FetchResponse, int) {
	resp := FetchResponse{Partitions: make([]FetchedPartition, len(req.Partitions))}
	total := 0
	for i, fp := range req.Partitions {
		out := &resp.Partitions[i]
		out.TopicPartition = fp.TopicPartition
		p := parts[i]
		if p == nil {
			var err error
			if p, err = b.Partition(fp.Topic, fp.Partition); err != nil {
				out.Err = err
				continue
			}
			parts[i] = p
		}
		out.HighWatermark, out.LogStartOffset = p.HighWatermark(), p.StartOffset()
		budget := min(req.PartitionMaxBytes, req.MaxBytes-total)
		if budget <= 0 && total > 0 {
			continue
		}
		// Kafka's rule (KIP-74): the first partition with data returns at
		// least one batch, however large; the others only what fits.
		raw, err := p.readBatches(fp.Offset, max(budget, 1), out.HighWatermark, total == 0)
		if err != nil {
			out.Err = err
			continue
		}
		out.Records = raw
		total += len(raw)
	}
	return resp, total
}

// fetchFailed reports whether every partition of resp failed: waiting would
// not help.
func fetchFailed(resp FetchResponse) bool {
	for _, p := range resp.Partitions {
		if p.Err == nil {
			return false
		}
	}
	return len(resp.Partitions) > 0
}

// fetchOp is a fetch parked in the purgatory: it completes once the bytes
// appended to its partitions since it parked, plus what it already had,
// reach MinBytes, or one of its partitions is closed (its topic deleted).
type fetchOp struct {
	parts []*Partition
	seen  []int64 // each partition's bytesIn when the fetch parked
	have  int
	min   int
	done  chan struct{}
}

func (o *fetchOp) TryComplete() bool {
	n := int64(o.have)
	for i, p := range o.parts {
		if p != nil {
			if p.closed.Load() {
				return true // deleted: answer now, with its error
			}
			n += p.bytesIn.Load() - o.seen[i]
		}
	}
	return n >= int64(o.min)
}

func (o *fetchOp) OnComplete()   { close(o.done) }
func (o *fetchOp) OnExpiration() {}

// startPurgatory starts the timing wheel and the fetch purgatory.
func (b *Broker) startPurgatory() error {
	b.wheel = timingwheel.New(time.Millisecond, 20)
	f, err := timingwheel.NewPurgatory[TopicPartition](b.wheel, timingwheel.PurgatoryConfig{})
	if err != nil {
		b.wheel.Stop()
		return err
	}
	b.fetches = f
	return nil
}

// appended wakes the fetches parked on p.
func (b *Broker) appended(p *Partition) {
	b.fetches.CheckAndComplete(TopicPartition{Topic: p.topic, Partition: p.id})
}
