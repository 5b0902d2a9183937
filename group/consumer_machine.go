package group

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/strata-log/strata/group/assign"
)

// The consumer group protocol (KIP-848) of one group, as a state machine
// without IO beside the classic one (machine.go): step(now, event) returns
// the heartbeat's answer and effects for the driver — records to append to
// __consumer_offsets, timers to arm or cancel, lines to log. Time and the
// topics' metadata come in with each event.
//
// As in Kafka, the state changes only by records: every change is a
// record (consumer_records.go) that the machine applies to itself as it
// emits it, and a coordinator that replays the records of a group gets the
// same state back (less the soft state: session deadlines, which restart).
//
// The group has an epoch, bumped whenever what the assignment depends on
// changes (a member joins or leaves, a subscription changes, a subscribed
// topic grows); the next heartbeat then computes a new target assignment
// for every member with the group's assignor, at that epoch. Each member
// has an epoch too and moves towards its target through the reconciliation
// (consumer_reconcile.go): revoking first, then taking partitions nobody
// holds any more, its epoch catching up with the target's.
//
// Timers are lazy, as in machine.go: a member's session deadline moves
// with every heartbeat, and a timer that fires early is armed again.

// Kafka's defaults for consumer groups.
const (
	// DefaultConsumerSessionTimeout is group.consumer.session.timeout.ms.
	DefaultConsumerSessionTimeout = 45 * time.Second
	// DefaultConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms.
	DefaultConsumerHeartbeatInterval = 5 * time.Second
)

// maxRecordKeyString bounds the strings that are keys of records (member
// ids, regexes): int16-length strings.
const maxRecordKeyString = 1<<15 - 1

// Member epochs with a meaning of their own in a heartbeat.
const (
	joinEpoch        = 0  // (re)join
	leaveEpoch       = -1 // leave
	staticLeaveEpoch = -2 // a static member leaves for now, keeping its partitions
)

// topicImage is what the machine knows of the topics: given with each
// event, read only.
type topicImage interface {
	// Version changes whenever a topic is created or deleted or grows.
	Version() int64
	// Topic describes a topic, false if it does not exist.
	Topic(name string) (assign.Topic, bool)
	// Names lists the topics a regular expression subscription may match
	// (internal topics left out).
	Names() []string
}

// consumerConfig is what a consumer group takes from the coordinator.
type consumerConfig struct {
	sessionTimeout    time.Duration
	heartbeatInterval time.Duration
	maxSize           int // members at most; 0: no limit
	// assignors are the server assignors (nil: assign.ServerAssignors()),
	// the first the default.
	assignors []assign.Assignor
}

