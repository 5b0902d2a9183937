package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/transport"
)

// This file is the leader's side: what a member answers, as the leader of
// a partition, to followers' fetches and to the client calls routed to it.

// serveReplicaFetch answers a follower's fetch: each partition's leader
// machine takes the fetch (the follower's LEO, caught-up time, ISR
// expansion, the HW) and says what to answer; with nothing new anywhere
// the fetch waits up to MaxWait for an append or a HW move.
func (b *Broker) serveReplicaFetch(ctx context.Context, req transport.ReplicaFetchRequest) (transport.ReplicaFetchResponse, error) {
	now := b.cfg.Clock.Now()
	resp := transport.ReplicaFetchResponse{Partitions: make([]transport.ReplicaFetchedPartition, len(req.Partitions))}
	ready := make([]*partState, len(req.Partitions))
	// throttled: the follower is out of the ISR and the leader's
	// replication quota is used up (throttle.go): no records this time,
	// and they do not end the wait.
	throttled := make([]bool, len(req.Partitions))
	quotaFull := b.leaderQuota.exceeded(now)
	anyNew, anyErr := false, false
	for i, fp := range req.Partitions {
		out := &resp.Partitions[i]
		out.TopicPartition = fp.TopicPartition
		ps := b.part(fp.TopicPartition)
		if ps == nil {
			out.Err, anyErr = ErrNotLeader, true
			continue
		}
		ps.mu.Lock()
		ans := b.runLeader(ps, ps.pm.Step(now, machine.FollowerFetch{
			Replica: req.ReplicaID, LeaderEpoch: fp.CurrentLeaderEpoch, FetchOffset: fp.FetchOffset,
			LastFetchedEpoch: fp.LastFetchedEpoch, LogStart: fp.LogStartOffset,
		}, nil))
		outOfSync := isThrottled(ps, b.leaderQuota, leaderListed, leaderUnset) && !slices.Contains(ps.pm.ISR(), req.ReplicaID)
		ps.mu.Unlock()
		if ans == nil {
			out.Err, anyErr = ErrNotLeader, true
			continue
		}
		out.Err, out.Diverging = ans.Err, ans.Diverging
		out.HighWatermark, out.LogStartOffset, out.LogEndOffset = ans.HW, ans.LogStart, ans.LogEnd
		if ans.Err != nil || ans.Diverging != nil {
			anyErr = true
			continue
		}
		ready[i] = ps
		throttled[i] = outOfSync
		if fp.FetchOffset < ans.LogEnd && !(outOfSync && quotaFull) {
			anyNew = true
		}
	}
	if !anyNew && !anyErr && req.MaxWait > 0 {
		op := &changeOp{logEnd: true}
		var keys []log.TopicPartition
		for i, ps := range ready {
			if ps != nil {
				op.watch(ps.p, req.Partitions[i].FetchOffset, resp.Partitions[i].HighWatermark)
				keys = append(keys, ps.tp)
			}
		}
		b.park(ctx, op, time.Duration(req.MaxWait)*time.Millisecond, keys)
	}
	for i, ps := range ready {
		if ps == nil {
			continue
		}
		fp, out := req.Partitions[i], &resp.Partitions[i]
		end := ps.p.EndOffset()
		out.LogEndOffset = end
		out.HighWatermark = max(out.HighWatermark, min(ps.p.HighWatermark(), end))
		out.LogStartOffset = ps.p.StartOffset()
		if fp.FetchOffset >= end || throttled[i] && b.leaderQuota.exceeded(b.cfg.Clock.Now()) {
			continue
		}
		recs, err := ps.p.Slice(fp.FetchOffset, max(fp.MaxBytes, 1), end)
		if err != nil {
			out.Err = err // log.ErrOffsetOutOfRange is ErrOffsetOutOfRange
			continue
		}
		out.Records = recs
		if throttled[i] {
			b.leaderQuota.record(b.cfg.Clock.Now(), recs.Len())
		}
	}
	return resp, nil
}

