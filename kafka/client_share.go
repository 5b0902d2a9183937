package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/tp"
)

// Share groups (KIP-932) of the Client, so that a log.ShareConsumer runs
// over kafka.Dial against Strata or any Kafka 4.2+: ShareGroupHeartbeat
// goes to the group's coordinator, ShareFetch and ShareAcknowledge to each
// partition's leader, in a share session per member and leader. A session
// belongs to the connection that opened it (the broker releases the
// member's records when it closes), so each has a connection of its own:
// its long polls hold back no other request. A fetch opens the session at
// epoch 0 with every partition the member fetches from that leader, then
// carries the next epoch, the partitions added, those dropped
// (ForgottenTopicsData) and the acknowledgements of the member's records
// there, piggy-backed. The offsets a fetch acquired that hold no record
// (compacted away, transaction markers) are acknowledged as gaps with the
// session's next request.

// Versions of the share APIs the client speaks: v1 is Kafka 4.1's first
// (v0 was the early access); v2 adds lock renewal (KIP-1222), which the
// client does not use, and to ShareFetch the acquire mode (KIP-1206): the
// client asks for record_limit, so that a broker of v2 acquires at most
// MaxRecords (one of v1 takes whole batches, MaxRecords a soft limit).
const (
	clientShareGroupHeartbeatMax = 1
	clientShareFetchMax          = 2
	clientShareAcknowledgeMax    = 1
)

var _ log.ShareClient = (*Client)(nil)

// shareSessions are the Client's share sessions.
type shareSessions struct {
	mu   sync.Mutex
	m    map[shareSessionID]*clientShareSession
	turn atomic.Uint64 // ShareFetches so far: whose turn to fetch more (shareQuotas)
}

type shareSessionID struct{ group, member, addr string }

// clientShareSession is a share session with one broker. mu serializes
// its requests: each carries the epoch after the last one's.
type clientShareSession struct {
	mu    sync.Mutex
	bc    *brokerConn // nil: to dial
	epoch int32       // of the next request; 0: to open
	parts []log.TopicPartition
	gaps  map[log.TopicPartition][]share.AckBatch // to acknowledge with the next request
}

// session returns the session of member with the broker at addr.
func (c *Client) session(group, member, addr string) *clientShareSession {
	c.shares.mu.Lock()
	defer c.shares.mu.Unlock()
	if c.shares.m == nil {
		c.shares.m = map[shareSessionID]*clientShareSession{}
	}
	id := shareSessionID{group, member, addr}
	s := c.shares.m[id]
	if s == nil {
		s = &clientShareSession{}
		c.shares.m[id] = s
	}
	return s
}

// endSessions forgets member's sessions and closes their connections (the
// brokers end them).
func (c *Client) endSessions(group, member string) {
	c.shares.mu.Lock()
	var ended []*clientShareSession
	for id, s := range c.shares.m {
		if id.group == group && id.member == member {
			ended = append(ended, s)
			delete(c.shares.m, id)
		}
	}
	c.shares.mu.Unlock()
	for _, s := range ended {
		s.mu.Lock()
		s.reset(c)
		s.mu.Unlock()
	}
}

// conn returns the session's connection, dialing one if it has none or
// its connection broke (the broker ended the session with it: it opens
// anew). s.mu is held.
func (s *clientShareSession) conn(ctx context.Context, c *Client, addr string) (*brokerConn, error) {
	if s.bc != nil && s.bc.broken() {
		s.reset(c)
	}
	if s.bc == nil {
		bc, err := c.takeExclusive(ctx, addr)
		if err != nil {
			return nil, err
		}
		if bc.versions[shareFetchKey] < 1 {
			c.putExclusive(addr, bc, true)
			return nil, fmt.Errorf("kafka: %s does not serve ShareFetch v1+ (Kafka 4.1+)", addr)
		}
		s.bc = bc
	}
	return s.bc, nil
}

// reset closes the session's connection and starts it anew. s.mu is held.
func (s *clientShareSession) reset(c *Client) {
	if s.bc != nil {
		c.putExclusive(s.bc.addr, s.bc, false)
	}
	s.bc, s.epoch, s.parts, s.gaps = nil, 0, nil, nil
}

// next moves the session to its next epoch (1 after the largest).
func (s *clientShareSession) next() {
	if s.epoch == 1<<31-1 {
		s.epoch = 1
		return
	}
	s.epoch++
}

