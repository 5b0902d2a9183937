package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

// A member as a log.ShareClient: a heartbeat runs at the group's
// coordinator, a fetch or an acknowledgement of a partition at its leader
// — this member, or another over the Transport (in the process over the
// LocalNetwork; over the Kafka-protocol one, the member's kafka.Client,
// which sends Kafka's share requests to the leaders). A log.ShareConsumer
// on a member so consumes a share group of the cluster.

// ErrSharesUnsupported: the Transport cannot carry a share-group call to
// another member (one whose group client is no log.ShareClient).
var ErrSharesUnsupported = errors.New("replica: share-group calls cannot be forwarded over this transport yet")

var (
	_ log.ShareClient = (*Broker)(nil)
	_ log.ShareClient = localGroups{}
)

// shareDefaultMaxRecords is Kafka's max.poll.records, for a fetch that
// names none.
const shareDefaultMaxRecords = 500

// shareAt runs fn with member's share client: this member's own, or the
// other's over the Transport.
func (b *Broker) shareAt(ctx context.Context, member int, fn func(log.ShareClient) error) error {
	if member == b.cfg.ID {
		return fn(localGroups{b})
	}
	return b.tr.Group(ctx, member, func(g log.GroupClient) error {
		sc, ok := g.(log.ShareClient)
		if !ok {
			return fmt.Errorf("%w (broker %d)", ErrSharesUnsupported, member)
		}
		return fn(sc)
	})
}

// ShareHeartbeat is Kafka's ShareGroupHeartbeat at the group's
// coordinator, followed when it moves.
func (b *Broker) ShareHeartbeat(ctx context.Context, req share.HeartbeatRequest) (resp share.HeartbeatResponse, err error) {
	err = b.groupCall(ctx, req.Group, func(g log.GroupClient) error {
		sc, ok := g.(log.ShareClient)
		if !ok {
			return ErrSharesUnsupported
		}
		resp, err = sc.ShareHeartbeat(ctx, req)
		if errors.Is(err, kerr.ErrCoordinatorLoading) {
			err = fmt.Errorf("%w (%w)", kerr.ErrNotCoordinator, err) // tried again
		}
		return err
	})
	return resp, err
}

// ShareFetch applies req.Acks and acquires records of req.Partitions for
// a member at each partition's leader, the leaders in parallel, waiting
// up to MaxWait when none could be acquired. A partition whose leader
// moves, or loads its share-partitions, gives nothing this time. Each
// leader acquires at most MaxRecords: a fetch from several may return
// more. Acknowledgements that failed are answered as a
// *log.ShareAckError, with the records fetched.
func (b *Broker) ShareFetch(ctx context.Context, req log.ShareFetchRequest) ([]log.ShareRecord, error) {
	if err := b.waitReady(ctx); err != nil {
		return nil, err
	}
	ch := b.metaWatch()
	subs := map[int]*log.ShareFetchRequest{}
	sub := func(l int) *log.ShareFetchRequest {
		if subs[l] == nil {
			subs[l] = &log.ShareFetchRequest{Group: req.Group, Member: req.Member, MaxRecords: req.MaxRecords, MaxWait: req.MaxWait}
		}
		return subs[l]
	}
	ackErr := &log.ShareAckError{Partitions: map[log.TopicPartition]error{}}
	for t, bs := range req.Acks {
		l, err := b.leaderOf(t)
		if err != nil {
			ackErr.Partitions[t] = fmt.Errorf("replica: acknowledge %s-%d: %w", t.Topic, t.Partition, err)
			continue
		}
		s := sub(l)
		if s.Acks == nil {
			s.Acks = map[log.TopicPartition][]share.AckBatch{}
		}
		s.Acks[t] = bs
	}
	fetching := false
	for _, t := range req.Partitions {
		if l, err := b.leaderOf(t); err == nil {
			s := sub(l)
			s.Partitions = append(s.Partitions, t)
			fetching = true
		}
	}
	// First the leaders that have acknowledgements to apply, none
	// waiting nor cancelled: they apply them and acquire what they have.
	var out []log.ShareRecord
	var first error
	acking := map[int]*log.ShareFetchRequest{}
	for l, s := range subs {
		if len(s.Acks) > 0 {
			now := *s
			now.MaxWait = 0
			acking[l] = &now
			s.Acks = nil
		}
	}
	if len(acking) > 0 {
		out, first = b.shareFetchAt(ctx, ctx, acking, ackErr)
		if len(out) > 0 || len(ackErr.Partitions) > 0 || first != nil {
			return b.shareFetchAnswer(out, first, ackErr)
		}
	}
	if !fetching {
		if len(req.Partitions) > 0 {
			return nil, b.shareIdle(ctx, ch, req.MaxWait) // no partition has a leader now
		}
		return nil, nil
	}
	// Then every leader, waiting for records; the first to answer some
	// ends the others' waits.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for l, s := range subs {
		if len(s.Partitions) == 0 {
			delete(subs, l)
		}
	}
	out, first = b.shareFetchAt(ctx, fctx, subs, ackErr, cancel)
	if len(out) == 0 && first == nil {
		first = ctx.Err()
	}
	return b.shareFetchAnswer(out, first, ackErr)
}

