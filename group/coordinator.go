package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/group/assign"
)

// Coordinator is the group coordinator of one broker: the driver of every
// group's state machine. Its methods may be called from many goroutines at
// once. It starts no goroutine of its own; its timers' callbacks (run by
// the Clock) are tracked, and Close waits for them.
//
// Lock order: a group's commit lock (entry.commitLock), then mu. Store is
// called holding only the commit lock; Partitions holding nothing.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	clock Clock

	mu        sync.Mutex
	closed    bool
	groups    map[string]*entry
	waiters   map[uint64]chan joinResult // pending Join and Sync calls by token
	lastToken uint64
	timers    map[timerKey]*armedTimer
	effs      []effect // scratch, reused by every step

	// pendingMeta holds the groups' metadata to store (a nil value: a
	// tombstone), by group, recorded by step when a GroupMetadataStore is
	// set and written by flushMeta, holding metaMu (taken before mu), which
	// keeps the StoreGroup calls in the order of the changes.
	pendingMeta map[string]pendingGroup
	metaSeq     uint64 // of the last record recorded (pendingGroup.seq)
	metaMu      sync.Mutex

	callbacks sync.WaitGroup // armed timers whose callback has not returned
	commits   sync.WaitGroup // Commit calls between their check and their end

	consumer consumerGroups // the consumer-protocol groups (consumer_coordinator.go)

	// txns holds the transactional commits pending by producer id
	// (txn.go); txnLocks serializes each producer's transactional calls.
	txns     map[int64]*pendingTxn
	txnLocks map[int64]*txnLock
}

// entry is one group: its state machine and the driver's per-group state.
type entry struct {
	st *groupState
	// commitLock (a one-slot semaphore, so that waiting respects a ctx)
	// serializes the commits of the group: check, Store, apply.
	commitLock chan struct{}
	committing int // Commit calls holding or waiting for commitLock
}

// joinResult answers a Join or a Sync call.
type joinResult struct {
	resp JoinResponse
	sync SyncResponse
	err  error
}

type timerKey struct {
	group  string
	member string // "" = the rebalance timer
}

type armedTimer struct {
	at   time.Time
	stop Stopper
}

// New returns a running Coordinator.
func New(cfg Config) (*Coordinator, error) { return NewWithCommitted(cfg, nil) }

// NewWithCommitted returns a running Coordinator that starts with the
// committed offsets of cfg.Initial and, with their leader epochs and
// metadata, those of committed (by group; what a broker read back from
// __consumer_offsets with DecodeCommittedOffsetRecord). Negative offsets
// are ignored; the maps are copied.
func NewWithCommitted(cfg Config, committed map[string]map[TopicPartition]CommittedOffset) (*Coordinator, error) {
	return newCoordinator(cfg, committed, nil)
}

// newCoordinator is NewWithCommitted with the transactional commits
// pending at the end of a replay (Open), which it keeps.
func newCoordinator(cfg Config, committed map[string]map[TopicPartition]CommittedOffset, txns map[int64]*pendingTxn) (*Coordinator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Coordinator{
		cfg:     cfg,
		log:     cfg.Logger,
		clock:   cfg.Clock,
		groups:  make(map[string]*entry),
		waiters: make(map[uint64]chan joinResult),
		timers:  make(map[timerKey]*armedTimer),
		txns:    txns,
	}
	c.consumer = consumerGroups{groups: map[string]*consumerEntry{}, timers: map[cgTimerKey]*armedTimer{}}
	for g, offsets := range cfg.Initial {
		e := c.entry(g)
		for tp, off := range offsets {
			if off >= 0 {
				e.st.offsets[tp] = off
			}
		}
		c.forgetIfIdle(e)
	}
	for g, offsets := range committed {
		e := c.entry(g)
		kept := make(map[TopicPartition]CommittedOffset, len(offsets))
		for tp, co := range offsets {
			if co.Offset >= 0 {
				kept[tp] = co
			}
		}
		e.st.applyCommitted(kept)
		c.forgetIfIdle(e)
	}
	now := c.clock.Now()
	c.restoreConsumerGroups(now, cfg.consumerGroups)
	for _, g := range slices.Sorted(maps.Keys(cfg.InitialGroups)) {
		v, err := decodeGroupMetadata(cfg.InitialGroups[g])
		if err == nil {
			err = validGroup(g)
		}
		if err != nil {
			c.log.Warn("group: metadata not restored", "group", g, "err", err)
			continue
		}
		e := c.entry(g)
		for _, f := range e.st.restore(now, v, c.cfg.MinSessionTimeout, nil) {
			c.do(e.st, &f)
		}
		c.forgetIfIdle(e)
	}
	return c, nil
}