func (c consumerConfig) withDefaults() consumerConfig {
	if c.sessionTimeout == 0 {
		c.sessionTimeout = DefaultConsumerSessionTimeout
	}
	if c.heartbeatInterval == 0 {
		c.heartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	if c.assignors == nil {
		c.assignors = assign.ServerAssignors()
	}
	return c
}

// consumerMember is one member: its subscription (the member metadata
// record), its reconciliation (the current assignment record) and its soft
// state.
type consumerMember struct {
	id string
	subscription
	currentAssignment
	deadline time.Time // of its session
	// revokeDeadline: while unrevoked, when the member is fenced if still
	// at revokeEpoch (its rebalance timeout).
	revokeDeadline time.Time
	revokeEpoch    int32
}

// subscription is what a member tells about itself (Kafka's
// ConsumerGroupMemberMetadataValue).
type subscription struct {
	instanceID       string
	rack             string
	clientID         string
	clientHost       string
	topics           []string // sorted
	regex            string
	rebalanceTimeout time.Duration
	assignor         string // "" → the group's
}

func (s subscription) equal(t subscription) bool {
	return s.instanceID == t.instanceID && s.rack == t.rack && s.clientID == t.clientID && s.clientHost == t.clientHost &&
		slices.Equal(s.topics, t.topics) && s.regex == t.regex && s.rebalanceTimeout == t.rebalanceTimeout && s.assignor == t.assignor
}

// resolvedRegex is a regular expression subscription resolved against the
// topics.
type resolvedRegex struct {
	topics  []string // sorted
	version int64    // of the topic image
	at      time.Time
}

type owner struct {
	member string
	epoch  int32
}

type tpID struct {
	topic     string
	partition int
}

type consumerGroup struct {
	id              string
	cfg             consumerConfig
	epoch           int32
	assignmentEpoch int32
	members         map[string]*consumerMember
	static          map[string]string            // instance id → member id
	target          map[string]assign.Partitions // member id → target assignment
	topics          map[string]assign.Topic      // subscribed topics that exist (the partition metadata record)
	regexes         map[string]resolvedRegex     // by expression
	owners          map[tpID]owner               // partitions held (assigned or revoking), by whom
	imageVersion    int64                        // the topic image last looked at (soft)
	imageSeen       bool
}

func newConsumerGroup(id string, cfg consumerConfig) *consumerGroup {
	return &consumerGroup{
		id:      id,
		cfg:     cfg.withDefaults(),
		members: map[string]*consumerMember{},
		static:  map[string]string{},
		target:  map[string]assign.Partitions{},
		topics:  map[string]assign.Topic{},
		regexes: map[string]resolvedRegex{},
		owners:  map[tpID]owner{},
	}
}

// Events.

type cgEvent interface{ isCGEvent() }

// cgHeartbeat is a ConsumerGroupHeartbeat, validated by validate. An
// optional field left out is its zero value: "" for the strings, a
// negative rebalance timeout, nil topics, regex and owned.
type cgHeartbeat struct {
	member           string // never "": the driver makes one for a v0 join
	epoch            int32
	instanceID       string
	rack             string
	rebalanceTimeout time.Duration // < 0: not sent
	topics           []string      // nil: not sent
	regex            *string       // nil: not sent
	assignor         string
	owned            assign.Partitions // nil: not sent
	clientID         string
	clientHost       string
	image            topicImage
}

// cgTimer: a member's session timer (revoke false) or rebalance timer
// (revoke true) fired.
type cgTimer struct {
	member string
	revoke bool
}

func (cgHeartbeat) isCGEvent() {}
func (cgTimer) isCGEvent()     {}

// cgResponse answers a heartbeat.
type cgResponse struct {
	member   string
	epoch    int32
	interval time.Duration
	// assignment is the member's assigned partitions, nil when not sent
	// (unchanged, and the request was not a full one).
	assignment assign.Partitions
}

// Effects.

type cgEffectKind uint8

const (
	cgArm    cgEffectKind = iota + 1 // have timer fire at or before at
	cgCancel                         // timer no longer needed
	cgLog                            // log msg about member
	cgRecord                         // append rec to __consumer_offsets
)

type cgEffect struct {
	kind   cgEffectKind
	member string // the timer's member, or the member logged about
	revoke bool   // the timer is the member's rebalance timer
	at     time.Time
	msg    string
	rec    cgRec
}

// validate checks a heartbeat as Kafka does before looking at the group
// (throwIfConsumerGroupHeartbeatRequestIsInvalid): ErrInvalidRequest,
// ErrUnsupportedAssignor, ErrInvalidRegularExpression.
func (h cgHeartbeat) validate() error {
	switch {
	case h.member == "":
		return fmt.Errorf("%w: MemberId can't be empty", ErrInvalidRequest)
	case h.epoch == joinEpoch && h.rebalanceTimeout < 0:
		return fmt.Errorf("%w: RebalanceTimeoutMs must be provided in first request", ErrInvalidRequest)
	case h.epoch == joinEpoch && (h.owned == nil || h.owned.Count() > 0):
		return fmt.Errorf("%w: TopicPartitions must be empty when (re-)joining", ErrInvalidRequest)
	case h.epoch == joinEpoch && h.topics == nil && h.regex == nil:
		return fmt.Errorf("%w: either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining", ErrInvalidRequest)
	case h.epoch == staticLeaveEpoch && h.instanceID == "":
		return fmt.Errorf("%w: InstanceId can't be null", ErrInvalidRequest)
	case h.epoch < staticLeaveEpoch:
		return fmt.Errorf("%w: MemberEpoch %d is invalid", ErrInvalidRequest, h.epoch)
	case len(h.member) > maxRecordKeyString || h.regex != nil && len(*h.regex) > maxRecordKeyString:
		// Both are keys of records, strings of an int16 length.
		return fmt.Errorf("%w: member id of %d bytes or regex too long", ErrInvalidRequest, len(h.member))
	}
	for _, t := range h.topics {
		if t == "" || len(t) > MaxNameLen {
			return fmt.Errorf("%w: topic %q", ErrInvalidRequest, t)
		}
	}
	if h.assignor != "" {
		if _, ok := assign.ServerAssignor(h.assignor); !ok {
			var names []string
			for _, a := range assign.ServerAssignors() {
				names = append(names, a.Name())
			}
			return fmt.Errorf("%w: ServerAssignor %q; supported: %s", ErrUnsupportedAssignor, h.assignor, strings.Join(names, ", "))
		}
	}
	if h.regex != nil && *h.regex != "" {
		if _, err := compileSubscription(*h.regex); err != nil {
			return err
		}
	}
	return nil
}

// compileSubscription compiles a subscription's regular expression, which
// must match a topic name whole (Java's Matcher.matches). Go's regexp is
// RE2, the syntax of RE2/J that Kafka uses; the named groups RE2/J does
// not know, (?<name>...), are refused as it refuses them.
func compileSubscription(expr string) (*regexp.Regexp, error) {
	if strings.Contains(expr, "(?<") {
		return nil, fmt.Errorf("%w: %q: named groups are written (?P<name>...)", ErrInvalidRegularExpression, expr)
	}
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidRegularExpression, expr, err)
	}
	return re, nil
}

