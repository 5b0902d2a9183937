package log

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/tp"
)

// The Broker's side of ShareClient: its share coordinator, in the process.

var _ ShareClient = (*Broker)(nil)

// ShareHeartbeat is Kafka's ShareGroupHeartbeat at the broker's share
// coordinator.
func (b *Broker) ShareHeartbeat(ctx context.Context, req share.HeartbeatRequest) (share.HeartbeatResponse, error) {
	return b.shares.Heartbeat(ctx, req)
}

// ShareAcknowledge applies member's acknowledgements, each partition's
// all or none; the first partition's error is returned (wrapped), the
// others are applied all the same.
func (b *Broker) ShareAcknowledge(ctx context.Context, group, member string, acks map[TopicPartition][]share.AckBatch) error {
	errs := b.shareAck(ctx, group, member, acks)
	if len(errs) == 0 {
		return nil
	}
	t := slices.MinFunc(slices.Collect(maps.Keys(errs)), tp.Compare)
	return fmt.Errorf("log: acknowledge %s: %w", t, errs[t])
}

// shareAck applies member's acknowledgements of each partition and
// returns the partitions' errors (nil: none). The partitions are
// acknowledged at once, so that their state records go to
// ShareStateTopic in one write (and one fsync, where one is needed:
// shareStateConfig) through shareStateLog's group commit, not one after
// another.
func (b *Broker) shareAck(ctx context.Context, group, member string, acks map[TopicPartition][]share.AckBatch) map[TopicPartition]error {
	var (
		mu   sync.Mutex
		errs map[TopicPartition]error
		wg   sync.WaitGroup
	)
	ack := func(t TopicPartition, batches []share.AckBatch) {
		if err := b.shares.Acknowledge(ctx, group, member, t, batches); err != nil {
			mu.Lock()
			if errs == nil {
				errs = map[TopicPartition]error{}
			}
			errs[t] = err
			mu.Unlock()
		}
	}
	for t, batches := range acks {
		if len(acks) == 1 {
			ack(t, batches)
			break
		}
		wg.Go(func() { ack(t, batches) })
	}
	wg.Wait()
	return errs
}

// ShareFetch applies req.Acks, then acquires records of req.Partitions
// for a member, at most req.MaxRecords, and returns them read from the
// log with their delivery counts, waiting up to req.MaxWait when none
// could be acquired. Acquired offsets that hold no record (compacted away,
// transaction markers) are acknowledged as gaps here. Acknowledgements
// that failed are answered as a *ShareAckError, with the records.
func (b *Broker) ShareFetch(ctx context.Context, req ShareFetchRequest) ([]ShareRecord, error) {
	errs := b.shareAck(ctx, req.Group, req.Member, req.Acks)
	recs, err := b.shareFetch(ctx, req)
	if err == nil && errs != nil {
		err = &ShareAckError{Partitions: errs}
	}
	return recs, err
}

func (b *Broker) shareFetch(ctx context.Context, req ShareFetchRequest) ([]ShareRecord, error) {
	max := req.MaxRecords
	if max <= 0 {
		max = defaultShareMaxRecords
	}
	deadline := b.cfg.Clock.Now().Add(req.MaxWait)
	for {
		watch := b.shares.Watch()
		var out []ShareRecord
		for _, t := range req.Partitions {
			if len(out) >= max {
				break
			}
			ranges, err := b.shares.Acquire(ctx, req.Group, req.Member, t, max-len(out))
			if err != nil {
				return out, fmt.Errorf("log: share fetch %s: %w", t, err)
			}
			if out, err = b.shareRead(ctx, req, t, ranges, out); err != nil {
				return out, err
			}
		}
		left := deadline.Sub(b.cfg.Clock.Now())
		if len(out) > 0 || left <= 0 || ctx.Err() != nil {
			return out, ctx.Err()
		}
		b.shareWait(ctx, req.Partitions, left, watch)
	}
}