// entry returns group g's entry, creating it if need be. mu is held.
func (c *Coordinator) entry(g string) *entry {
	e := c.groups[g]
	if e == nil {
		e = &entry{st: newGroupState(g, c.cfg.InitialRebalanceDelay), commitLock: make(chan struct{}, 1)}
		e.st.maxSize = c.cfg.MaxSize
		c.groups[g] = e
	}
	return e
}

// forgetIfIdle drops a group that holds nothing. mu is held.
func (c *Coordinator) forgetIfIdle(e *entry) {
	if e.committing == 0 && e.st.idle() && c.groups[e.st.id] == e {
		delete(c.groups, e.st.id)
	}
}

func validGroup(g string) error {
	if g == "" || len(g) > MaxNameLen {
		return fmt.Errorf("%w: %q", ErrInvalidGroup, g)
	}
	return nil
}

// Join joins the member to the group, or rejoins it, and blocks until the
// rebalance it starts or takes part in has formed its generation; then it
// returns the generation, the protocol the members voted for, the leader
// and, to the leader, every member's metadata for that protocol. The member
// then calls Sync (the leader with the assignment it computed) to learn its
// assignment. A first join has MemberID "": the coordinator assigns an id
// (ClientID, a dash, a random UUID), which the member keeps for every later
// request; with RequireKnownMemberID it is only told that id
// (ErrMemberIDRequired, JoinResponse.MemberID set) and joins again with it.
//
// A request without Protocols (and without ProtocolType) does the Sync
// too, computing the range assignment of Topics if it is the leader, and
// returns the member's partitions in JoinResponse.Assignment.
//
// The protocol is eager: every rebalance needs every member to call Join
// again (a member learns of a rebalance from Heartbeat's
// ErrRebalanceInProgress) and, before it does, to stop consuming and commit.
// A follower of a stable group that rejoins with unchanged protocols gets
// the current generation back at once; the leader's rejoin rebalances (as
// in Kafka: that is how a leader asks for a new assignment).
//
// Errors: ErrInvalidGroup, ErrInvalidSessionTimeout, ErrInvalidRequest,
// ErrInconsistentGroupProtocol (no protocol in common with the members, or
// another protocol type), ErrMemberIDRequired, ErrUnknownMember (a MemberID
// the group does not know, or the member was removed while its Join was
// pending), ErrRebalanceInProgress (a newer Join of the same member
// superseded this one), ErrClosed, or ctx's error: the Join is withdrawn (a
// member's first Join is forgotten; a known member stays until its session
// or the rebalance times out).
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) (JoinResponse, error) {
	if req.ProtocolType == "" && len(req.Protocols) == 0 {
		return c.joinAndSync(ctx, req)
	}
	ev, err := c.joinEvent(req)
	if err != nil {
		return JoinResponse{}, err
	}
	if err := c.classicJoinsConsumerGroup(ctx, req.Group); err != nil {
		return JoinResponse{}, err
	}
	r, err := c.call(ctx, req.Group, true,
		func(token uint64) event { ev.waiter = token; return ev },
		func(token uint64) event { return cancelJoinEvent{member: ev.member, waiter: token} })
	if errors.Is(err, ErrMemberIDRequired) {
		return JoinResponse{MemberID: ev.member}, err
	}
	return r.resp, err
}

// Sync is Kafka's SyncGroup: it returns the member's assignment in its
// generation. The leader's Sync carries the assignment of every member and
// is answered at once; a follower's waits for the leader's while the group
// is completing the rebalance, and is answered at once once it is stable.
// Heartbeats keep working meanwhile.
//
// Errors: ErrUnknownMember, ErrIllegalGeneration (a generation other than
// the group's current one), ErrInconsistentGroupProtocol (ProtocolType or
// Protocol not the generation's), ErrRebalanceInProgress (a new rebalance
// began: the leader left or timed out, a member joined... — rejoin),
// ErrInvalidGroup, ErrClosed, or ctx's error (the Sync is withdrawn).
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) (SyncResponse, error) {
	if err := validGroup(req.Group); err != nil {
		return SyncResponse{}, err
	}
	ev := syncEvent{member: req.MemberID, generation: req.Generation, protocolType: req.ProtocolType,
		protocol: req.Protocol, assignments: make(map[string][]byte, len(req.Assignments))}
	for id, a := range req.Assignments {
		ev.assignments[id] = slices.Clone(a) // never the caller's bytes
	}
	r, err := c.call(ctx, req.Group, false,
		func(token uint64) event { ev.waiter = token; return ev },
		func(token uint64) event { return cancelSyncEvent{member: ev.member, waiter: token} })
	return r.sync, err
}