// step applies ev at now, appending effects to out. An event that returns
// an error changes nothing.
func (g *consumerGroup) step(now time.Time, ev cgEvent, out []cgEffect) (cgResponse, []cgEffect, error) {
	switch ev := ev.(type) {
	case cgHeartbeat:
		if err := ev.validate(); err != nil {
			return cgResponse{}, out, err
		}
		if ev.epoch == leaveEpoch || ev.epoch == staticLeaveEpoch {
			return g.leave(now, ev, out)
		}
		return g.heartbeat(now, ev, out)
	case cgTimer:
		return cgResponse{}, g.timer(now, ev, out), nil
	}
	panic(fmt.Sprintf("group: unknown consumer group event %T", ev))
}

// emit appends rec to out and applies it.
func (g *consumerGroup) emit(out []cgEffect, rec cgRec) []cgEffect {
	g.apply(rec)
	return append(out, cgEffect{kind: cgRecord, rec: rec})
}

// member finds or makes the member of a heartbeat, as Kafka's
// getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember, without changing
// the group: a new member (or the replacement of a static one) is
// returned with isNew, and replaced names the member it replaces.
func (g *consumerGroup) member(ev cgHeartbeat) (m *consumerMember, isNew bool, replaced *consumerMember, err error) {
	join := ev.epoch == joinEpoch
	if g.cfg.maxSize > 0 && len(g.members) >= g.cfg.maxSize && g.members[ev.member] == nil {
		return nil, false, nil, fmt.Errorf("%w: consumer group %q has %d members", ErrGroupMaxSizeReached, g.id, len(g.members))
	}
	if ev.instanceID == "" || g.members[ev.member] != nil && g.members[ev.member].instanceID == ev.instanceID && join {
		m = g.members[ev.member]
		if m == nil {
			if !join {
				return nil, false, nil, fmt.Errorf("%w: %q in consumer group %q", ErrUnknownMember, ev.member, g.id)
			}
			return &consumerMember{id: ev.member, subscription: subscription{rebalanceTimeout: -1}}, true, nil, nil
		}
		return m, false, nil, g.checkEpoch(m, ev)
	}
	existing := g.members[g.static[ev.instanceID]]
	if join {
		switch {
		case existing == nil:
			if g.members[ev.member] != nil {
				return g.members[ev.member], false, nil, nil
			}
			return &consumerMember{id: ev.member, subscription: subscription{rebalanceTimeout: -1}}, true, nil, nil
		case existing.epoch != staticLeaveEpoch:
			return nil, false, nil, fmt.Errorf("%w: static member %q with instance id %q cannot join consumer group %q: member %q holds it",
				ErrUnreleasedInstanceID, ev.member, ev.instanceID, g.id, existing.id)
		}
		// Kafka's replacement: the new member takes the old one's place,
		// subscription and assignment, at epoch 0.
		n := &consumerMember{id: ev.member, subscription: existing.subscription, currentAssignment: existing.currentAssignment}
		n.assigned, n.revoking = n.assigned.Clone(), n.revoking.Clone()
		n.epoch, n.prevEpoch = 0, 0
		return n, true, existing, nil
	}
	switch {
	case existing == nil:
		return nil, false, nil, fmt.Errorf("%w: instance id %q is unknown in consumer group %q", ErrUnknownMember, ev.instanceID, g.id)
	case existing.id != ev.member:
		return nil, false, nil, fmt.Errorf("%w: static member %q with instance id %q was fenced by member %q", ErrFencedInstanceID, ev.member, ev.instanceID, existing.id)
	}
	return existing, false, nil, g.checkEpoch(existing, ev)
}