// shareFetchAt sends each leader its part of a fetch, in parallel, within
// fctx, and returns the records and the first error that is not a
// leadership one; the acknowledgements that failed go to ackErr. Each
// onRecords is called when a leader answers records.
func (b *Broker) shareFetchAt(ctx, fctx context.Context, subs map[int]*log.ShareFetchRequest, ackErr *log.ShareAckError, onRecords ...func()) ([]log.ShareRecord, error) {
	var (
		mu    sync.Mutex
		out   []log.ShareRecord
		first error
		wg    sync.WaitGroup
	)
	for leader, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var recs []log.ShareRecord
			err := b.shareAt(fctx, leader, func(sc log.ShareClient) (err error) {
				recs, err = sc.ShareFetch(fctx, *s)
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			out = append(out, recs...) // what was acquired is delivered, whatever the error
			if len(recs) > 0 {
				for _, f := range onRecords {
					f()
				}
			}
			var ae *log.ShareAckError
			switch {
			case errors.As(err, &ae):
				for t, e := range ae.Partitions {
					ackErr.Partitions[t] = e
				}
			case err != nil && len(s.Acks) > 0:
				// The call failed, its acknowledgements maybe not applied:
				// they are answered failed (the records are delivered
				// again if they were not).
				for t := range s.Acks {
					ackErr.Partitions[t] = err
				}
			case err != nil && !retriable(err) && fctx.Err() == nil && first == nil:
				first = err
			}
		}()
	}
	wg.Wait()
	return out, first
}

// shareFetchAnswer is the answer of a ShareFetch: the acknowledgements'
// failure first, with the records.
func (b *Broker) shareFetchAnswer(out []log.ShareRecord, first error, ackErr *log.ShareAckError) ([]log.ShareRecord, error) {
	switch {
	case len(ackErr.Partitions) > 0:
		return out, ackErr
	case len(out) > 0:
		return out, nil
	case first != nil:
		return nil, fmt.Errorf("replica: share fetch: %w", first)
	}
	return nil, nil
}