// call steps the event made with a fresh token and waits for its reply, or
// for ctx: then it steps the event withdrawing it, unless the reply came
// meanwhile. create makes the group's entry if there is none; without it an
// unknown group is ErrUnknownMember.
func (c *Coordinator) call(ctx context.Context, group string, create bool, ev, withdraw func(token uint64) event) (joinResult, error) {
	if err := ctx.Err(); err != nil {
		return joinResult{}, err
	}
	if err := c.lockOpen(); err != nil {
		return joinResult{}, err
	}
	e := c.groups[group]
	if e == nil && !create {
		c.mu.Unlock()
		return joinResult{}, fmt.Errorf("%w: group %q has no members", ErrUnknownMember, group)
	}
	if e == nil {
		e = c.entry(group)
	}
	c.lastToken++
	token := c.lastToken
	ch := make(chan joinResult, 1)
	c.waiters[token] = ch
	before := c.pendingMeta[group].seq
	if err := c.step(e, ev(token)); err != nil {
		delete(c.waiters, token)
		c.forgetIfIdle(e)
		c.mu.Unlock()
		return joinResult{}, err
	}
	var stored chan error
	if pg, ok := c.pendingMeta[group]; ok && pg.seq != before && len(ch) > 0 {
		// Answered at once with a change of membership to store: a
		// static member's new instance took the old one's place (KIP-345)
		// under a new member id. As Kafka, the answer waits for the
		// record: told its new id, the member would otherwise be unknown
		// to the next coordinator if this one moved before storing it.
		stored = c.awaitStore(group)
	}
	c.mu.Unlock()
	// The leader's Sync has the generation stored, whose outcome answers
	// every Sync of it (stored): this one's too.
	c.flushMeta()

	select {
	case r := <-ch:
		if stored != nil {
			if serr := <-stored; serr != nil && r.err == nil {
				return joinResult{}, fmt.Errorf("group: member %q of group %q could not be stored: %w", r.resp.MemberID, group, serr)
			}
		}
		return r, r.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if _, pending := c.waiters[token]; !pending { // answered meanwhile: the answer wins
		c.mu.Unlock()
		r := <-ch
		return r, r.err
	}
	delete(c.waiters, token)
	if e := c.groups[group]; e != nil {
		_ = c.step(e, withdraw(token))
		c.forgetIfIdle(e)
	}
	c.mu.Unlock()
	c.flushMeta()
	return joinResult{}, ctx.Err()
}

// joinAndSync is Join for a member without protocols: a join with the
// protocol "range" and Topics as the subscription, then a Sync, with the
// range assignment if this member leads. A rebalance that begins between
// the two (ErrRebalanceInProgress, ErrIllegalGeneration from the Sync)
// makes it join again. If ctx ends after a first join, the member leaves:
// its caller never learns its id.
func (c *Coordinator) joinAndSync(ctx context.Context, req JoinRequest) (JoinResponse, error) {
	for _, t := range req.Topics {
		if t == "" || len(t) > MaxNameLen {
			return JoinResponse{}, fmt.Errorf("%w: topic %q", ErrInvalidRequest, t)
		}
	}
	first := req.MemberID == ""
	topics := slices.Compact(slices.Sorted(slices.Values(req.Topics)))
	req.ProtocolType = assign.ProtocolType
	req.Protocols = []Protocol{{Name: assign.RangeProtocol, Metadata: assign.EncodeSubscription(topics)}}
	req.RequireKnownMemberID = false
	for {
		resp, err := c.Join(ctx, req)
		if err != nil {
			return JoinResponse{}, err
		}
		req.MemberID = resp.MemberID
		var assignments map[string][]byte
		if resp.Leader == resp.MemberID {
			assignments = c.assignRange(resp.MemberMetadata)
		}
		sync, err := c.Sync(ctx, SyncRequest{Group: req.Group, MemberID: resp.MemberID, Generation: resp.Generation,
			ProtocolType: resp.ProtocolType, Protocol: resp.Protocol, Assignments: assignments})
		switch {
		case errors.Is(err, ErrRebalanceInProgress), errors.Is(err, ErrIllegalGeneration):
			continue
		case err != nil && ctx.Err() != nil && first:
			_ = c.Leave(context.Background(), req.Group, resp.MemberID)
			return JoinResponse{}, err
		case err != nil:
			return JoinResponse{}, err
		}
		resp.Assignment, err = assign.DecodeAssignment(sync.Assignment)
		if err != nil {
			return JoinResponse{}, fmt.Errorf("group: assignment of member %q: %w", resp.MemberID, err)
		}
		resp.MemberMetadata = nil
		return resp, nil
	}
}

// assignRange is the leader's work in joinAndSync: the range assignment of
// the members' subscriptions, with the topics' partition counts now. A
// member whose metadata does not decode subscribes to nothing.
func (c *Coordinator) assignRange(members []MemberMetadata) map[string][]byte {
	subs := make(map[string][]string, len(members))
	counts := map[string]int{}
	for _, m := range members {
		topics, _ := assign.DecodeSubscription(m.Metadata)
		subs[m.ID] = topics
		for _, t := range topics {
			if _, ok := counts[t]; !ok {
				n, err := c.cfg.Partitions(t)
				if err != nil || n < 0 {
					n = 0 // unknown: nothing of it is assigned
				}
				counts[t] = n
			}
		}
	}
	out := make(map[string][]byte, len(members))
	for id, tps := range assign.Range(subs, counts) {
		out[id] = assign.EncodeAssignment(tps)
	}
	return out
}

// joinEvent validates req, applies its defaults and assigns a member id to
// a new member.
func (c *Coordinator) joinEvent(req JoinRequest) (joinEvent, error) {
	if err := validGroup(req.Group); err != nil {
		return joinEvent{}, err
	}
	ev := joinEvent{
		member:           req.MemberID,
		requireKnown:     req.RequireKnownMemberID,
		instanceID:       req.GroupInstanceID,
		clientID:         req.ClientID,
		clientHost:       req.ClientHost,
		protocolType:     req.ProtocolType,
		sessionTimeout:   req.SessionTimeout,
		rebalanceTimeout: req.RebalanceTimeout,
	}
	if ev.sessionTimeout == 0 {
		ev.sessionTimeout = DefaultSessionTimeout
	}
	if ev.sessionTimeout < c.cfg.MinSessionTimeout || ev.sessionTimeout > c.cfg.MaxSessionTimeout {
		return joinEvent{}, fmt.Errorf("%w: %v is outside [%v, %v]", ErrInvalidSessionTimeout, ev.sessionTimeout, c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout)
	}
	if ev.rebalanceTimeout == 0 {
		ev.rebalanceTimeout = DefaultRebalanceTimeout
	}
	if ev.rebalanceTimeout < 0 {
		return joinEvent{}, fmt.Errorf("%w: rebalance timeout %v", ErrInvalidRequest, ev.rebalanceTimeout)
	}
	if ev.protocolType == "" || len(req.Protocols) == 0 {
		return joinEvent{}, fmt.Errorf("%w: a join needs a protocol type and at least one protocol", ErrInconsistentGroupProtocol)
	}
	size := 0
	for i, p := range req.Protocols {
		if slices.ContainsFunc(req.Protocols[:i], func(q Protocol) bool { return q.Name == p.Name }) {
			return joinEvent{}, fmt.Errorf("%w: protocol %q listed twice", ErrInvalidRequest, p.Name)
		}
		size += len(p.Name) + len(p.Metadata)
	}
	if size > c.cfg.MaxMemberMetadataBytes {
		return joinEvent{}, fmt.Errorf("%w: protocols of %d bytes, at most %d", ErrInvalidRequest, size, c.cfg.MaxMemberMetadataBytes)
	}
	// The member's one copy: the caller's bytes (a Kafka request's frame)
	// are not kept, and nothing the coordinator answers copies them again.
	ev.protocols = make([]Protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		ev.protocols[i] = Protocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)}
	}
	if ev.member == "" {
		ev.member, ev.isNew = newMemberID(req.ClientID), true
	}
	return ev, nil
}