// checkEpoch is Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the
// member's epoch, or its previous one if what it holds is part of its
// assignment (the answer with the new epoch was lost); epoch 0 always
// passes, a member rejoining (KAFKA-19233).
func (g *consumerGroup) checkEpoch(m *consumerMember, ev cgHeartbeat) error {
	switch {
	case ev.epoch == joinEpoch || ev.epoch == m.epoch:
		return nil
	case ev.epoch > m.epoch:
		return fmt.Errorf("%w: member %q sent epoch %d, greater than its %d: give up all partitions and rejoin", ErrFencedMemberEpoch, m.id, ev.epoch, m.epoch)
	case ev.epoch == m.prevEpoch && subsetOf(ev.owned, m.assigned):
		return nil
	}
	return fmt.Errorf("%w: member %q sent epoch %d, smaller than its %d: give up all partitions and rejoin", ErrFencedMemberEpoch, m.id, ev.epoch, m.epoch)
}

// subsetOf reports whether owned (nil: not sent, never a subset) lies
// within ps.
func subsetOf(owned, ps assign.Partitions) bool {
	if owned == nil {
		return false
	}
	for t, os := range owned {
		for _, p := range os {
			if !slices.Contains(ps[t], p) {
				return false
			}
		}
	}
	return true
}

func (g *consumerGroup) heartbeat(now time.Time, ev cgHeartbeat, out []cgEffect) (cgResponse, []cgEffect, error) {
	m, isNew, replaced, err := g.member(ev)
	if err != nil {
		return cgResponse{}, out, err
	}
	before := m.currentAssignment
	before.assigned = before.assigned.Clone()

	sub := m.subscription
	if ev.instanceID != "" {
		sub.instanceID = ev.instanceID
	}
	if ev.rack != "" {
		sub.rack = ev.rack
	}
	if ev.rebalanceTimeout >= 0 {
		sub.rebalanceTimeout = ev.rebalanceTimeout
	}
	if ev.assignor != "" {
		sub.assignor = ev.assignor
	}
	if ev.topics != nil {
		sub.topics = slices.Compact(slices.Sorted(slices.Values(ev.topics)))
	}
	if ev.regex != nil {
		sub.regex = *ev.regex
	}
	sub.clientID, sub.clientHost = ev.clientID, ev.clientHost

	// From here on the heartbeat succeeds: the changes are records.
	old := m.subscription
	fresh := isNew && replaced == nil
	bump := g.epoch == 0 || fresh || !slices.Equal(sub.topics, old.topics)
	switch {
	case replaced != nil:
		target := g.target[replaced.id]
		out = append(out, cgEffect{kind: cgLog, member: m.id, msg: "static member " + sub.instanceID + " replaces " + replaced.id})
		out = g.remove(replaced, out)
		out = g.emit(out, cgRec{kind: recMember, member: m.id, sub: &sub})
		out = g.emit(out, cgRec{kind: recTargetMember, member: m.id, partitions: target})
		out = g.emit(out, cgRec{kind: recCurrent, member: m.id, current: &m.currentAssignment})
	case fresh:
		out = append(out, cgEffect{kind: cgLog, member: m.id, msg: "member joined"})
		out = g.emit(out, cgRec{kind: recMember, member: m.id, sub: &sub})
	case !sub.equal(old):
		out = g.emit(out, cgRec{kind: recMember, member: m.id, sub: &sub})
	}
	m = g.members[m.id]
	if sub.regex != old.regex || fresh && sub.regex != "" {
		bump = true
		if old.regex != "" && g.regexUsers(old.regex) == 0 {
			out = g.emit(out, cgRec{kind: recRegex, regex: old.regex, tombstone: true})
		}
		if _, ok := g.regexes[sub.regex]; sub.regex != "" && !ok {
			out = g.resolveRegex(now, sub.regex, ev.image, out)
		}
	}
	out = g.refreshMetadata(now, ev.image, bump, out)
	out = g.maybeAssign(out)
	out = g.reconcileMember(now, m, ev.owned, out)

	m.deadline = now.Add(g.cfg.sessionTimeout)
	out = append(out, cgEffect{kind: cgArm, member: m.id, at: m.deadline})

	resp := cgResponse{member: m.id, epoch: m.epoch, interval: g.cfg.heartbeatInterval}
	full := ev.epoch == joinEpoch || ev.rebalanceTimeout >= 0 && (ev.topics != nil || ev.regex != nil) && ev.owned != nil
	if full || !m.assigned.Equal(before.assigned) {
		resp.assignment = m.assigned.Clone()
	}
	return resp, out, nil
}

