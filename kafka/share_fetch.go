package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

// ShareFetch and ShareAcknowledge (KIP-932). A share session (epoch 0 to
// open, then each request at the epoch after the last, -1 to close) holds
// the partitions a member fetches; a fetch acknowledges what the request
// carries, then acquires at most MaxRecords records across the session's
// partitions for the member and returns their batches with the acquired
// ranges and delivery counts, waiting up to MaxWait for records when none
// could be acquired.

// shareAck is one partition's acknowledgements in a request.
type shareAck struct {
	t       log.TopicPartition
	id      [16]byte
	batches []share.AckBatch
	code    int16 // a malformed batch or unknown topic: answered without applying
}

// shareAcks converts a request's acknowledgement batches; renew allows
// type 4 (IsRenewAck, v2).
func (c *conn) shareAcks(topics []shareAckTopic, renew bool) []shareAck {
	var out []shareAck
	for _, t := range topics {
		name, known := c.s.topicName(t.id)
		for _, p := range t.parts {
			if len(p.batches) == 0 {
				continue
			}
			a := shareAck{t: log.TopicPartition{Topic: name, Partition: int(p.partition)}, id: t.id}
			if !known {
				a.code = errUnknownTopicID
			}
			for _, b := range p.batches {
				ab := share.AckBatch{First: b.first, Last: b.last}
				for _, typ := range b.types {
					if typ == int8(share.AckRenew) && !renew {
						a.code = errInvalidRequest
					}
					ab.Types = append(ab.Types, share.AckType(typ))
				}
				a.batches = append(a.batches, ab)
			}
			out = append(out, a)
		}
	}
	return out
}

// shareAckTopic is a request's acknowledgements of one topic, whichever
// request carried them.
type shareAckTopic struct {
	id    [16]byte
	parts []shareAckPart
}

type shareAckPart struct {
	partition int32
	batches   []shareAckBatch
}

type shareAckBatch struct {
	first, last int64
	types       []int8
}

// apply applies acks for member of group, each partition's all or none,
// and returns each one's code.
func (s *shareServer) apply(ctx context.Context, group, member string, acks []shareAck) {
	for i := range acks {
		a := &acks[i]
		if a.code != errNone {
			continue
		}
		a.code = errorCode(s.coord().Acknowledge(ctx, group, member, a.t, a.batches))
	}
}

func handleShareFetch(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	ss := c.s.caps.shares
	var group, member string
	if req.GroupID != nil {
		group = *req.GroupID
	}
	if req.MemberID != nil {
		member = *req.MemberID
	}
	resp.AcquisitionLockTimeoutMillis = int32(ss.coord().LockDuration(group) / time.Millisecond)
	fail := func(code int16, msg string) reply {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return reply{resp: resp}
	}
	renew := req.Version >= 2 && req.IsRenewAck
	switch {
	case group == "":
		return fail(errInvalidGroupID, "GroupId can't be empty")
	case member == "" || len(member) > maxShareMemberIDLen:
		return fail(errInvalidRequest, "MemberId must be 1 to 36 characters")
	case renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0):
		return fail(errInvalidRequest, "a renew acknowledgement fetches nothing")
	case req.ShareAcquireMode != 0 && req.ShareAcquireMode != shareAcquireRecordLimit:
		return fail(errInvalidRequest, fmt.Sprintf("unknown ShareAcquireMode %d", req.ShareAcquireMode))
	case c.s.groups != nil && groupTaken(c.s, group):
		return fail(errGroupIDNotFound, "Group "+group+" is not a share group.")
	}
	var ackTopics []shareAckTopic
	var reqParts []log.TopicPartition
	out := newShareFetchOut(resp)
	for _, t := range req.Topics {
		at := shareAckTopic{id: t.TopicID}
		name, known := c.s.topicName(t.TopicID)
		for _, p := range t.Partitions {
			ap := shareAckPart{partition: p.Partition}
			for _, b := range p.AcknowledgementBatches {
				ap.batches = append(ap.batches, shareAckBatch{first: b.FirstOffset, last: b.LastOffset, types: b.AcknowledgeTypes})
			}
			if renew && len(ap.batches) == 0 {
				return fail(errInvalidRequest, "a renew acknowledgement fetches nothing")
			}
			at.parts = append(at.parts, ap)
			if !known {
				out.part(t.TopicID, p.Partition).ErrorCode = errUnknownTopicID
				continue
			}
			reqParts = append(reqParts, log.TopicPartition{Topic: name, Partition: int(p.Partition)})
		}
		ackTopics = append(ackTopics, at)
	}
	acks := c.shareAcks(ackTopics, renew)
	key := shareSessionKey{group, member}

	var sess *shareSession
	switch req.ShareSessionEpoch {
	case 0:
		if len(acks) > 0 {
			return fail(errInvalidRequest, "a new share session acknowledges nothing")
		}
		var code int16
		if sess, code = ss.open(c, key, reqParts); code != errNone {
			return fail(code, "")
		}
	case -1:
		if !ss.exists(key) {
			return fail(errShareSessionNotFound, "")
		}
		ss.apply(ctx, group, member, acks)
		out.acks(acks)
		ss.close(key)
		return reply{resp: resp}
	default:
		var code int16
		if sess, code = ss.lookup(key, req.ShareSessionEpoch); code != errNone {
			return fail(code, "")
		}
	}
	ss.apply(ctx, group, member, acks)
	out.acks(acks)
	parts := ss.update(key, sess, reqParts, c.forgotten(req.ForgottenTopicsData))
	if renew {
		return reply{resp: resp}
	}
	if req.ShareSessionEpoch == 0 {
		for _, t := range parts {
			out.part(topicID(t.Topic), int32(t.Partition)) // a full answer names every partition
		}
	}
	max := int(req.MaxRecords)
	if max <= 0 {
		max = defaultShareMaxRecords
	}
	budget := int(req.MaxBytes)
	if budget <= 0 || budget > defaultShareFetchMaxBytesCap {
		budget = defaultShareFetchMaxBytesCap
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	for attempt := 0; ; attempt++ {
		watch := ss.coord().Watch()
		n := c.shareAcquire(ctx, group, member, parts, shareLimits{max: max, budget: budget, whole: req.ShareAcquireMode != shareAcquireRecordLimit}, out)
		if n > 0 || wait <= 0 || attempt > 0 || ctx.Err() != nil {
			break
		}
		c.shareWait(ctx, parts, wait, watch)
	}
	return reply{resp: resp}
}