// newMemberID is Kafka's: the client id, a dash and a random UUID.
func newMemberID(clientID string) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	hex.Encode(s[9:13], u[4:6])
	hex.Encode(s[14:18], u[6:8])
	hex.Encode(s[19:23], u[8:10])
	hex.Encode(s[24:], u[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return clientID + "-" + string(s[:])
}

// Heartbeat tells the coordinator that the member is alive, renewing its
// session. It returns nil while the member's generation is current (the
// group Stable, or CompletingRebalance: waiting for the leader's Sync);
// ErrRebalanceInProgress when the member must commit and rejoin;
// ErrIllegalGeneration when the group has moved to a newer generation
// without it (rejoin); ErrUnknownMember when it is no longer in the group
// (rejoin with no member id); ErrClosed.
func (c *Coordinator) Heartbeat(ctx context.Context, group, memberID string, generation int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	e := c.groups[group]
	if e == nil {
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, memberID, group)
	}
	return c.step(e, heartbeatEvent{member: memberID, generation: generation})
}

// Leave removes the member from the group at once (rather than when its
// session times out); the others rebalance. ErrUnknownMember, ErrClosed.
func (c *Coordinator) Leave(ctx context.Context, group, memberID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.lockOpen(); err != nil {
		return err
	}
	e := c.groups[group]
	if e == nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, memberID, group)
	}
	err := c.step(e, leaveEvent{member: memberID})
	var stored chan error
	if err == nil {
		stored = c.awaitStore(group)
	}
	c.forgetIfIdle(e)
	c.mu.Unlock()
	c.flushMeta()
	if stored != nil {
		// The removal is answered once durable: told it left, a member's
		// client sends no LeaveGroup again, and the next coordinator,
		// without the record, would keep it until its session ends.
		if serr := <-stored; serr != nil {
			return fmt.Errorf("group: the leave of %q from group %q could not be stored: %w", memberID, group, serr)
		}
	}
	return err
}