// ShareHeartbeat joins (MemberEpoch 0), keeps in, or leaves (-1) a share
// group with Kafka's ShareGroupHeartbeat at its coordinator, with the
// semantics of share.Coordinator.Heartbeat. A leave also ends the
// member's share sessions. The request's ClientID and ClientHost are not
// sent: the coordinator knows them from the connection.
func (c *Client) ShareHeartbeat(ctx context.Context, req share.HeartbeatRequest) (share.HeartbeatResponse, error) {
	kr := kmsg.NewPtrShareGroupHeartbeatRequest()
	kr.GroupID, kr.MemberID, kr.MemberEpoch, kr.RackID = req.Group, req.MemberID, req.MemberEpoch, req.RackID
	kr.SubscribedTopicNames = slices.Clone(req.SubscribedTopics)
	if req.MemberEpoch < 0 {
		defer c.endSessions(req.Group, req.MemberID)
	}
	resp, err := c.groupDo(ctx, req.Group, false, kr, clientShareGroupHeartbeatMax, func(r kmsg.Response) int16 {
		return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode
	})
	if err != nil {
		return share.HeartbeatResponse{}, fmt.Errorf("kafka: share group heartbeat to %q: %w", req.Group, err)
	}
	r := resp.(*kmsg.ShareGroupHeartbeatResponse)
	if err := codeError(r.ErrorCode); err != nil {
		if r.ErrorMessage != nil && *r.ErrorMessage != "" {
			return share.HeartbeatResponse{}, fmt.Errorf("kafka: share group heartbeat to %q: %w (%s)", req.Group, err, *r.ErrorMessage)
		}
		return share.HeartbeatResponse{}, fmt.Errorf("kafka: share group heartbeat to %q: %w", req.Group, err)
	}
	out := share.HeartbeatResponse{
		MemberID:          req.MemberID,
		MemberEpoch:       r.MemberEpoch,
		HeartbeatInterval: time.Duration(r.HeartbeatIntervalMillis) * time.Millisecond,
	}
	if r.MemberID != nil && *r.MemberID != "" {
		out.MemberID = *r.MemberID
	}
	if r.Assignment != nil {
		topics := make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(r.Assignment.TopicPartitions))
		for _, t := range r.Assignment.TopicPartitions {
			topics = append(topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
		if out.Assignment, err = c.assignmentByName(ctx, topics); err != nil {
			return share.HeartbeatResponse{}, fmt.Errorf("kafka: share group heartbeat to %q: %w", req.Group, err)
		}
	}
	return out, nil
}

// closedErr is log.ErrClosed (wrapped) once the Client is closed.
func (c *Client) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("kafka: client: %w", log.ErrClosed)
	}
	return nil
}

// leaderAddr returns the address of t's leader, refreshing the metadata
// once if it is not known.
func (c *Client) leaderAddr(ctx context.Context, t log.TopicPartition) (string, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		ls, ok := c.leaders[t.Topic]
		var addr string
		if ok && t.Partition >= 0 && t.Partition < len(ls) {
			addr = c.brokers[ls[t.Partition]]
		}
		c.mu.Unlock()
		switch {
		case addr != "":
			return addr, nil
		case attempt > 0 && !ok:
			return "", c.unknownTopic(ctx, t.Topic)
		case attempt > 0:
			return "", fmt.Errorf("%w: %s has no known leader", log.ErrNotLeader, t)
		}
		if err := c.refresh(ctx); err != nil {
			return "", err
		}
	}
}

// byLeader splits the partitions of parts and acks by their leaders'
// addresses.
func (c *Client) byLeader(ctx context.Context, parts []log.TopicPartition, acks map[log.TopicPartition][]share.AckBatch) (map[string]*leaderShare, error) {
	out := map[string]*leaderShare{}
	at := func(t log.TopicPartition) (*leaderShare, error) {
		addr, err := c.leaderAddr(ctx, t)
		if err != nil {
			return nil, err
		}
		ls := out[addr]
		if ls == nil {
			ls = &leaderShare{acks: map[log.TopicPartition][]share.AckBatch{}}
			out[addr] = ls
		}
		return ls, nil
	}
	for _, t := range parts {
		ls, err := at(t)
		if err != nil {
			return nil, err
		}
		ls.parts = append(ls.parts, t)
	}
	for t, bs := range acks {
		ls, err := at(t)
		if err != nil {
			return nil, err
		}
		ls.acks[t] = bs
	}
	return out, nil
}