// serveEpochEnd answers OffsetForLeaderEpoch from the leader's cache.
func (b *Broker) serveEpochEnd(req transport.EpochEndRequest) transport.EpochEndAnswer {
	ps := b.part(req.TopicPartition)
	if ps == nil {
		return transport.EpochEndAnswer{Err: ErrNotLeader}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch {
	case !ps.pm.Leading():
		return transport.EpochEndAnswer{Err: ErrNotLeader}
	case req.CurrentLeaderEpoch != machine.NoEpoch && req.CurrentLeaderEpoch < ps.pm.LeaderEpoch():
		return transport.EpochEndAnswer{Err: ErrFencedLeaderEpoch}
	case req.CurrentLeaderEpoch > ps.pm.LeaderEpoch():
		return transport.EpochEndAnswer{Err: ErrUnknownLeaderEpoch}
	}
	e, end := ps.p.EndOffsetForEpoch(req.Epoch)
	return transport.EpochEndAnswer{End: machine.EpochEnd{Epoch: e, EndOffset: end}}
}

// produceLocal appends a batch as the partition's leader. With AcksAll it
// refuses when the ISR is below MinInSyncReplicas, then waits until the HW
// covers the batch (Kafka's DelayedProduce), the context ends or the
// produce timeout passes.
func (b *Broker) produceLocal(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	ps := b.part(tp)
	if ps == nil {
		return log.ProduceResult{}, b.notHereErr(tp)
	}
	ps.mu.Lock()
	// removed: the replica went (moved away, or its topic deleted) while
	// this produce waited for the lock; its machine was never told.
	if ps.removed || !ps.pm.Leading() || b.fenced.Load() {
		ps.mu.Unlock()
		return log.ProduceResult{}, fmt.Errorf("%w: %s-%d on broker %d", log.ErrNotLeader, tp.Topic, tp.Partition, b.cfg.ID)
	}
	if acks == log.AcksAll {
		if err := ps.pm.CheckProduce(); err != nil { // ErrNotEnoughReplicas, log's
			ps.mu.Unlock()
			return log.ProduceResult{}, err
		}
	}
	base, next, err := ps.p.AppendBatch(batch)
	order.Placed(ctx) // the next produce to tp may append (order.go)
	if err != nil {
		ps.mu.Unlock()
		return log.ProduceResult{}, err
	}
	now := b.cfg.Clock.Now()
	b.runLeader(ps, ps.pm.Step(now, machine.Appended{LogEnd: ps.p.EndOffset()}, nil))
	res := log.ProduceResult{BaseOffset: base, LogAppendTime: -1, LogStartOffset: ps.p.StartOffset()}
	if acks != log.AcksAll {
		ps.mu.Unlock()
		return res, nil
	}
	tok := b.tokens.Add(1)
	ch := make(chan error, 1)
	ps.waiters[tok] = ch
	b.runLeader(ps, ps.pm.Step(now, machine.AwaitProduce{Token: tok, Required: next}, nil))
	ps.mu.Unlock()
	if b.cfg.Metrics != nil {
		b.delayedProduce(1)
		defer b.delayedProduce(-1)
	}

	timeout := b.cfg.ProduceTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	answer, gaveUp := b.awaitReplicated(ctx, ps, now, tok, ch, timeout)
	if gaveUp != nil {
		return log.ProduceResult{}, fmt.Errorf("replica: produce to %s-%d at %d not replicated: %w", tp.Topic, tp.Partition, base, gaveUp)
	}
	return res, answer
}

// awaitReplicated waits for the answer to the AwaitProduce tok (on ch):
// the ISR has the records, or an error (mapped to log's). It gives up at
// timeout, ctx's end or the member's close, cancelling the wait, and
// returns why in gaveUp — unless the answer came meanwhile.
func (b *Broker) awaitReplicated(ctx context.Context, ps *partState, now time.Time, tok uint64, ch chan error, timeout time.Duration) (answer, gaveUp error) {
	t := b.cfg.Clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return mapReplicaErr(err), nil
	case <-ctx.Done():
		gaveUp = ctx.Err()
	case <-t.C():
		gaveUp = context.DeadlineExceeded
	case <-b.ctx.Done():
		gaveUp = log.ErrClosed
	}
	ps.mu.Lock()
	if _, ok := ps.waiters[tok]; ok {
		delete(ps.waiters, tok)
		ps.pm.Step(now, machine.CancelProduce{Token: tok}, nil)
		ps.mu.Unlock()
		return nil, gaveUp
	}
	ps.mu.Unlock()
	return mapReplicaErr(<-ch), nil // answered meanwhile
}