// Commit commits offsets (for each partition, the offset of the next record
// to consume) for the group. It is accepted from a member of the group's
// current generation, also while a rebalance is preparing so that a member
// told to rejoin can commit first (not while the group waits for the
// leader's Sync: ErrRebalanceInProgress, as in Kafka), and from a
// non-member (memberID "" and generation -1) only while the group has no
// members. Otherwise it is refused with ErrUnknownMember or
// ErrIllegalGeneration and changes nothing.
//
// The offsets are made durable by the Config's OffsetStore before Commit
// returns and before Committed shows them; a Store error is returned
// (wrapped) and changes nothing. Commits of one group take effect in the
// order they reach the store. Commit renews the member's session. ctx bounds
// the wait behind another commit of the group, not the Store call itself.
// Bad offsets (a negative offset or partition, an empty or over-long topic)
// are ErrInvalidRequest. An empty offsets map only checks the membership.
func (c *Coordinator) Commit(ctx context.Context, group, memberID string, generation int32, offsets map[TopicPartition]int64) error {
	committed := make(map[TopicPartition]CommittedOffset, len(offsets))
	for tp, off := range offsets {
		committed[tp] = CommittedOffset{Offset: off, LeaderEpoch: -1}
	}
	return c.commit(ctx, group, memberID, generation, committed, false)
}