// leaderShare is what a fetch or acknowledgement sends to one leader.
type leaderShare struct {
	parts []log.TopicPartition
	acks  map[log.TopicPartition][]share.AckBatch
}

// ShareFetch sends req's acknowledgements and acquires records of its
// partitions with Kafka's ShareFetch at each partition's leader, in
// parallel, up to req.MaxRecords in all (shared among the leaders, as
// Kafka's max.poll.records bounds a poll), each leader waiting up to
// req.MaxWait when it has none. Acknowledgements that failed are answered
// as a *log.ShareAckError with the records fetched. A partition that
// fails while others return records is asked again by the next fetch;
// its error is returned when no records came.
func (c *Client) ShareFetch(ctx context.Context, req log.ShareFetchRequest) ([]log.ShareRecord, error) {
	if err := c.closedErr(); err != nil {
		return nil, err
	}
	leaders, err := c.byLeader(ctx, req.Partitions, req.Acks)
	if err != nil {
		return nil, fmt.Errorf("kafka: share fetch: %w", err)
	}
	type result struct {
		recs   []log.ShareRecord
		failed map[log.TopicPartition]error // acknowledgements
		err    error
	}
	results := make([]result, 0, len(leaders))
	var mu sync.Mutex
	var wg sync.WaitGroup
	addrs := slices.Sorted(maps.Keys(leaders))
	max := req.MaxRecords
	if max <= 0 {
		max = clientShareMaxRecords
	}
	quotas := shareQuotas(max, len(addrs), c.shares.turn.Add(1)-1)
	for i, addr := range addrs {
		ls, lreq := leaders[addr], req
		lreq.MaxRecords = quotas[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r result
			switch {
			case lreq.MaxRecords > 0:
				r.recs, r.failed, r.err = c.shareFetchFrom(ctx, lreq, addr, ls)
			case len(ls.acks) > 0: // none of this leader's records this time
				r.failed = c.shareAckTo(ctx, req.Group, req.Member, addr, ls.acks)
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	var recs []log.ShareRecord
	var errs []error
	ackErr := &log.ShareAckError{Partitions: map[log.TopicPartition]error{}}
	for _, r := range results {
		recs = append(recs, r.recs...)
		if r.err != nil {
			errs = append(errs, r.err)
		}
		for t, err := range r.failed {
			ackErr.Partitions[t] = err
		}
	}
	switch {
	case len(ackErr.Partitions) > 0:
		return recs, ackErr
	case len(recs) == 0 && len(errs) > 0:
		return nil, errors.Join(errs...)
	}
	return recs, nil
}

// clientShareMaxRecords is the records a ShareFetch acquires when its
// MaxRecords is not set: Kafka's max.poll.records.
const clientShareMaxRecords = 500

// shareQuotas shares max records among n leaders: each gets max/n and
// the remainder goes one each to those from turn on (modulo n), so that
// with fewer records than leaders each leader's turn comes.
func shareQuotas(max, n int, turn uint64) []int {
	q := make([]int, n)
	if n == 0 {
		return q
	}
	for i := range q {
		q[i] = max / n
	}
	for k := range max % n {
		q[(int(turn%uint64(n))+k)%n]++
	}
	return q
}

// shareFetchFrom is ShareFetch at the leader at addr.
func (c *Client) shareFetchFrom(ctx context.Context, req log.ShareFetchRequest, addr string, ls *leaderShare) ([]log.ShareRecord, map[log.TopicPartition]error, error) {
	s := c.session(req.Group, req.Member, addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	bc, err := s.conn(ctx, c, addr)
	if err != nil {
		c.refreshQuiet(ctx) // the leader may be gone: the next fetch asks the one the metadata names now
		return nil, failAll(ls.acks, err), fmt.Errorf("kafka: share fetch from %s: %w", addr, err)
	}
	var failed map[log.TopicPartition]error
	acks := ls.acks
	if s.epoch == 0 && len(acks) > 0 {
		// A new session acknowledges nothing: the broker released what
		// the member held in the old one when it ended.
		failed = failAll(acks, fmt.Errorf("%w: the share session with %s ended", share.ErrInvalidRecordState, addr))
		acks = nil
	}
	if s.epoch > 0 {
		acks = withGaps(acks, s.gaps)
	}
	kr := kmsg.NewPtrShareFetchRequest()
	kr.GroupID, kr.MemberID, kr.ShareSessionEpoch = kmsg.StringPtr(req.Group), kmsg.StringPtr(req.Member), s.epoch
	wait := req.MaxWait
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	kr.MaxWaitMillis, kr.MinBytes, kr.MaxBytes = int32(wait.Milliseconds()), 1, 50<<20
	kr.MaxRecords, kr.BatchSize = int32(req.MaxRecords), int32(req.MaxRecords)
	if req.MaxRecords <= 0 {
		kr.MaxRecords, kr.BatchSize = clientShareMaxRecords, clientShareMaxRecords
	}
	kr.ShareAcquireMode = shareAcquireRecordLimit // v2: MaxRecords is strict, as in the process
	// The request names the partitions new to the session (all when it
	// opens) and those with acknowledgements.
	send := map[log.TopicPartition]bool{}
	for _, t := range ls.parts {
		if s.epoch == 0 || !slices.Contains(s.parts, t) {
			send[t] = true
		}
	}
	for t := range acks {
		send[t] = true
	}
	var forget []log.TopicPartition
	if s.epoch > 0 {
		for _, t := range s.parts {
			if !slices.Contains(ls.parts, t) {
				forget = append(forget, t)
			}
		}
	}
	names := make([]string, 0, len(send)+len(forget))
	for t := range send {
		names = append(names, t.Topic)
	}
	for _, t := range forget {
		names = append(names, t.Topic)
	}
	ids, _, err := c.topicIDsFor(ctx, names, nil)
	if err != nil {
		return nil, mergeFailed(failed, failAll(acks, err)), fmt.Errorf("kafka: share fetch from %s: %w", addr, err)
	}
	topicAt := map[[16]byte]int{}
	for _, t := range slices.SortedFunc(maps.Keys(send), tp.Compare) {
		id, ok := ids[t.Topic]
		if !ok {
			failed = mergeFailed(failed, failAll(map[log.TopicPartition][]share.AckBatch{t: acks[t]}, fmt.Errorf("%w: %s", log.ErrUnknownTopic, t.Topic)))
			continue
		}
		i, ok := topicAt[id]
		if !ok {
			i = len(kr.Topics)
			topicAt[id] = i
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = id
			kr.Topics = append(kr.Topics, rt)
		}
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rp.Partition = int32(t.Partition)
		for _, b := range acks[t] {
			ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset = b.First, b.Last
			for _, typ := range b.Types {
				ab.AcknowledgeTypes = append(ab.AcknowledgeTypes, int8(typ))
			}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		kr.Topics[i].Partitions = append(kr.Topics[i].Partitions, rp)
	}
	forgetAt := map[[16]byte]int{}
	for _, t := range forget {
		id, ok := ids[t.Topic]
		if !ok {
			continue // deleted: the broker dropped it
		}
		i, ok := forgetAt[id]
		if !ok {
			i = len(kr.ForgottenTopicsData)
			forgetAt[id] = i
			ft := kmsg.NewShareFetchRequestForgottenTopicsData()
			ft.TopicID = id
			kr.ForgottenTopicsData = append(kr.ForgottenTopicsData, ft)
		}
		kr.ForgottenTopicsData[i].Partitions = append(kr.ForgottenTopicsData[i].Partitions, int32(t.Partition))
	}
	resp, err := bc.doWithin(ctx, kr, clientShareFetchMax, wait+c.requestTimeout())
	if err != nil {
		s.reset(c) // the request may have reached the broker: the session's epoch is unknown
		c.refreshQuiet(ctx)
		return nil, mergeFailed(failed, failAll(acks, err)), fmt.Errorf("kafka: share fetch from %s: %w", addr, err)
	}
	r := resp.(*kmsg.ShareFetchResponse)
	if err := codeError(r.ErrorCode); err != nil {
		if r.ErrorCode == errShareSessionNotFound || r.ErrorCode == errInvalidShareSessionEpoch {
			s.reset(c)
		}
		if r.ErrorMessage != nil && *r.ErrorMessage != "" {
			err = fmt.Errorf("%w (%s)", err, *r.ErrorMessage)
		}
		return nil, mergeFailed(failed, failAll(acks, err)), fmt.Errorf("kafka: share fetch from %s: %w", addr, err)
	}
	// The broker took the request: the session moved on.
	if s.epoch == 0 {
		s.parts = nil
	}
	for t := range send {
		if !slices.Contains(s.parts, t) {
			s.parts = append(s.parts, t)
		}
	}
	s.parts = slices.DeleteFunc(s.parts, func(t log.TopicPartition) bool { return slices.Contains(forget, t) })
	s.next()
	s.gaps = nil
	recs, fetchErrs, ackFailed := c.shareResponse(ctx, s, r)
	failed = mergeFailed(failed, ackFailed)
	if len(fetchErrs) > 0 {
		c.refreshQuiet(ctx)
	}
	return recs, failed, errors.Join(fetchErrs...)
}

// shareResponse reads a ShareFetch response: the records acquired, with
// their delivery counts, the partitions' fetch errors and the
// acknowledgements that failed. The acquired offsets without a record
// are kept in s.gaps.
func (c *Client) shareResponse(ctx context.Context, s *clientShareSession, r *kmsg.ShareFetchResponse) ([]log.ShareRecord, []error, map[log.TopicPartition]error) {
	ids := make([][16]byte, 0, len(r.Topics))
	for _, t := range r.Topics {
		ids = append(ids, t.TopicID)
	}
	_, names, err := c.topicIDsFor(ctx, nil, ids)
	if err != nil {
		return nil, []error{err}, nil
	}
	var recs []log.ShareRecord
	var errs []error
	var failed map[log.TopicPartition]error
	for _, rt := range r.Topics {
		name, ok := names[rt.TopicID]
		if !ok {
			errs = append(errs, fmt.Errorf("kafka: share fetch: a response names topic id %x, which the metadata does not", rt.TopicID))
			continue
		}
		for _, p := range rt.Partitions {
			t := log.TopicPartition{Topic: name, Partition: int(p.Partition)}
			if err := codeError(p.AcknowledgeErrorCode); err != nil {
				if failed == nil {
					failed = map[log.TopicPartition]error{}
				}
				failed[t] = err
			}
			if err := codeError(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("kafka: share fetch %s: %w", t, err))
				continue
			}
			if len(p.AcquiredRecords) == 0 {
				continue
			}
			got, err := log.DecodeRecords(p.Records)
			if err != nil {
				errs = append(errs, fmt.Errorf("kafka: share fetch %s: %w", t, err))
				got = nil // the acquired offsets come back when their locks expire
			}
			recs = c.shareAcquired(s, t, p.AcquiredRecords, got, recs)
		}
	}
	return recs, errs, failed
}

// shareAcquired appends to out the records of got within the acquired
// ranges and keeps the acquired offsets without one as gaps of s.
func (c *Client) shareAcquired(s *clientShareSession, t log.TopicPartition, acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, got []log.Record, out []log.ShareRecord) []log.ShareRecord {
	gap := func(from, to int64) {
		if from > to {
			return
		}
		if s.gaps == nil {
			s.gaps = map[log.TopicPartition][]share.AckBatch{}
		}
		bs := s.gaps[t]
		if n := len(bs); n > 0 && bs[n-1].Last == from-1 {
			bs[n-1].Last = to
		} else {
			bs = append(bs, share.AckBatch{First: from, Last: to, Types: []share.AckType{share.AckGap}})
		}
		s.gaps[t] = bs
	}
	i := 0 // the next record of got
	for _, a := range acquired {
		next := a.FirstOffset
		for i < len(got) && got[i].Offset < a.FirstOffset {
			i++
		}
		for ; i < len(got) && got[i].Offset <= a.LastOffset; i++ {
			r := got[i]
			gap(next, r.Offset-1)
			next = r.Offset + 1
			r.Topic, r.Partition = t.Topic, t.Partition
			out = append(out, log.ShareRecord{Record: r, DeliveryCount: int(a.DeliveryCount)})
		}
		gap(next, a.LastOffset)
	}
	return out
}

// ShareAcknowledge sends a member's acknowledgements with Kafka's
// ShareAcknowledge to each partition's leader, in the member's session
// there, and returns the first partition's error (wrapped); the others
// are applied all the same.
func (c *Client) ShareAcknowledge(ctx context.Context, group, member string, acks map[log.TopicPartition][]share.AckBatch) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	leaders, err := c.byLeader(ctx, nil, acks)
	if err != nil {
		return fmt.Errorf("kafka: share acknowledge: %w", err)
	}
	var first error
	for addr, ls := range leaders {
		for t, err := range c.shareAckTo(ctx, group, member, addr, ls.acks) {
			if first == nil {
				first = fmt.Errorf("kafka: share acknowledge %s: %w", t, err)
			}
		}
	}
	return first
}

// shareAckTo sends acks to the leader at addr and returns the
// partitions whose acknowledgement failed.
func (c *Client) shareAckTo(ctx context.Context, group, member, addr string, acks map[log.TopicPartition][]share.AckBatch) map[log.TopicPartition]error {
	s := c.session(group, member, addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bc != nil && s.bc.broken() {
		s.reset(c)
	}
	if s.epoch == 0 || s.bc == nil {
		return failAll(acks, fmt.Errorf("%w: no share session with %s (it ended)", share.ErrInvalidRecordState, addr))
	}
	acks = withGaps(acks, s.gaps)
	names := make([]string, 0, len(acks))
	for t := range acks {
		names = append(names, t.Topic)
	}
	ids, _, err := c.topicIDsFor(ctx, names, nil)
	if err != nil {
		return failAll(acks, err)
	}
	kr := kmsg.NewPtrShareAcknowledgeRequest()
	kr.GroupID, kr.MemberID, kr.ShareSessionEpoch = kmsg.StringPtr(group), kmsg.StringPtr(member), s.epoch
	failed := map[log.TopicPartition]error{}
	topicAt := map[[16]byte]int{}
	for _, t := range slices.SortedFunc(maps.Keys(acks), tp.Compare) {
		id, ok := ids[t.Topic]
		if !ok {
			failed[t] = fmt.Errorf("%w: %s", log.ErrUnknownTopic, t.Topic)
			continue
		}
		i, ok := topicAt[id]
		if !ok {
			i = len(kr.Topics)
			topicAt[id] = i
			rt := kmsg.NewShareAcknowledgeRequestTopic()
			rt.TopicID = id
			kr.Topics = append(kr.Topics, rt)
		}
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		rp.Partition = int32(t.Partition)
		for _, b := range acks[t] {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset = b.First, b.Last
			for _, typ := range b.Types {
				ab.AcknowledgeTypes = append(ab.AcknowledgeTypes, int8(typ))
			}
			rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		}
		kr.Topics[i].Partitions = append(kr.Topics[i].Partitions, rp)
	}
	resp, err := s.bc.doWithin(ctx, kr, clientShareAcknowledgeMax, c.requestTimeout())
	if err != nil {
		s.reset(c)
		return mergeFailed(failed, failAll(acks, err))
	}
	r := resp.(*kmsg.ShareAcknowledgeResponse)
	if err := codeError(r.ErrorCode); err != nil {
		if r.ErrorCode == errShareSessionNotFound || r.ErrorCode == errInvalidShareSessionEpoch {
			s.reset(c)
		}
		return mergeFailed(failed, failAll(acks, err))
	}
	s.next()
	s.gaps = nil
	byID := map[[16]byte]string{}
	for name, id := range ids {
		byID[id] = name
	}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			if err := codeError(p.ErrorCode); err != nil {
				failed[log.TopicPartition{Topic: byID[rt.TopicID], Partition: int(p.Partition)}] = err
			}
		}
	}
	return failed
}

// withGaps returns acks with the gap acknowledgements of gaps added
// (a new map: acks is the caller's).
func withGaps(acks, gaps map[log.TopicPartition][]share.AckBatch) map[log.TopicPartition][]share.AckBatch {
	if len(gaps) == 0 {
		return acks
	}
	out := make(map[log.TopicPartition][]share.AckBatch, len(acks)+len(gaps))
	for t, bs := range acks {
		out[t] = bs
	}
	for t, bs := range gaps {
		out[t] = mergeAckBatches(out[t], bs)
	}
	return out
}

// mergeAckBatches merges two offset-sorted lists of batches into one.
func mergeAckBatches(a, b []share.AckBatch) []share.AckBatch {
	out := make([]share.AckBatch, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.SortFunc(out, func(x, y share.AckBatch) int { return int(min(max(x.First-y.First, -1), 1)) })
	return out
}

// failAll gives each partition of acks err.
func failAll(acks map[log.TopicPartition][]share.AckBatch, err error) map[log.TopicPartition]error {
	if len(acks) == 0 {
		return nil
	}
	out := make(map[log.TopicPartition]error, len(acks))
	for t := range acks {
		out[t] = err
	}
	return out
}

// mergeFailed adds b's failures to a's (a may be nil).
func mergeFailed(a, b map[log.TopicPartition]error) map[log.TopicPartition]error {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = map[log.TopicPartition]error{}
	}
	for t, err := range b {
		if _, ok := a[t]; !ok {
			a[t] = err
		}
	}
	return a
}