// regexUsers counts the members subscribed with expr.
func (g *consumerGroup) regexUsers(expr string) int {
	n := 0
	for _, m := range g.members {
		if m.regex == expr {
			n++
		}
	}
	return n
}

// resolveRegex resolves expr against the topics (validate compiled it).
func (g *consumerGroup) resolveRegex(now time.Time, expr string, image topicImage, out []cgEffect) []cgEffect {
	re, err := compileSubscription(expr)
	if err != nil {
		return out // validated: a restored group's only
	}
	var topics []string
	for _, t := range image.Names() {
		if re.MatchString(t) {
			topics = append(topics, t)
		}
	}
	slices.Sort(topics)
	if r, ok := g.regexes[expr]; ok && slices.Equal(r.topics, topics) {
		return out
	}
	at := time.UnixMilli(now.UnixMilli()).UTC() // as stored
	return g.emit(out, cgRec{kind: recRegex, regex: expr, regexTopics: topics, version: image.Version(), at: at})
}

// subscribedTopics is every topic some member subscribes to, by name or
// through a resolved regex.
func (g *consumerGroup) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.topics {
			out[t] = true
		}
		if m.regex != "" {
			for _, t := range g.regexes[m.regex].topics {
				out[t] = true
			}
		}
	}
	return out
}

// refreshMetadata re-resolves the regexes and the subscribed topics'
// metadata when the topics changed, or when the subscriptions did (bump);
// a change bumps the group epoch.
func (g *consumerGroup) refreshMetadata(now time.Time, image topicImage, bump bool, out []cgEffect) []cgEffect {
	if !bump && g.imageSeen && g.imageVersion == image.Version() {
		return out
	}
	if !g.imageSeen || g.imageVersion != image.Version() {
		for _, expr := range slices.Sorted(maps.Keys(g.regexes)) {
			before := g.regexes[expr].topics
			out = g.resolveRegex(now, expr, image, out)
			if !slices.Equal(before, g.regexes[expr].topics) {
				bump = true
			}
		}
	}
	g.imageVersion, g.imageSeen = image.Version(), true
	topics := map[string]assign.Topic{}
	for t := range g.subscribedTopics() {
		if md, ok := image.Topic(t); ok && md.Partitions > 0 {
			topics[t] = md
		}
	}
	if !topicsEqual(topics, g.topics) {
		out = g.emit(out, cgRec{kind: recPartitionMeta, topics: topics})
		bump = true
	}
	if bump {
		out = g.emit(out, cgRec{kind: recGroupEpoch, epoch: g.epoch + 1})
		out = append(out, cgEffect{kind: cgLog, msg: fmt.Sprintf("group epoch bumped to %d", g.epoch)})
	}
	return out
}

func topicsEqual(a, b map[string]assign.Topic) bool {
	return maps.EqualFunc(a, b, func(x, y assign.Topic) bool {
		return x.Partitions == y.Partitions && slices.EqualFunc(x.Racks, y.Racks, slices.Equal)
	})
}