// shareIdle waits, when no partition of a fetch has a leader, for the
// metadata to change or wait to pass.
func (b *Broker) shareIdle(ctx context.Context, ch <-chan struct{}, wait time.Duration) error {
	t := time.NewTimer(max(wait, time.Millisecond))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ShareAcknowledge applies a member's acknowledgements at each
// partition's leader, each partition's all or none; the first error is
// returned, the other partitions' are applied all the same. An
// acknowledgement of records acquired from a leader that has since
// stopped leading is ErrInvalidRecordState: the new leader delivers them
// again.
func (b *Broker) ShareAcknowledge(ctx context.Context, group, member string, acks map[log.TopicPartition][]share.AckBatch) error {
	if err := b.waitReady(ctx); err != nil {
		return err
	}
	byLeader := map[int]map[log.TopicPartition][]share.AckBatch{}
	var first error
	for t, bs := range acks {
		l, err := b.leaderOf(t)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("replica: acknowledge %s-%d: %w", t.Topic, t.Partition, err)
			}
			continue
		}
		if byLeader[l] == nil {
			byLeader[l] = map[log.TopicPartition][]share.AckBatch{}
		}
		byLeader[l][t] = bs
	}
	for leader, part := range byLeader {
		err := b.shareAt(ctx, leader, func(sc log.ShareClient) error { return sc.ShareAcknowledge(ctx, group, member, part) })
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ShareHeartbeat runs a heartbeat at this member's share coordinator.
func (g localGroups) ShareHeartbeat(ctx context.Context, req share.HeartbeatRequest) (share.HeartbeatResponse, error) {
	return g.b.shares.c.Heartbeat(ctx, req)
}

// ShareAcknowledge applies acknowledgements of partitions this member
// leads.
func (g localGroups) ShareAcknowledge(ctx context.Context, group, member string, acks map[log.TopicPartition][]share.AckBatch) error {
	var first error
	for t, bs := range acks {
		if err := g.b.shares.c.Acknowledge(ctx, group, member, t, bs); err != nil && first == nil {
			first = fmt.Errorf("replica: acknowledge %s-%d: %w", t.Topic, t.Partition, err)
		}
	}
	return first
}

// ShareFetch applies acknowledgements (a *log.ShareAckError answers
// those that failed, with the records) and acquires records of
// partitions this member leads, read from its replicas, waiting up to
// MaxWait when none could be acquired. Acquired offsets with no record (transaction markers,
// compacted away) are acknowledged as gaps here.
func (g localGroups) ShareFetch(ctx context.Context, req log.ShareFetchRequest) ([]log.ShareRecord, error) {
	var ackErr *log.ShareAckError
	for t, bs := range req.Acks {
		if err := g.b.shares.c.Acknowledge(ctx, req.Group, req.Member, t, bs); err != nil {
			if ackErr == nil {
				ackErr = &log.ShareAckError{Partitions: map[log.TopicPartition]error{}}
			}
			ackErr.Partitions[t] = fmt.Errorf("replica: acknowledge %s-%d: %w", t.Topic, t.Partition, err)
		}
	}
	if len(req.Partitions) == 0 {
		if ackErr != nil {
			return nil, ackErr
		}
		return nil, nil
	}
	recs, err := g.shareFetch(ctx, req)
	if ackErr != nil {
		return recs, ackErr
	}
	return recs, err
}

func (g localGroups) shareFetch(ctx context.Context, req log.ShareFetchRequest) ([]log.ShareRecord, error) {
	b, c := g.b, g.b.shares.c
	max := req.MaxRecords
	if max <= 0 {
		max = shareDefaultMaxRecords
	}
	deadline := time.Now().Add(req.MaxWait)
	for {
		watch := c.Watch()
		var out []log.ShareRecord
		var first error
		for _, t := range req.Partitions {
			if len(out) >= max {
				break
			}
			ranges, err := c.Acquire(ctx, req.Group, req.Member, t, max-len(out))
			if err != nil {
				if first == nil {
					first = fmt.Errorf("replica: share fetch %s-%d: %w", t.Topic, t.Partition, err)
				}
				continue
			}
			// What is acquired is read and delivered even if ctx ends
			// meanwhile: it would stay locked to the member otherwise.
			out = b.shareRead(context.WithoutCancel(ctx), req, t, ranges, out)
		}
		left := time.Until(deadline)
		switch {
		case len(out) > 0:
			return out, nil
		case first != nil && !errors.Is(first, log.ErrNotLeader):
			return nil, first
		case left <= 0 || ctx.Err() != nil:
			if first != nil {
				return nil, first
			}
			return nil, ctx.Err()
		}
		b.shareWait(ctx, req.Partitions, left, watch)
	}
}

// shareRead appends to out the records of t in the acquired ranges, read
// from this member's replica, and acknowledges as gaps the offsets with
// no record. Ranges it cannot read are given back (Unacquire).
func (b *Broker) shareRead(ctx context.Context, req log.ShareFetchRequest, t log.TopicPartition, ranges []share.AcquiredRange, out []log.ShareRecord) []log.ShareRecord {
	if len(ranges) == 0 {
		return out
	}
	c := b.shares.c
	var gaps []share.AckBatch
	gap := func(from, to int64) {
		if from <= to {
			gaps = append(gaps, share.AckBatch{First: from, Last: to, Types: []share.AckType{share.AckGap}})
		}
	}
	first, last := ranges[0].First, ranges[len(ranges)-1].Last
	ri, next := 0, first
	for off := first; off <= last; {
		raw, end, err := b.readShared(ctx, t, off)
		if err != nil {
			b.log.Warn("replica: share fetch: read acquired records", "partition", t, "offset", off, "err", err)
			c.Unacquire(req.Group, req.Member, t, next)
			return out
		}
		recs, err := log.DecodeRecords(raw)
		if err != nil {
			b.log.Warn("replica: share fetch: decode acquired records", "partition", t, "offset", off, "err", err)
			c.Unacquire(req.Group, req.Member, t, next)
			return out
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
			r.Topic, r.Partition = t.Topic, t.Partition
			out = append(out, log.ShareRecord{Record: r, DeliveryCount: int(ranges[ri].DeliveryCount)})
		}
		if end <= off {
			break // nothing more in the log: the rest are gaps
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
		if err := c.Acknowledge(ctx, req.Group, req.Member, t, gaps); err != nil {
			b.log.Warn("replica: share fetch: acknowledge gaps", "partition", t, "err", err)
		}
	}
	return out
}

// readShared reads the batches of this member's replica of t from off,
// up to its high watermark, and returns them with the offset after the
// last.
func (b *Broker) readShared(ctx context.Context, t log.TopicPartition, off int64) ([]byte, int64, error) {
	resp, err := b.fetchLocal(ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: t, Offset: off}}, MaxWait: -1})
	if err != nil {
		return nil, off, err
	}
	defer resp.Release()
	fp := resp.Partitions[0]
	if fp.Err != nil {
		return nil, off, fp.Err
	}
	raw, err := fp.Records.Bytes()
	if err != nil {
		return nil, off, err
	}
	end := off
	_ = batch.Batches(raw, func(_ []byte, h batch.Header) error { end = max(end, h.NextOffset()); return nil })
	return raw, end, nil
}

// shareWait waits up to wait for records appended to parts, records
// given back (watch) or ctx's end.
func (b *Broker) shareWait(ctx context.Context, parts []log.TopicPartition, wait time.Duration, watch <-chan struct{}) {
	req := log.FetchRequest{MinBytes: 1, MaxBytes: 1, MaxWait: wait}
	for _, t := range parts {
		if ps := b.part(t); ps != nil && ps.leading.Load() {
			req.Partitions = append(req.Partitions, log.FetchPartition{TopicPartition: t, Offset: ps.p.HighWatermark(), MaxBytes: 1})
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
		t := time.NewTimer(wait)
		select {
		case <-wctx.Done():
		case <-t.C:
		}
		t.Stop()
	} else if fr, err := b.fetchLocal(wctx, req); err == nil {
		fr.Release()
	}
	cancel()
	<-done
}
