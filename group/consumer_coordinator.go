package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/strata-log/strata/group/assign"
	"github.com/strata-log/strata/tp"
)

// The driver of the consumer-protocol groups (KIP-848) of a Coordinator:
// ConsumerHeartbeat steps a group's machine (consumer_machine.go) on a
// copy, makes the records it wrote durable, and only then lets the copy
// stand; a group's heartbeats and timers are serialized by its lock.

// ConsumerHeartbeatRequest is Kafka's ConsumerGroupHeartbeat. An optional
// field left out is nil (SubscribedTopics, SubscribedTopicRegex, Owned),
// "" (InstanceID, RackID, ServerAssignor) or negative (RebalanceTimeout),
// as Kafka's null and -1.
type ConsumerHeartbeatRequest struct {
	Group string
	// MemberID is the member's id, which a Kafka 4 client makes itself;
	// "" on a first heartbeat (epoch 0) has the coordinator make one.
	MemberID string
	// MemberEpoch: 0 to join (or rejoin), -1 to leave, -2 for a static
	// member to leave for now; else the member's epoch.
	MemberEpoch          int32
	InstanceID           string
	RackID               string
	RebalanceTimeout     time.Duration
	SubscribedTopics     []string
	SubscribedTopicRegex *string
	ServerAssignor       string
	// Owned is what the member holds now; nil if it does not say.
	Owned      []TopicPartition
	ClientID   string
	ClientHost string
}

// ConsumerHeartbeatResponse answers a ConsumerHeartbeatRequest.
type ConsumerHeartbeatResponse struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is what the member is to hold, sorted; nil when
	// unchanged since the last answer (and the request was not a full
	// one).
	Assignment []TopicPartition
}

// ConsumerGroupDescription describes a consumer-protocol group (Kafka's
// ConsumerGroupDescribe).
type ConsumerGroupDescription struct {
	Group           string
	State           string // Empty, Assigning, Reconciling, Stable
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription // sorted by MemberID
}

// ConsumerMemberDescription is one member of a ConsumerGroupDescription.
type ConsumerMemberDescription struct {
	MemberID             string
	InstanceID           string
	RackID               string
	ClientID             string
	ClientHost           string
	MemberEpoch          int32
	SubscribedTopics     []string
	SubscribedTopicRegex string
	Assignment           []TopicPartition // what it holds
	TargetAssignment     []TopicPartition // what it is to hold
}

// consumerGroups is the Coordinator's consumer groups. Its maps are
// guarded by the Coordinator's mu; a group's lock is taken before it.
type consumerGroups struct {
	groups map[string]*consumerEntry
	timers map[cgTimerKey]*armedTimer
}

type consumerEntry struct {
	g    *consumerGroup
	lock chan struct{} // one slot: heartbeats and timers of the group, in turn
}

type cgTimerKey struct {
	group string
	cgTimer
}

// consumerConfig is the Config's settings of consumer groups.
func (c *Coordinator) consumerConfig() consumerConfig {
	return consumerConfig{sessionTimeout: c.cfg.ConsumerSessionTimeout, heartbeatInterval: c.cfg.ConsumerHeartbeatInterval,
		maxSize: c.cfg.ConsumerMaxSize}
}