// mapReplicaErr maps the machines' errors to log's, which clients know:
// ErrNotLeader and ErrNotEnoughReplicas are log's already,
// ErrNotEnoughReplicasAfterAppend is a log.ErrNotEnoughReplicas to them.
func mapReplicaErr(err error) error {
	if errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		return fmt.Errorf("%w: %w", log.ErrNotEnoughReplicas, err)
	}
	return err
}

func (b *Broker) notHereErr(tp log.TopicPartition) error {
	n, ok := b.img.Load().PartitionCount(tp.Topic)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", log.ErrUnknownTopic, tp.Topic)
	case tp.Partition < 0 || tp.Partition >= n:
		return fmt.Errorf("%w: %s-%d", log.ErrUnknownPartition, tp.Topic, tp.Partition)
	}
	return fmt.Errorf("%w: %s-%d on broker %d", log.ErrNotLeader, tp.Topic, tp.Partition, b.cfg.ID)
}

// fetchLocal answers a consumer's fetch (or a replica-isolation read) of
// partitions this member leads, below the HW, waiting up to MaxWait for
// one of them to have something new (MinBytes is taken as 1).
func (b *Broker) fetchLocal(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	if len(req.Partitions) == 0 {
		return log.FetchResponse{}, fmt.Errorf("%w: fetch of no partition", log.ErrInvalidRequest)
	}
	maxWait := req.MaxWait
	if maxWait == 0 {
		maxWait = 500 * time.Millisecond
	}
	resp, n, failed := b.readLocal(req)
	if n > 0 || failed || maxWait <= 0 {
		return resp, nil
	}
	op := &changeOp{logEnd: req.Isolation == log.FetchLogEnd || req.ReplicaID > 0}
	keys := make([]log.TopicPartition, 0, len(req.Partitions))
	for i, fp := range req.Partitions {
		if ps := b.part(fp.TopicPartition); ps != nil {
			op.watch(ps.p, fp.Offset, resp.Partitions[i].HighWatermark)
			keys = append(keys, fp.TopicPartition)
		}
	}
	resp.Release()
	if err := b.park(ctx, op, maxWait, keys); err != nil {
		return log.FetchResponse{}, err
	}
	resp, _, _ = b.readLocal(req)
	return resp, nil
}