// commit is Commit and CommitWithMetadata: withMeta, the commits have a
// leader epoch and metadata to keep.
func (c *Coordinator) commit(ctx context.Context, group, memberID string, generation int32, offsets map[TopicPartition]CommittedOffset, withMeta bool) error {
	if err := validGroup(group); err != nil {
		return err
	}
	for tp, co := range offsets {
		off := co.Offset
		if tp.Topic == "" || len(tp.Topic) > MaxNameLen || tp.Partition < 0 || int64(tp.Partition) > 1<<31-1 || off < 0 {
			return fmt.Errorf("%w: commit of offset %d for %s/%d", ErrInvalidRequest, off, tp.Topic, tp.Partition)
		}
		if len(co.Metadata) > MaxMetadataLen || co.LeaderEpoch < -1 {
			return fmt.Errorf("%w: commit for %s/%d: leader epoch %d, %d bytes of metadata (at most %d)", ErrInvalidRequest, tp.Topic, tp.Partition, co.LeaderEpoch, len(co.Metadata), MaxMetadataLen)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.lockOpen(); err != nil {
		return err
	}
	e := c.entry(group)
	unlock, err := c.lockCommits(ctx, e)
	if err != nil {
		return err
	}
	defer unlock()

	if err := c.lockOpen(); err != nil {
		return err
	}
	if handled, cerr := c.checkConsumerCommit(group, memberID, generation); handled {
		err = cerr // a consumer-protocol group's member commits
	} else {
		err = c.step(e, commitEvent{member: memberID, generation: generation})
	}
	c.mu.Unlock()
	if err != nil || len(offsets) == 0 {
		return err
	}
	offsets = maps.Clone(offsets) // neither the store nor the state keeps the caller's map
	if err := c.store(group, offsets, withMeta); err != nil {
		return fmt.Errorf("group: store commit of group %q: %w", group, err)
	}
	c.mu.Lock()
	e.st.applyCommitted(offsets)
	c.supersedeTxn(group, offsets) // stored after them, this commit wins
	c.mu.Unlock()
	return nil
}

// Delete deletes a group that has no members (Kafka's DeleteGroups): its
// committed offsets are deleted durably — Store is given -1 for each of
// them, which the broker writes as tombstones — and the coordinator forgets
// the group. ErrNonEmptyGroup if it has members (or a Join pending),
// ErrGroupNotFound if the coordinator knows nothing of it, a Store error
// (wrapped: nothing is deleted), ErrInvalidGroup, ErrClosed. ctx bounds the
// wait behind a commit of the group.
func (c *Coordinator) Delete(ctx context.Context, group string) error {
	if err := validGroup(group); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deleted, err := c.deleteConsumerGroup(ctx, group)
	if err != nil {
		return err
	}
	if err := c.lockOpen(); err != nil {
		return err
	}
	e := c.groups[group]
	if e == nil && deleted {
		c.mu.Unlock()
		return nil // a consumer group without commits
	}
	if e == nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrGroupNotFound, group)
	}
	unlock, err := c.lockCommits(ctx, e)
	if err != nil {
		return err
	}
	defer unlock()

	if err := c.lockOpen(); err != nil {
		return err
	}
	if len(e.st.members) > 0 {
		c.mu.Unlock()
		return fmt.Errorf("%w: %q has %d members", ErrNonEmptyGroup, group, len(e.st.members))
	}
	tombstones := make(map[TopicPartition]int64, len(e.st.offsets))
	for tp := range e.st.offsets {
		tombstones[tp] = -1
	}
	c.mu.Unlock()
	if len(tombstones) > 0 && c.cfg.Store != nil {
		if err := c.cfg.Store.Store(group, tombstones); err != nil {
			return fmt.Errorf("group: store deletion of group %q: %w", group, err)
		}
	}
	c.mu.Lock()
	e.st.forget(tombstones)
	c.mu.Unlock()
	return nil
}

// Committed returns the group's committed offsets of tps — only of those
// that have one — or, for tps nil, all of the group's. It keeps working
// after Close.
func (c *Coordinator) Committed(group string, tps []TopicPartition) map[TopicPartition]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.groups[group]
	if e == nil {
		return map[TopicPartition]int64{}
	}
	if tps == nil {
		return maps.Clone(e.st.offsets)
	}
	out := make(map[TopicPartition]int64, len(tps))
	for _, tp := range tps {
		if off, ok := e.st.offsets[tp]; ok {
			out[tp] = off
		}
	}
	return out
}

// Describe returns a snapshot of the classic group, and false if the
// coordinator knows nothing of it (no members, no commits) or it is a
// consumer-protocol group (DescribeConsumerGroup describes those): Kafka's
// DescribeGroups describes such a group as Dead. For the protocol type
// "consumer" the members' Topics and Assignment are decoded from their
// metadata and assignment.
func (c *Coordinator) Describe(group string) (Description, bool) {
	c.mu.Lock()
	e := c.groups[group]
	if e == nil || c.consumer.groups[group] != nil {
		c.mu.Unlock()
		return Description{Group: group, State: StateDead}, false
	}
	d := e.st.describe()
	c.mu.Unlock()
	if d.ProtocolType == assign.ProtocolType {
		for i := range d.Members {
			m := &d.Members[i]
			if m.MemberMetadata != nil {
				m.Topics, _ = assign.DecodeSubscription(m.MemberMetadata)
			}
			if m.MemberAssignment != nil {
				m.Assignment, _ = assign.DecodeAssignment(m.MemberAssignment)
			}
		}
	}
	return d, true
}

// Groups returns the ids of the groups the coordinator knows, of both
// types, sorted (those List lists).
func (c *Coordinator) Groups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groupIDs()
}

// Listing is one group of List: what Kafka's ListGroups answers.
type Listing struct {
	Group        string
	ProtocolType string // "" for a group without members
	State        State
	Type         string // TypeClassic or TypeConsumer (Kafka's GroupType)
}