// ConsumerHeartbeat is Kafka's ConsumerGroupHeartbeat: it joins, keeps in
// and leaves a consumer-protocol group, and answers the member's epoch and
// assignment. It returns at once; the member heartbeats again within
// HeartbeatInterval.
//
// Errors: ErrInvalidRequest, ErrInvalidGroup, ErrUnsupportedAssignor,
// ErrInvalidRegularExpression, ErrUnknownMember, ErrFencedMemberEpoch,
// ErrFencedInstanceID, ErrUnreleasedInstanceID, ErrGroupMaxSizeReached,
// ErrGroupNotFound (a heartbeat past the join to a group the coordinator
// does not know, or the id of a classic group with members), a store
// error (wrapped; the heartbeat changed nothing), ErrClosed, ctx's error.
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, req ConsumerHeartbeatRequest) (ConsumerHeartbeatResponse, error) {
	if err := validGroup(req.Group); err != nil {
		return ConsumerHeartbeatResponse{}, err
	}
	ev := cgHeartbeat{
		member: req.MemberID, epoch: req.MemberEpoch, instanceID: req.InstanceID, rack: req.RackID,
		rebalanceTimeout: req.RebalanceTimeout, topics: req.SubscribedTopics, regex: req.SubscribedTopicRegex,
		assignor: req.ServerAssignor, clientID: req.ClientID, clientHost: req.ClientHost,
	}
	if req.RebalanceTimeout < 0 {
		ev.rebalanceTimeout = -1
	}
	if req.Owned != nil {
		ev.owned = assign.Partitions{}
		for _, p := range req.Owned {
			ev.owned[p.Topic] = append(ev.owned[p.Topic], p.Partition)
		}
		for t, ps := range ev.owned {
			slices.Sort(ps)
			ev.owned[t] = slices.Compact(ps)
		}
	}
	if ev.member == "" && ev.epoch == joinEpoch {
		ev.member = newConsumerMemberID()
	}
	if err := ev.validate(); err != nil {
		return ConsumerHeartbeatResponse{}, err
	}
	var resp cgResponse
	wants := slices.Clone(req.SubscribedTopics)
	needNames := req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != ""
	err := c.stepConsumer(ctx, req.Group, ev.epoch == joinEpoch, wants, needNames, func(g *consumerGroup, image topicImage, now time.Time) ([]cgEffect, error) {
		ev.image = image
		r, effs, err := g.step(now, ev, nil)
		resp = r
		return effs, err
	})
	if err != nil {
		return ConsumerHeartbeatResponse{}, err
	}
	out := ConsumerHeartbeatResponse{MemberID: resp.member, MemberEpoch: resp.epoch, HeartbeatInterval: resp.interval}
	if resp.assignment != nil {
		out.Assignment = partitionsList(resp.assignment)
	}
	return out, nil
}

// newConsumerMemberID is a random UUID, as Kafka makes for a v0 join.
func newConsumerMemberID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return hex.EncodeToString(u[:])
}

func partitionsList(p assign.Partitions) []TopicPartition {
	out := []TopicPartition{}
	for _, t := range slices.Sorted(maps.Keys(p)) {
		for _, n := range p[t] {
			out = append(out, TopicPartition{Topic: t, Partition: n})
		}
	}
	return out
}