// groupTaken reports whether group is a classic or consumer group.
func groupTaken(s *Server, group string) bool {
	_, ok := s.groups.Type(group)
	return ok
}

// forgotten names the partitions a request drops from its session.
func (c *conn) forgotten(ft []kmsg.ShareFetchRequestForgottenTopicsData) []log.TopicPartition {
	var out []log.TopicPartition
	for _, t := range ft {
		name, ok := c.s.topicName(t.TopicID)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			out = append(out, log.TopicPartition{Topic: name, Partition: int(p)})
		}
	}
	return out
}

// update adds and drops partitions of session sess of key, moves it to
// its next epoch and returns its partitions.
func (s *shareServer) update(key shareSessionKey, sess *shareSession, add, forget []log.TopicPartition) []log.TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range add {
		sess.add(t)
	}
	for _, t := range forget {
		for i, p := range sess.parts {
			if p == t {
				sess.parts = append(sess.parts[:i], sess.parts[i+1:]...)
				break
			}
		}
	}
	sess.next()
	// Each fetch starts one partition further, so that a partition with
	// a backlog of MaxRecords does not starve the ones after it.
	out := make([]log.TopicPartition, 0, len(sess.parts))
	if n := len(sess.parts); n > 0 {
		sess.turn = (sess.turn + 1) % n
		out = append(append(out, sess.parts[sess.turn:]...), sess.parts[:sess.turn]...)
	}
	return out
}

// shareAcquireRecordLimit is ShareFetch's ShareAcquireMode record_limit
// (KIP-1206): MaxRecords is strict. The default, batch_optimized (0, and
// every fetch before v2), acquires whole batches: MaxRecords is soft.
const shareAcquireRecordLimit = 1

// shareLimits bounds what a share fetch acquires.
type shareLimits struct {
	max    int  // records, in all (soft if whole)
	budget int  // bytes of batches
	whole  bool // acquire the rest of the last batch read of each partition
}