func (b *Broker) readLocal(req log.FetchRequest) (resp log.FetchResponse, n int64, failed bool) {
	maxBytes, partMax := req.MaxBytes, req.PartitionMaxBytes
	if maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	if partMax <= 0 {
		partMax = 1 << 20
	}
	resp.Partitions = make([]log.FetchedPartition, len(req.Partitions))
	for i, fp := range req.Partitions {
		out := &resp.Partitions[i]
		out.TopicPartition = fp.TopicPartition
		ps := b.part(fp.TopicPartition)
		if ps == nil || !ps.leading.Load() {
			out.Err, failed = b.notHereErr(fp.TopicPartition), true
			continue
		}
		p := ps.p
		hw := p.HighWatermark()
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = hw, readCommittedBound(p, hw), p.StartOffset()
		bound := hw
		if req.Isolation == log.FetchLogEnd || req.ReplicaID > 0 {
			bound = p.EndOffset()
		}
		committed := req.Isolation == log.FetchTxnCommitted && req.ReplicaID <= 0
		if committed { // below the LSO, itself below the HW (txn_read.go)
			bound = out.LastStableOffset
		}
		budget := min(partMax, maxBytes-int(n))
		if fp.MaxBytes > 0 {
			budget = min(fp.MaxBytes, maxBytes-int(n))
		}
		if budget <= 0 && n > 0 {
			continue
		}
		if fp.Offset >= bound && fp.Offset <= p.EndOffset() {
			continue
		}
		recs, err := p.Slice(fp.Offset, max(budget, 1), bound)
		if err != nil {
			out.Err, failed = err, true
			continue
		}
		if committed && recs.Len() > 0 {
			if out.AbortedTransactions, err = abortedBelow(p, fp.Offset, bound); err != nil {
				recs.Release()
				out.Err, failed = err, true
				continue
			}
		}
		out.Records = recs
		n += recs.Len()
	}
	return resp, n, failed
}

// listOffsetLocal answers ListOffset as the partition's leader.
func (b *Broker) listOffsetLocal(tp log.TopicPartition, at int64) (int64, error) {
	ps := b.part(tp)
	if ps == nil || !ps.leading.Load() {
		return 0, b.notHereErr(tp)
	}
	p := ps.p
	switch {
	case at == log.EarliestOffset:
		return p.StartOffset(), nil
	case at == log.LatestOffset:
		return p.HighWatermark(), nil
	case at == log.LatestStableOffset: // READ_COMMITTED (txn_read.go)
		return readCommittedBound(p, p.HighWatermark()), nil
	case at < 0:
		return 0, fmt.Errorf("%w: ListOffset at %d", log.ErrInvalidRequest, at)
	}
	off, err := p.OffsetForTime(time.UnixMilli(at))
	if err != nil {
		return 0, err
	}
	return min(off, p.HighWatermark()), nil
}

// park waits in the purgatory until op completes (a watched partition
// changed), wait passes, ctx ends or the member closes.
func (b *Broker) park(ctx context.Context, op *changeOp, wait time.Duration, keys []log.TopicPartition) error {
	op.done = make(chan struct{})
	d, done := b.purgatory.TryCompleteElseWatch(op, wait, keys...)
	if done {
		return nil
	}
	if b.cfg.Metrics != nil {
		b.reportFetchPurgatory()
		defer b.reportFetchPurgatory()
	}
	select {
	case <-op.done:
		return nil
	case <-ctx.Done():
		if !d.Cancel() {
			<-op.done
		}
		return ctx.Err()
	case <-b.ctx.Done():
		if !d.Cancel() {
			<-op.done
		}
		return log.ErrClosed
	}
}

// changeOp is a fetch parked until one of its partitions has records past
// the offset it reads from, or a HW other than the one it last answered.
// A replica's fetch (logEnd) waits for records only, as Kafka's
// DelayedFetch with the LOG_END isolation: a follower learns the HW with
// its next answer (the next records, or MaxWait), not with an answer of
// its own for each HW move, which on the acks=all path came just as the
// produce was being answered.
type changeOp struct {
	parts   []*log.Partition
	offsets []int64
	hws     []int64
	logEnd  bool // a replica's: records up to the log end count too
	done    chan struct{}
}

func (o *changeOp) watch(p *log.Partition, offset, hw int64) {
	o.parts = append(o.parts, p)
	o.offsets = append(o.offsets, offset)
	o.hws = append(o.hws, hw)
}

func (o *changeOp) TryComplete() bool {
	for i, p := range o.parts {
		end := p.EndOffset()
		if !o.logEnd && p.HighWatermark() != o.hws[i] || end < o.offsets[i] || o.logEnd && end > o.offsets[i] {
			return true
		}
	}
	return false
}

func (o *changeOp) OnComplete()   { close(o.done) }
func (o *changeOp) OnExpiration() {}