// stepConsumer runs step on a copy of group's machine, holding the
// group's lock, stores the records it emitted and then installs the copy
// and carries out the other effects. create makes the group if need be.
func (c *Coordinator) stepConsumer(ctx context.Context, group string, create bool, wants []string, needNames bool, step func(*consumerGroup, topicImage, time.Time) ([]cgEffect, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if e := c.groups[group]; e != nil && len(e.st.members) > 0 {
		c.mu.Unlock()
		return fmt.Errorf("%w: %q is a classic group with members", ErrGroupNotFound, group)
	}
	ce := c.consumer.groups[group]
	if ce == nil {
		if !create {
			c.mu.Unlock()
			return fmt.Errorf("%w: consumer group %q", ErrGroupNotFound, group)
		}
		ce = &consumerEntry{g: newConsumerGroup(group, c.consumerConfig()), lock: make(chan struct{}, 1)}
		c.consumer.groups[group] = ce
	}
	c.mu.Unlock()
	select {
	case ce.lock <- struct{}{}:
	case <-ctx.Done():
		c.forgetConsumerIfIdle(ce)
		return ctx.Err()
	}
	c.mu.Lock()
	stale := c.consumer.groups[group] != ce
	c.mu.Unlock()
	if stale {
		// Deleted (or forgotten after a failed first join) while this
		// waited for it: start again with what is there now.
		<-ce.lock
		return c.stepConsumer(ctx, group, create, wants, needNames, step)
	}
	defer func() { <-ce.lock; c.forgetConsumerIfIdle(ce) }()

	// The topics the group and the request may need, read with no lock
	// held (Config.Partitions).
	c.mu.Lock()
	topics := ce.g.subscribedTopics()
	needNames = needNames || len(ce.g.regexes) > 0
	c.mu.Unlock()
	for _, t := range wants {
		topics[t] = true
	}
	image := c.topicImage(topics, needNames)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	next := ce.g.clone()
	now := c.clock.Now()
	effs, err := step(next, image, now)
	if err == nil {
		c.commits.Add(1) // Close waits for the store call
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	defer c.commits.Done()
	var recs []cgRec
	for _, f := range effs {
		if f.kind == cgRecord {
			recs = append(recs, f.rec)
		}
	}
	if len(recs) > 0 {
		if err := c.storeConsumerRecords(group, recs); err != nil {
			return fmt.Errorf("group: store records of consumer group %q: %w", group, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed // stored: the next coordinator has it
	}
	ce.g = next
	for _, f := range effs {
		c.doConsumer(group, f)
	}
	return nil
}

// topicImage reads, with no lock held (Config.Partitions and TopicNames
// ask that), the topics a step may need: those the group subscribes to,
// those the request names and, when regexes are involved, every topic.
// Its version is a hash of what it read, so the machine refreshes its
// metadata when something it depends on changed.
func (c *Coordinator) topicImage(topics map[string]bool, names bool) *snapshotImage {
	im := &snapshotImage{topics: map[string]assign.Topic{}}
	if names && c.cfg.TopicNames != nil {
		im.names = c.cfg.TopicNames()
		for _, t := range im.names {
			topics[t] = true
		}
	}
	h := fnv.New64a()
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		n, err := c.cfg.Partitions(t)
		if err != nil || n <= 0 {
			continue
		}
		im.topics[t] = assign.Topic{Partitions: n}
		fmt.Fprintf(h, "%s\x00%d\x00", t, n)
	}
	for _, t := range im.names {
		fmt.Fprintf(h, "%s\x00", t)
	}
	im.version = int64(h.Sum64() >> 1)
	return im
}

// snapshotImage is a topicImage read when a step began.
type snapshotImage struct {
	topics  map[string]assign.Topic
	names   []string
	version int64
}

func (im *snapshotImage) Version() int64 { return im.version }

func (im *snapshotImage) Topic(name string) (assign.Topic, bool) {
	md, ok := im.topics[name]
	return md, ok
}

func (im *snapshotImage) Names() []string { return im.names }

// storeConsumerRecords appends recs, encoded, when the store is an
// OffsetsLog's (Open); another store keeps no consumer groups.
func (c *Coordinator) storeConsumerRecords(group string, recs []cgRec) error {
	s, ok := c.cfg.Store.(*logStore)
	if !ok {
		return nil
	}
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		k, v := encodeConsumerRecord(group, r, tpIDs{})
		out = append(out, Record{Key: k, Value: v})
	}
	return s.l.Append(out)
}

// doConsumer carries out a step's effect other than a record. mu is held.
func (c *Coordinator) doConsumer(group string, f cgEffect) {
	key := cgTimerKey{group: group, cgTimer: cgTimer{member: f.member, revoke: f.revoke}}
	switch f.kind {
	case cgArm:
		if t, ok := c.consumer.timers[key]; ok {
			if !t.at.After(f.at) {
				return
			}
			if t.stop.Stop() {
				c.callbacks.Done()
			}
		}
		t := &armedTimer{at: f.at}
		c.callbacks.Add(1)
		t.stop = c.clock.AfterFunc(f.at.Sub(c.clock.Now()), func() { c.fireConsumer(key, t) })
		c.consumer.timers[key] = t
	case cgCancel:
		if t, ok := c.consumer.timers[key]; ok {
			delete(c.consumer.timers, key)
			if t.stop.Stop() {
				c.callbacks.Done()
			}
		}
	case cgLog:
		c.log.Info("group: "+f.msg, "group", group, "member", f.member, "protocol", "consumer")
	}
}

// fireConsumer is the callback of timer t.
func (c *Coordinator) fireConsumer(key cgTimerKey, t *armedTimer) {
	defer c.callbacks.Done()
	c.mu.Lock()
	if c.closed || c.consumer.timers[key] != t {
		c.mu.Unlock()
		return
	}
	delete(c.consumer.timers, key)
	c.mu.Unlock()
	err := c.stepConsumer(context.Background(), key.group, false, nil, false, func(g *consumerGroup, _ topicImage, now time.Time) ([]cgEffect, error) {
		_, effs, err := g.step(now, key.cgTimer, nil)
		return effs, err
	})
	if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrGroupNotFound) {
		// Not stored: the member stays until a later timer or heartbeat.
		c.log.Warn("group: consumer group timer", "group", key.group, "member", key.member, "err", err)
		c.mu.Lock()
		if !c.closed {
			c.doConsumer(key.group, cgEffect{kind: cgArm, member: key.member, revoke: key.revoke, at: c.clock.Now().Add(time.Second)})
		}
		c.mu.Unlock()
	}
}

// forgetConsumerIfIdle drops a group that has never had a member (a join
// that failed).
func (c *Coordinator) forgetConsumerIfIdle(ce *consumerEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(ce.lock) == 0 && ce.g.epoch == 0 && len(ce.g.members) == 0 && c.consumer.groups[ce.g.id] == ce {
		delete(c.consumer.groups, ce.g.id)
	}
}

// stopConsumerTimers stops the timers of the consumer groups (Close). mu
// is held.
func (c *Coordinator) stopConsumerTimers() {
	for key, t := range c.consumer.timers {
		if t.stop.Stop() {
			c.callbacks.Done()
		}
		delete(c.consumer.timers, key)
	}
}

// DescribeConsumerGroup describes a consumer-protocol group, false if the
// coordinator has none of that id.
func (c *Coordinator) DescribeConsumerGroup(group string) (ConsumerGroupDescription, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce := c.consumer.groups[group]
	if ce == nil {
		return ConsumerGroupDescription{Group: group, State: string(StateDead)}, false
	}
	g := ce.g
	d := ConsumerGroupDescription{Group: group, State: g.state(), Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Assignor: g.preferredAssignor()}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		d.Members = append(d.Members, ConsumerMemberDescription{
			MemberID: id, InstanceID: m.instanceID, RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			MemberEpoch: m.epoch, SubscribedTopics: slices.Clone(m.topics), SubscribedTopicRegex: m.regex,
			Assignment: partitionsList(m.assigned), TargetAssignment: partitionsList(g.target[id]),
		})
	}
	return d, true
}