// shareRead appends to out the records of the acquired ranges of t, and
// acknowledges as gaps the acquired offsets with no record.
func (b *Broker) shareRead(ctx context.Context, req ShareFetchRequest, t TopicPartition, ranges []share.AcquiredRange, out []ShareRecord) ([]ShareRecord, error) {
	if len(ranges) == 0 {
		return out, nil
	}
	first, last := ranges[0].First, ranges[len(ranges)-1].Last
	var gaps []share.AckBatch
	gap := func(from, to int64) {
		if from <= to {
			gaps = append(gaps, share.AckBatch{First: from, Last: to, Types: []share.AckType{share.AckGap}})
		}
	}
	n := 0
	for _, r := range ranges {
		n += int(r.Last - r.First + 1)
	}
	out = slices.Grow(out, n)
	p, err := b.Partition(t.Topic, t.Partition)
	if err != nil {
		return out, fmt.Errorf("log: share fetch %s: %w", t, err)
	}
	bufp, _ := shareDecodeBufs.Get().(*[]Record)
	if bufp == nil {
		bufp = new([]Record)
	}
	recs := (*bufp)[:0] // the records of one read, reused
	defer func() { clear(recs); *bufp = recs[:0]; shareDecodeBufs.Put(bufp) }()
	var hdrs []Header
	ri, next := 0, first // the range of the next offset expected, the offset
	for off := first; off <= last; {
		// The batches up to the one holding last, no further: the
		// acquired offsets are all that is read and decoded.
		sl, err := p.slice(off, shareReadBytes, min(last+1, p.HighWatermark()), true)
		if err != nil {
			return out, fmt.Errorf("log: share fetch %s at %d: %w", t, off, err)
		}
		raw, tail, err := sl.bytes()
		sl.Release()
		if err != nil {
			return out, fmt.Errorf("log: share fetch %s at %d: %w", t, off, err)
		}
		var end int64
		recs, end, err = decodeBatches(slices.Grow(recs[:0], countRecords(raw)), &hdrs, raw, tail, nil, t, off, p.maxInflate)
		if err != nil {
			return out, fmt.Errorf("log: share fetch %s at %d: %w", t, off, err)
		}
		for _, r := range recs {
			for ri < len(ranges) && r.Offset > ranges[ri].Last {
				gap(next, ranges[ri].Last)
				ri++
				if ri < len(ranges) {
					next = ranges[ri].First
				}
			}
			if ri == len(ranges) {
				break
			}
			if r.Offset < ranges[ri].First {
				continue
			}
			gap(next, r.Offset-1)
			next = r.Offset + 1
			out = append(out, ShareRecord{Record: r, DeliveryCount: int(ranges[ri].DeliveryCount)})
		}
		if end <= off { // nothing more in the log: the rest are gaps
			break
		}
		off = end
	}
	for ; ri < len(ranges); ri++ {
		gap(next, ranges[ri].Last)
		if ri+1 < len(ranges) {
			next = ranges[ri+1].First
		}
	}
	if len(gaps) > 0 {
		if err := b.shares.Acknowledge(ctx, req.Group, req.Member, t, gaps); err != nil {
			return out, fmt.Errorf("log: share fetch %s: acknowledge gaps: %w", t, err)
		}
	}
	return out, nil
}

// shareReadBytes bounds one read of shareRead (it reads no batch past the
// last acquired offset in any case).
const shareReadBytes = 4 << 20

// shareDecodeBufs holds shareRead's decode buffers.
var shareDecodeBufs sync.Pool

// shareWait waits up to wait for records appended to parts, records
// given back (watch) or ctx's end.
func (b *Broker) shareWait(ctx context.Context, parts []TopicPartition, wait time.Duration, watch <-chan struct{}) {
	req := FetchRequest{MinBytes: 1, MaxBytes: 1, MaxWait: wait}
	for _, t := range parts {
		if p, err := b.Partition(t.Topic, t.Partition); err == nil {
			req.Partitions = append(req.Partitions, FetchPartition{TopicPartition: t, Offset: p.HighWatermark(), MaxBytes: 1})
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // ends with wctx, cancelled before shareWait returns
		defer close(done)
		select {
		case <-watch:
			cancel()
		case <-wctx.Done():
		}
	}()
	if len(req.Partitions) == 0 {
		t := b.cfg.Clock.NewTimer(wait)
		select {
		case <-wctx.Done():
		case <-t.C():
		}
		t.Stop()
	} else if fr, err := b.Fetch(wctx, req); err == nil {
		fr.Release()
	}
	cancel()
	<-done
}