// shareAcquire acquires records of parts for member within lim, puts
// them in out and returns how many.
func (c *conn) shareAcquire(ctx context.Context, group, member string, parts []log.TopicPartition, lim shareLimits, out *shareFetchOut) int {
	coord := c.s.caps.shares.coord()
	total, max, budget := 0, lim.max, lim.budget
	for _, t := range parts {
		if total >= max || budget <= 0 {
			break
		}
		ranges, err := coord.Acquire(ctx, group, member, t, max-total)
		if err != nil {
			out.part(topicID(t.Topic), int32(t.Partition)).ErrorCode = groupCode(ctx, err)
			continue
		}
		if len(ranges) == 0 {
			continue
		}
		recs, next, err := c.shareRead(ctx, t, ranges[0].First, ranges[len(ranges)-1].Last, budget)
		if err != nil {
			c.logger.Debug("kafka: share fetch read", "partition", t, "err", err)
		}
		if next <= ranges[len(ranges)-1].Last {
			// The records past next did not fit (or could not be read):
			// back to the others, their delivery not counted.
			coord.Unacquire(group, member, t, next)
			ranges = trimRanges(ranges, next)
		}
		if len(ranges) == 0 {
			continue
		}
		if last := ranges[len(ranges)-1].Last; lim.whole && next-1 > last {
			// The last batch read holds records past the last acquired:
			// they go to the member too (KIP-1206's whole batches), not
			// sent again to the next fetch.
			if r, ok, err := coord.AcquireRest(ctx, group, member, t, last, next-1); err == nil && ok {
				ranges = appendAcquired(ranges, r)
			}
		}
		p := out.part(topicID(t.Topic), int32(t.Partition))
		if len(p.Records) == 0 {
			p.Records = recs // no copy: the read's buffer is this response's
		} else {
			p.Records = append(p.Records, recs...)
		}
		for _, ar := range ranges {
			a := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			a.FirstOffset, a.LastOffset, a.DeliveryCount = ar.First, ar.Last, ar.DeliveryCount
			p.AcquiredRecords = append(p.AcquiredRecords, a)
			total += int(ar.Last - ar.First + 1)
		}
		budget -= len(recs)
	}
	return total
}

// appendAcquired appends r to rs, merged with the last range if it
// continues it at the same delivery count.
func appendAcquired(rs []share.AcquiredRange, r share.AcquiredRange) []share.AcquiredRange {
	if k := len(rs) - 1; k >= 0 && rs[k].Last+1 == r.First && rs[k].DeliveryCount == r.DeliveryCount {
		rs[k].Last = r.Last
		return rs
	}
	return append(rs, r)
}

// trimRanges keeps the acquired offsets before next.
func trimRanges(rs []share.AcquiredRange, next int64) []share.AcquiredRange {
	out := rs[:0]
	for _, r := range rs {
		if r.First >= next {
			break
		}
		r.Last = min(r.Last, next-1)
		out = append(out, r)
	}
	return out
}

// shareRead reads the batches of t that hold offsets first to last, as
// far as budget bytes allow (at least one batch), and returns them and the
// offset after the last one. It reads no batch past last: a fetch of the
// log is bounded in bytes only, so each read asks for about what the
// offsets left take at the size per offset seen so far (shareReadFirst at
// first), and the batches past last it brought are dropped.
func (c *conn) shareRead(ctx context.Context, t log.TopicPartition, first, last int64, budget int) ([]byte, int64, error) {
	var out []byte
	off := first
	want := shareReadFirst
	for off <= last && len(out) < budget {
		want = min(want, budget-len(out))
		fr, err := c.s.b.Fetch(ctx, log.FetchRequest{
			Partitions: []log.FetchPartition{{TopicPartition: t, Offset: off, MaxBytes: want}},
			MaxBytes:   want, MaxWait: time.Nanosecond,
		})
		if err != nil {
			return out, off, err
		}
		if len(fr.Partitions) != 1 {
			fr.Release()
			return out, off, fmt.Errorf("kafka: share fetch of %s: %d partitions read", t, len(fr.Partitions))
		}
		fp := fr.Partitions[0]
		if fp.Err != nil {
			fr.Release()
			return out, off, fp.Err
		}
		b, err := fp.Records.Bytes()
		fr.Release()
		if err != nil {
			return out, off, err
		}
		keep, next, err := batchesThrough(b, off, last)
		if err != nil || next <= off {
			return out, off, err
		}
		if out == nil {
			out = b[:keep:keep]
		} else {
			out = append(out, b[:keep]...)
		}
		off = next
		// The next read: the offsets left at the bytes per offset so far,
		// and a quarter more for batch boundaries.
		perOffset := len(out)/int(off-first) + 1
		want = max(shareReadFirst/4, perOffset*int(last+1-off)*5/4)
	}
	return out, off, nil
}

// shareReadFirst is the bytes a share fetch first reads of a partition.
const shareReadFirst = 64 << 10

// batchesThrough walks the batch headers of b, read from offset from on,
// and returns the length of the batches that start at or before last and
// the offset after the last of them. The batches come from the log, which
// checked them when they were appended: only their headers are read.
func batchesThrough(b []byte, from, last int64) (keep int, next int64, err error) {
	next = from
	for keep < len(b) {
		size, err := batch.PeekSize(b[keep:])
		if err != nil || size > len(b)-keep {
			break // a read cut short inside a batch: keep the whole ones
		}
		h, err := batch.ParseHeader(b[keep:])
		if err != nil {
			return keep, next, err
		}
		if keep > 0 && h.BaseOffset > last {
			break
		}
		keep += size
		next = max(next, h.NextOffset())
	}
	return keep, next, nil
}