// ConsumerGroups returns the ids of the consumer-protocol groups, sorted.
func (c *Coordinator) ConsumerGroups() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.consumer.groups))
}

// checkConsumerCommit checks an offset commit to a consumer-protocol
// group, as Kafka's ConsumerGroup.validateOffsetCommit: from a member at
// its epoch or its previous one (ErrStaleMemberEpoch otherwise,
// ErrUnknownMember from a stranger), or with no member id and a negative epoch while the group
// has no members. handled is false for any other group. mu is held.
func (c *Coordinator) checkConsumerCommit(group, member string, epoch int32) (handled bool, err error) {
	ce := c.consumer.groups[group]
	if ce == nil {
		return false, nil
	}
	if member == "" && epoch < 0 {
		if len(ce.g.members) > 0 {
			return true, fmt.Errorf("%w: a commit without a member id to consumer group %q, which has members", ErrUnknownMember, group)
		}
		return true, nil
	}
	m := ce.g.members[member]
	switch {
	case m == nil:
		return true, fmt.Errorf("%w: %q in consumer group %q", ErrUnknownMember, member, group)
	case epoch != m.epoch && (epoch != m.prevEpoch || epoch <= 0):
		// Its previous epoch passes too: the answer that moved the member
		// on may not have reached it yet (Kafka 4.3 relaxes the check
		// likewise, KIP-1251), and a member gives partitions up before its
		// epoch moves, so a commit at the previous epoch is of partitions
		// it still holds.
		return true, fmt.Errorf("%w: commit at epoch %d, member %q of consumer group %q is at %d", ErrStaleMemberEpoch, epoch, member, group, m.epoch)
	}
	return true, nil
}