// maybeAssign computes the target assignment of a group whose epoch moved
// past its assignment's, with the assignor most of its members name.
func (g *consumerGroup) maybeAssign(out []cgEffect) []cgEffect {
	if g.epoch <= g.assignmentEpoch {
		return out
	}
	a := g.assignor(g.preferredAssignor())
	spec := assign.Spec{Topics: g.topics}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		topics := slices.Clone(m.topics)
		if m.regex != "" {
			topics = append(topics, g.regexes[m.regex].topics...)
		}
		spec.Members = append(spec.Members, assign.Member{ID: id, InstanceID: m.instanceID, Rack: m.rack, Topics: topics, Current: g.target[id]})
	}
	result := a.Assign(spec)
	for _, id := range slices.Sorted(maps.Keys(result)) {
		if !result[id].Equal(g.target[id]) || g.target[id] == nil {
			out = g.emit(out, cgRec{kind: recTargetMember, member: id, partitions: result[id]})
		}
	}
	out = g.emit(out, cgRec{kind: recTargetMeta, epoch: g.epoch})
	return append(out, cgEffect{kind: cgLog, msg: fmt.Sprintf("target assignment computed with %q for epoch %d", a.Name(), g.epoch)})
}

// assignor returns the group's assignor named name, or its default.
func (g *consumerGroup) assignor(name string) assign.Assignor {
	for _, a := range g.cfg.assignors {
		if a.Name() == name {
			return a
		}
	}
	return g.cfg.assignors[0]
}

// preferredAssignor is the assignor most members name (ties to the name
// that sorts first), or the default.
func (g *consumerGroup) preferredAssignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := g.cfg.assignors[0].Name()
	n := 0
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

// reconcileMember moves m towards its target, arming its rebalance timer
// while it has partitions to revoke.
func (g *consumerGroup) reconcileMember(now time.Time, m *consumerMember, owned assign.Partitions, out []cgEffect) []cgEffect {
	if m.reconciledTo(g.assignmentEpoch) {
		return out
	}
	next, err := reconcile(m.currentAssignment, g.assignmentEpoch, g.target[m.id], owned, func(t string, p int) bool {
		_, held := g.owners[tpID{t, p}]
		return held
	})
	if err != nil || next.equal(m.currentAssignment) {
		return out
	}
	out = g.emit(out, cgRec{kind: recCurrent, member: m.id, current: &next})
	if next.state == memberUnrevoked {
		m.revokeDeadline, m.revokeEpoch = now.Add(m.rebalanceTimeout), m.epoch
		return append(out, cgEffect{kind: cgArm, member: m.id, revoke: true, at: m.revokeDeadline})
	}
	m.revokeDeadline = time.Time{}
	return append(out, cgEffect{kind: cgCancel, member: m.id, revoke: true})
}

// leave handles epochs -1 (leave) and -2 (a static member leaves for now).
func (g *consumerGroup) leave(now time.Time, ev cgHeartbeat, out []cgEffect) (cgResponse, []cgEffect, error) {
	resp := cgResponse{member: ev.member, epoch: ev.epoch}
	var m *consumerMember
	if ev.instanceID == "" {
		m = g.members[ev.member]
		if m == nil {
			return cgResponse{}, out, fmt.Errorf("%w: %q in consumer group %q", ErrUnknownMember, ev.member, g.id)
		}
	} else {
		m = g.members[g.static[ev.instanceID]]
		switch {
		case m == nil:
			return cgResponse{}, out, fmt.Errorf("%w: instance id %q is unknown in consumer group %q", ErrUnknownMember, ev.instanceID, g.id)
		case m.id != ev.member:
			return cgResponse{}, out, fmt.Errorf("%w: static member %q with instance id %q was fenced by member %q", ErrFencedInstanceID, ev.member, ev.instanceID, m.id)
		}
		if ev.epoch == staticLeaveEpoch {
			// It stays, holding its partitions, until it comes back or its
			// session ends.
			next := m.currentAssignment
			next.epoch, next.revoking = staticLeaveEpoch, assign.Partitions{}
			out = g.emit(out, cgRec{kind: recCurrent, member: m.id, current: &next})
			out = append(out, cgEffect{kind: cgCancel, member: m.id, revoke: true},
				cgEffect{kind: cgLog, member: m.id, msg: "static member left for now"})
			return resp, out, nil
		}
	}
	out = append(out, cgEffect{kind: cgLog, member: m.id, msg: "member left"})
	return resp, g.fence(m, out), nil
}