// List returns every group the coordinator knows, sorted by id.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Listing, 0, len(c.groups))
	for _, g := range slices.Sorted(maps.Keys(c.groups)) {
		if c.consumer.groups[g] != nil {
			continue // listed as the consumer group it is
		}
		st := c.groups[g].st
		out = append(out, Listing{Group: g, ProtocolType: st.protocolType, State: st.phase.state(), Type: TypeClassic})
	}
	return c.listConsumerGroups(out)
}

// Close fails every pending Join and Sync with ErrClosed, stops the timers and waits
// for the callbacks of those that already fired and for the Store calls in
// progress. Later calls return ErrClosed. Close is idempotent.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for token, ch := range c.waiters {
		ch <- joinResult{err: ErrClosed}
		delete(c.waiters, token)
	}
	for key, t := range c.timers {
		if t.stop.Stop() {
			c.callbacks.Done()
		}
		delete(c.timers, key)
	}
	c.stopConsumerTimers()
	c.mu.Unlock()
	c.callbacks.Wait()
	c.commits.Wait()
	c.metaMu.Lock() // a StoreGroup call in progress ends first
	c.mu.Lock()
	dropPending(c.pendingMeta) // not stored: the next coordinator has what is
	c.pendingMeta = nil
	c.mu.Unlock()
	c.metaMu.Unlock()
	return nil
}

// step runs one event through e's state machine and carries out the
// effects. mu is held and the coordinator is open.
func (c *Coordinator) step(e *entry, ev event) error {
	before := e.st.phase
	now := c.clock.Now()
	effs, err := e.st.step(now, ev, c.effs[:0])
	toStore := slices.ContainsFunc(effs, func(f effect) bool { return f.kind == effStore })
	_, durable := c.cfg.Store.(GroupMetadataStore)
	if durable {
		// A generation's assignment is to be stored (its Syncs wait for
		// it), or the group emptied, or the members of its generation
		// changed (a static member replaced, as Kafka stores the group
		// then too; a member removed): its metadata changed.
		after := e.st.phase
		if toStore || after != before && after == phaseEmpty || e.st.membershipToStore() {
			if c.pendingMeta == nil {
				c.pendingMeta = make(map[string]pendingGroup)
			}
			// (A record the machine awaits and a later one of its
			// generation: the later one's outcome answers it.)
			prev, ok := c.pendingMeta[e.st.id]
			awaited := toStore || ok && prev.awaited && prev.generation == e.st.generation
			c.metaSeq++
			c.pendingMeta[e.st.id] = pendingGroup{value: e.st.encodeMetadata(now), generation: e.st.generation, awaited: awaited,
				notify: prev.notify, seq: c.metaSeq}
		}
	}
	e.st.metaChanged = false
	for i := range effs {
		c.do(e.st, &effs[i])
	}
	clear(effs) // drop the responses' references
	c.effs = effs[:0]
	if toStore && !durable {
		// Nothing to store the generation in: it stands at once.
		_ = c.step(e, storedEvent{generation: e.st.generation})
	}
	return err
}

func (c *Coordinator) do(g *groupState, f *effect) {
	key := timerKey{group: g.id, member: f.timer}
	switch f.kind {
	case effReply:
		if ch, ok := c.waiters[f.waiter]; ok {
			delete(c.waiters, f.waiter)
			ch <- joinResult{resp: f.resp, sync: f.sync, err: f.err}
		}
	case effArm:
		c.arm(key, f.at)
	case effCancel:
		if t, ok := c.timers[key]; ok {
			delete(c.timers, key)
			if t.stop.Stop() {
				c.callbacks.Done()
			}
		}
	case effLog:
		c.log.Info("group: "+f.msg, "group", g.id, "generation", g.generation, "state", g.phase.state(),
			"member", f.member, "reason", f.reason)
	case effStore: // recorded by step
	}
}

// arm makes sure key's timer fires at or before at: an armed timer due no
// later stays (the machine arms it again when it fires early). mu is held.
func (c *Coordinator) arm(key timerKey, at time.Time) {
	if t, ok := c.timers[key]; ok {
		if !t.at.After(at) {
			return
		}
		if t.stop.Stop() {
			c.callbacks.Done()
		}
	}
	t := &armedTimer{at: at}
	c.callbacks.Add(1)
	t.stop = c.clock.AfterFunc(at.Sub(c.clock.Now()), func() { c.fire(key, t) })
	c.timers[key] = t
}

// fire is the callback of timer t of key.
func (c *Coordinator) fire(key timerKey, t *armedTimer) {
	defer c.callbacks.Done()
	c.mu.Lock()
	if c.closed || c.timers[key] != t {
		c.mu.Unlock()
		return // replaced by an earlier timer, cancelled, or closing
	}
	delete(c.timers, key)
	if e := c.groups[key.group]; e != nil {
		_ = c.step(e, timerEvent{member: key.member})
		c.forgetIfIdle(e)
	}
	c.mu.Unlock()
	c.flushMeta()
}