// shareWait waits up to wait for records appended to parts or records
// released (watch), or ctx's end.
func (c *conn) shareWait(ctx context.Context, parts []log.TopicPartition, wait time.Duration, watch <-chan struct{}) {
	req := log.FetchRequest{MinBytes: 1, MaxBytes: 1, MaxWait: wait}
	for _, t := range parts {
		end, err := c.s.b.ListOffset(ctx, t, log.LatestOffset)
		if err != nil {
			continue
		}
		req.Partitions = append(req.Partitions, log.FetchPartition{TopicPartition: t, Offset: end, MaxBytes: 1})
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // ends with wctx, which the caller cancels before it returns
		defer close(done)
		select {
		case <-watch:
			cancel()
		case <-wctx.Done():
		}
	}()
	if len(req.Partitions) == 0 {
		select {
		case <-wctx.Done():
		case <-time.After(wait):
		}
	} else if fr, err := c.s.b.Fetch(wctx, req); err == nil {
		fr.Release()
	}
	cancel()
	<-done
}

// shareFetchOut builds a ShareFetch response, one entry per partition.
type shareFetchOut struct {
	resp  *kmsg.ShareFetchResponse
	index map[[16]byte]int // topic id → its index in resp.Topics
}

func newShareFetchOut(resp *kmsg.ShareFetchResponse) *shareFetchOut {
	return &shareFetchOut{resp: resp, index: map[[16]byte]int{}}
}

// part returns the response's entry of partition p of topic id, made if
// need be.
func (o *shareFetchOut) part(id [16]byte, p int32) *kmsg.ShareFetchResponseTopicPartition {
	i, ok := o.index[id]
	if !ok {
		i = len(o.resp.Topics)
		o.index[id] = i
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = id
		o.resp.Topics = append(o.resp.Topics, t)
	}
	t := &o.resp.Topics[i]
	for j := range t.Partitions {
		if t.Partitions[j].Partition == p {
			return &t.Partitions[j]
		}
	}
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Partition = p
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
	rp.Records = []byte{}
	t.Partitions = append(t.Partitions, rp)
	return &t.Partitions[len(t.Partitions)-1]
}

// acks puts the acknowledgements' codes in the response.
func (o *shareFetchOut) acks(acks []shareAck) {
	for _, a := range acks {
		o.part(a.id, int32(a.t.Partition)).AcknowledgeErrorCode = a.code
	}
}

func handleShareAcknowledge(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	ss := c.s.caps.shares
	var group, member string
	if req.GroupID != nil {
		group = *req.GroupID
	}
	if req.MemberID != nil {
		member = *req.MemberID
	}
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(ss.coord().LockDuration(group) / time.Millisecond)
	}
	fail := func(code int16, msg string) reply {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return reply{resp: resp}
	}
	switch {
	case group == "":
		return fail(errInvalidGroupID, "GroupId can't be empty")
	case member == "" || len(member) > maxShareMemberIDLen:
		return fail(errInvalidRequest, "MemberId must be 1 to 36 characters")
	case req.ShareSessionEpoch == 0:
		return fail(errInvalidShareSessionEpoch, "ShareAcknowledge cannot open a share session")
	}
	var topics []shareAckTopic
	for _, t := range req.Topics {
		at := shareAckTopic{id: t.TopicID}
		for _, p := range t.Partitions {
			ap := shareAckPart{partition: p.Partition}
			for _, b := range p.AcknowledgementBatches {
				ap.batches = append(ap.batches, shareAckBatch{first: b.FirstOffset, last: b.LastOffset, types: b.AcknowledgeTypes})
			}
			at.parts = append(at.parts, ap)
		}
		topics = append(topics, at)
	}
	acks := c.shareAcks(topics, req.Version >= 2 && req.IsRenewAck)
	key := shareSessionKey{group, member}
	if req.ShareSessionEpoch == -1 {
		if !ss.exists(key) {
			return fail(errShareSessionNotFound, "")
		}
	} else {
		sess, code := ss.lookup(key, req.ShareSessionEpoch)
		if code != errNone {
			return fail(code, "")
		}
		ss.update(key, sess, nil, nil)
	}
	ss.apply(ctx, group, member, acks)
	if req.ShareSessionEpoch == -1 {
		ss.close(key)
	}
	index := map[[16]byte]int{}
	for _, a := range acks {
		i, ok := index[a.id]
		if !ok {
			i = len(resp.Topics)
			index[a.id] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = a.id
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition, p.ErrorCode = int32(a.t.Partition), a.code
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return reply{resp: resp}
}