// fence removes m from the group, which bumps its epoch.
func (g *consumerGroup) fence(m *consumerMember, out []cgEffect) []cgEffect {
	regex := m.regex
	out = g.remove(m, out)
	if regex != "" && g.regexUsers(regex) == 0 {
		out = g.emit(out, cgRec{kind: recRegex, regex: regex, tombstone: true})
	}
	topics := map[string]assign.Topic{}
	for t := range g.subscribedTopics() {
		if md, ok := g.topics[t]; ok {
			topics[t] = md
		}
	}
	if !topicsEqual(topics, g.topics) {
		out = g.emit(out, cgRec{kind: recPartitionMeta, topics: topics})
	}
	out = g.emit(out, cgRec{kind: recGroupEpoch, epoch: g.epoch + 1})
	return append(out, cgEffect{kind: cgCancel, member: m.id}, cgEffect{kind: cgCancel, member: m.id, revoke: true})
}

// remove writes m's tombstones (Kafka's removeMember).
func (g *consumerGroup) remove(m *consumerMember, out []cgEffect) []cgEffect {
	out = g.emit(out, cgRec{kind: recCurrent, member: m.id, tombstone: true})
	out = g.emit(out, cgRec{kind: recTargetMember, member: m.id, tombstone: true})
	return g.emit(out, cgRec{kind: recMember, member: m.id, tombstone: true})
}

func (g *consumerGroup) timer(now time.Time, ev cgTimer, out []cgEffect) []cgEffect {
	m := g.members[ev.member]
	switch {
	case m == nil:
		return out
	case ev.revoke && (m.state != memberUnrevoked || m.epoch != m.revokeEpoch || m.revokeDeadline.IsZero()):
		return out // stale: it revoked, or moved on
	case ev.revoke && now.Before(m.revokeDeadline):
		return append(out, cgEffect{kind: cgArm, member: m.id, revoke: true, at: m.revokeDeadline})
	case ev.revoke:
		out = append(out, cgEffect{kind: cgLog, member: m.id,
			msg: fmt.Sprintf("member fenced: it did not revoke its partitions at epoch %d within %v", m.epoch, m.rebalanceTimeout)})
		return g.fence(m, out)
	case now.Before(m.deadline):
		return append(out, cgEffect{kind: cgArm, member: m.id, at: m.deadline})
	}
	out = append(out, cgEffect{kind: cgLog, member: m.id, msg: "member fenced: its session expired"})
	return g.fence(m, out)
}

// restarted starts the sessions of a group read back from records, as
// after a restart: every member has a session from now, a member
// revoking its rebalance timeout.
func (g *consumerGroup) restarted(now time.Time, out []cgEffect) []cgEffect {
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		m.deadline = now.Add(g.cfg.sessionTimeout)
		out = append(out, cgEffect{kind: cgArm, member: id, at: m.deadline})
		if m.state == memberUnrevoked {
			m.revokeDeadline, m.revokeEpoch = now.Add(m.rebalanceTimeout), m.epoch
			out = append(out, cgEffect{kind: cgArm, member: id, revoke: true, at: m.revokeDeadline})
		}
	}
	return out
}

// consumerGroupState is Kafka's ConsumerGroupState.
func (g *consumerGroup) state() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// clone returns a deep copy of g: the driver steps the copy and keeps it
// only once its records are stored.
func (g *consumerGroup) clone() *consumerGroup {
	n := *g
	n.members = make(map[string]*consumerMember, len(g.members))
	for id, m := range g.members {
		mc := *m
		mc.topics = slices.Clone(m.topics)
		mc.assigned, mc.revoking = m.assigned.Clone(), m.revoking.Clone()
		n.members[id] = &mc
	}
	n.static = maps.Clone(g.static)
	n.target = make(map[string]assign.Partitions, len(g.target))
	for id, p := range g.target {
		n.target[id] = p.Clone()
	}
	n.topics = maps.Clone(g.topics)
	n.regexes = maps.Clone(g.regexes)
	n.owners = maps.Clone(g.owners)
	return &n
}