// listConsumerGroups adds the consumer groups to a List. mu is held.
func (c *Coordinator) listConsumerGroups(out []Listing) []Listing {
	for _, id := range slices.Sorted(maps.Keys(c.consumer.groups)) {
		out = append(out, Listing{Group: id, ProtocolType: assign.ProtocolType, State: State(c.consumer.groups[id].g.state()), Type: TypeConsumer})
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// restoreConsumerGroups installs the groups Open read back, each
// member's session started anew. mu is held (or c is not shared yet).
func (c *Coordinator) restoreConsumerGroups(now time.Time, groups map[string]*consumerGroup) {
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		g := groups[id]
		g.cfg = c.consumerConfig().withDefaults()
		c.consumer.groups[id] = &consumerEntry{g: g, lock: make(chan struct{}, 1)}
		for _, f := range g.restarted(now, nil) {
			c.doConsumer(id, f)
		}
	}
}

// tpIDs are Strata's topic ids (tp.TopicID); a name is found only for the
// ids the records themselves named (consumerReplay learns them).
type tpIDs struct{}

func (tpIDs) ID(name string) [16]byte      { return tp.TopicID(name) }
func (tpIDs) Name([16]byte) (string, bool) { return "", false }

// deleteConsumerGroup deletes group if it is a consumer group
// (ErrNonEmptyGroup if it has members): its tombstones are stored, then
// it is forgotten. Its commits are the caller's to delete. deleted is
// false if it is no consumer group.
func (c *Coordinator) deleteConsumerGroup(ctx context.Context, group string) (deleted bool, err error) {
	c.mu.Lock()
	ce := c.consumer.groups[group]
	c.mu.Unlock()
	if ce == nil {
		return false, nil
	}
	select {
	case ce.lock <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-ce.lock }()
	c.mu.Lock()
	n := len(ce.g.members)
	gone := c.consumer.groups[group] != ce
	c.mu.Unlock()
	switch {
	case gone:
		return false, nil
	case n > 0:
		return false, fmt.Errorf("%w: consumer group %q has %d members", ErrNonEmptyGroup, group, n)
	}
	// Kafka's order: the group epoch's tombstone last.
	recs := []cgRec{{kind: recTargetMeta, tombstone: true}, {kind: recPartitionMeta, tombstone: true}, {kind: recGroupEpoch, tombstone: true}}
	for _, re := range slices.Sorted(maps.Keys(ce.g.regexes)) {
		recs = append([]cgRec{{kind: recRegex, regex: re, tombstone: true}}, recs...)
	}
	if err := c.storeConsumerRecords(group, recs); err != nil {
		return false, fmt.Errorf("group: store deletion of consumer group %q: %w", group, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.consumer.groups[group] == ce {
		delete(c.consumer.groups, group)
	}
	return true, nil
}

// classicJoinsConsumerGroup lets a classic member join group if it is no
// consumer group, or an empty one, which is deleted first (Kafka's offline
// downgrade); a consumer group with members refuses it
// (ErrInconsistentGroupProtocol, as Kafka answers a JoinGroup it cannot
// take).
func (c *Coordinator) classicJoinsConsumerGroup(ctx context.Context, group string) error {
	_, err := c.deleteConsumerGroup(ctx, group)
	if errors.Is(err, ErrNonEmptyGroup) {
		return fmt.Errorf("%w: %q is a consumer group with members", ErrInconsistentGroupProtocol, group)
	}
	return err
}