// pendingGroup is a group's metadata record to store, of generation.
type pendingGroup struct {
	value      []byte // nil: a tombstone
	generation int32
	// awaited: the machine asked for the store (effStore) and waits for
	// its outcome, even a success (storedEvent).
	awaited bool
	// notify: the calls that wait for the outcome of this record (or of
	// one it replaced), each told it once (ErrClosed if never stored).
	notify []chan error
	// seq numbers the records recorded (Coordinator.metaSeq): a call
	// tells whether its step recorded one.
	seq uint64
}

// awaitStore registers a call waiting for the outcome of the record that
// the step it just ran recorded for group, if any: nil if none. mu is
// held.
func (c *Coordinator) awaitStore(group string) chan error {
	pg, ok := c.pendingMeta[group]
	if !ok {
		return nil
	}
	ch := make(chan error, 1)
	pg.notify = append(pg.notify, ch)
	c.pendingMeta[group] = pg
	return ch
}

// dropPending tells the calls waiting for pending records that they will
// not be stored (the coordinator closed). metaMu is held.
func dropPending(pending map[string]pendingGroup) {
	for _, pg := range pending {
		for _, ch := range pg.notify {
			ch <- ErrClosed
		}
	}
}

// flushMeta stores the groups' metadata that step recorded, if any, with
// no lock held but metaMu: a later change is stored by a later call (or
// this one, replacing the earlier), so the last one stored is the latest.
// Then it steps each group's storedEvent where the machine awaits it or
// the store failed (the group rebalances). Each group's outcome is stepped
// before flushMeta returns, so a caller of a step that asked for a store
// has its answer once flushMeta returns, whoever stored it.
func (c *Coordinator) flushMeta() {
	s, ok := c.cfg.Store.(GroupMetadataStore)
	if !ok {
		return
	}
	c.mu.Lock()
	none := len(c.pendingMeta) == 0
	c.mu.Unlock()
	if none {
		return // (a store in progress answers the calls waiting for it)
	}
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	c.mu.Lock()
	pending := c.pendingMeta
	c.pendingMeta = nil
	closed := c.closed
	c.mu.Unlock()
	if closed {
		dropPending(pending)
		return // the next coordinator of the groups has what is stored
	}
	outcomes := make(map[string]error, len(pending))
	for _, g := range slices.Sorted(maps.Keys(pending)) {
		pg := pending[g]
		err := s.StoreGroup(g, pg.value)
		if err != nil {
			c.log.Warn("group: store group metadata", "group", g, "generation", pg.generation, "err", err)
		}
		for _, ch := range pg.notify {
			ch <- err
		}
		// An empty group's tombstone that failed: nothing to redo.
		if pg.awaited || err != nil && pg.value != nil {
			outcomes[g] = err
		}
	}
	if len(outcomes) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range slices.Sorted(maps.Keys(outcomes)) {
		if e := c.groups[g]; e != nil && !c.closed {
			_ = c.step(e, storedEvent{generation: pending[g].generation, err: outcomes[g]})
		}
	}
}

// lockOpen locks c.mu unless the coordinator is closed: then it returns
// ErrClosed without c.mu held.
func (c *Coordinator) lockOpen() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// lockCommits takes e's commit lock, which serializes the commits (and
// deletion) of a group, waiting at most until ctx is done. Called with c.mu
// held, it returns with c.mu released; e stays in c.groups until unlock,
// which the caller must call (without c.mu) once it took the lock.
func (c *Coordinator) lockCommits(ctx context.Context, e *entry) (unlock func(), err error) {
	e.committing++
	c.commits.Add(1)
	c.mu.Unlock()
	done := func() {
		c.mu.Lock()
		e.committing--
		c.forgetIfIdle(e)
		c.mu.Unlock()
		c.commits.Done()
	}
	return acquire(ctx, e.commitLock, done)
}

// acquire takes lock (a channel of capacity 1), waiting at most until ctx
// is done. done undoes what the caller did to be waited for (Close waits
// for c.commits): called if ctx ends first, else by unlock after it
// releases lock.
func acquire(ctx context.Context, lock chan struct{}, done func()) (unlock func(), err error) {
	select {
	case lock <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	return func() { <-lock; done() }, nil
}
