package group

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-log/strata/group/assign"
)

// The membership and generation logic of one group, as a state machine
// without IO: step(now, event) changes the groupState and returns effects for
// the driver (Coordinator) to carry out — replies to pending Joins, timers to
// arm or cancel, lines to log. Time comes in with each event; the machine
// never reads a clock nor starts a timer.
//
// Timers are lazy: the machine asks the driver for a timer at a deadline
// (effArm) and the driver keeps at most one per key, firing at or before the
// latest deadline asked for. A heartbeat only moves the member's deadline;
// when the timer fires early, the machine arms it again at the new deadline.
// So a stale or early timer is harmless, and invariant: every member that is
// not joining has a session timer armed at or before its deadline, and a
// group preparing a rebalance has a rebalance timer armed at or before its
// next deadline.

type phase uint8

const (
	phaseEmpty     phase = iota // no members
	phasePreparing              // a rebalance is in progress: waiting for members to join
	phaseStable                 // a generation is in effect
)

func (p phase) state() State {
	switch p {
	case phasePreparing:
		return StatePreparingRebalance
	case phaseStable:
		return StateStable
	}
	return StateEmpty
}

type member struct {
	id               string
	clientID         string
	topics           []string // sorted, unique
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	// deadline is when the session expires unless renewed by a heartbeat,
	// commit or join; it does not apply while the member is joining.
	deadline time.Time
	joining  bool   // a Join is pending: the member is alive whatever its deadline
	waiter   uint64 // the pending Join's token
	// inGeneration: the member was assigned in some generation, so its
	// client knows its id. A member that never was is dropped if it
	// withdraws its first Join.
	inGeneration bool
	assignment   []TopicPartition // in the current generation
}

type groupState struct {
	id         string
	phase      phase
	generation int32
	members    map[string]*member
	// partitions is the latest partition count seen (in a Join) of every
	// topic a member subscribes to; assigned is the counts the current
	// generation's assignment was computed from.
	partitions map[string]int
	assigned   map[string]int
	// While preparing: the rebalance completes once every member has joined
	// and delayUntil (the initial rebalance delay, zero if none) has passed,
	// or at rebalanceDeadline, dropping the members that have not joined.
	rebalanceDeadline time.Time
	delayUntil        time.Time
	initialDelay      time.Duration
	offsets           map[TopicPartition]int64 // committed
}

func newGroupState(id string, initialDelay time.Duration) *groupState {
	return &groupState{
		id:           id,
		members:      make(map[string]*member),
		partitions:   make(map[string]int),
		initialDelay: initialDelay,
		offsets:      make(map[TopicPartition]int64),
	}
}

// idle reports whether the group holds nothing worth keeping.
func (g *groupState) idle() bool {
	return g.phase == phaseEmpty && len(g.members) == 0 && len(g.offsets) == 0
}

// Events.

type event interface{ isEvent() }

// joinEvent is a validated JoinRequest with its defaults applied.
type joinEvent struct {
	member           string
	isNew            bool // the driver assigned the id: the request had none
	clientID         string
	topics           []string // sorted, unique
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	partitions       map[string]int // count of each subscribed topic the driver found
	waiter           uint64         // token of the Join call, > 0
}

// cancelJoinEvent: the Join call with this token gave up (its ctx ended).
type cancelJoinEvent struct {
	member string
	waiter uint64
}

type heartbeatEvent struct {
	member     string
	generation int32
}

type leaveEvent struct{ member string }

// commitEvent asks whether a commit may proceed; it changes nothing but the
// member's session deadline. The offsets are applied by applyCommit once
// stored.
type commitEvent struct {
	member     string
	generation int32
}

// timerEvent: the timer of a member's session (member != "") or of the
// rebalance (member == "") fired.
type timerEvent struct{ member string }

func (joinEvent) isEvent()       {}
func (cancelJoinEvent) isEvent() {}
func (heartbeatEvent) isEvent()  {}
func (leaveEvent) isEvent()      {}
func (commitEvent) isEvent()     {}
func (timerEvent) isEvent()      {}

// Effects.

type effectKind uint8

const (
	effReply  effectKind = iota + 1 // answer the Join call waiter with resp or err
	effArm                          // have timer fire at or before at
	effCancel                       // timer is no longer needed
	effLog                          // log msg about member for reason
)

type effect struct {
	kind   effectKind
	waiter uint64
	resp   JoinResponse
	err    error
	timer  string // a member id; "" = the group's rebalance timer
	at     time.Time
	msg    string
	member string
	reason string
}

func (k effectKind) String() string {
	switch k {
	case effReply:
		return "reply"
	case effArm:
		return "arm"
	case effCancel:
		return "cancel"
	case effLog:
		return "log"
	}
	return fmt.Sprintf("effectKind(%d)", uint8(k))
}

// step applies ev at time now, appending the resulting effects to out. An
// event that returns an error changes nothing, apart from a heartbeat or
// commit still renewing the member's session where Kafka does (a heartbeat
// during a rebalance answers ErrRebalanceInProgress but keeps the member
// alive).
func (g *groupState) step(now time.Time, ev event, out []effect) ([]effect, error) {
	switch ev := ev.(type) {
	case joinEvent:
		return g.join(now, ev, out)
	case cancelJoinEvent:
		return g.cancelJoin(now, ev, out), nil
	case heartbeatEvent:
		return out, g.heartbeat(now, ev)
	case leaveEvent:
		return g.leave(now, ev, out)
	case commitEvent:
		return out, g.checkCommit(now, ev)
	case timerEvent:
		return g.timer(now, ev, out), nil
	}
	panic(fmt.Sprintf("group: unknown event %T", ev))
}

func (g *groupState) join(now time.Time, ev joinEvent, out []effect) ([]effect, error) {
	m, known := g.members[ev.member]
	if !known && !ev.isNew {
		return out, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	maps.Copy(g.partitions, ev.partitions)
	if !known {
		m = &member{id: ev.member}
		g.members[m.id] = m
	}
	changed := !known || !slices.Equal(m.topics, ev.topics) || g.countsChanged(ev)
	if m.joining {
		out = append(out, effect{kind: effReply, waiter: m.waiter,
			err: fmt.Errorf("%w: superseded by a newer Join of member %q", ErrRebalanceInProgress, m.id)})
	}
	m.clientID, m.topics = ev.clientID, ev.topics
	m.sessionTimeout, m.rebalanceTimeout = ev.sessionTimeout, ev.rebalanceTimeout

	if g.phase == phaseStable && !changed {
		// A member of the current generation rejoining with the same
		// subscription (it missed its Join's answer, say): the generation
		// stands, as in Kafka for a follower whose metadata did not change.
		m.deadline = now.Add(m.sessionTimeout)
		return append(out,
			effect{kind: effArm, timer: m.id, at: m.deadline},
			effect{kind: effReply, waiter: ev.waiter, resp: g.response(m)}), nil
	}
	m.joining, m.waiter = true, ev.waiter
	out = append(out, effect{kind: effCancel, timer: m.id}) // alive while joining
	switch g.phase {
	case phaseEmpty:
		out = g.startRebalance(now, "first member joined", true, out)
	case phaseStable:
		reason := "member changed its subscription"
		if !known {
			reason = "new member joined"
		}
		out = g.startRebalance(now, reason, false, out)
	case phasePreparing:
		if !known && now.Before(g.delayUntil) {
			g.delayUntil = minTime(now.Add(g.initialDelay), g.rebalanceDeadline)
			out = append(out, effect{kind: effArm, at: g.nextRebalanceTimer(now)})
		}
	}
	if !known {
		out = append(out, effect{kind: effLog, msg: "member joined", member: m.id})
	}
	return g.maybeComplete(now, out), nil
}

// countsChanged reports whether a Join sees a partition count, for a topic
// of its subscription, other than the current assignment was computed from.
func (g *groupState) countsChanged(ev joinEvent) bool {
	for _, t := range ev.topics {
		if ev.partitions[t] != g.assigned[t] {
			return true
		}
	}
	return false
}

func (g *groupState) cancelJoin(now time.Time, ev cancelJoinEvent, out []effect) []effect {
	m := g.members[ev.member]
	if m == nil || !m.joining || m.waiter != ev.waiter {
		return out // answered, superseded or removed already
	}
	m.joining, m.waiter = false, 0 // nobody to answer any more
	if !m.inGeneration {
		// Its client never learnt its id: it cannot come back as this member.
		return g.maybeComplete(now, g.remove(m, "withdrew its first join", out))
	}
	m.deadline = now.Add(m.sessionTimeout)
	return append(out, effect{kind: effArm, timer: m.id, at: m.deadline})
}

func (g *groupState) heartbeat(now time.Time, ev heartbeatEvent) error {
	m := g.members[ev.member]
	if m == nil {
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	if ev.generation != g.generation {
		return fmt.Errorf("%w: %d, group %q is at %d", ErrIllegalGeneration, ev.generation, g.id, g.generation)
	}
	if !m.joining {
		m.deadline = now.Add(m.sessionTimeout)
	}
	if g.phase == phasePreparing {
		return fmt.Errorf("%w: group %q", ErrRebalanceInProgress, g.id)
	}
	return nil
}

func (g *groupState) leave(now time.Time, ev leaveEvent, out []effect) ([]effect, error) {
	m := g.members[ev.member]
	if m == nil {
		return out, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	return g.removed(now, g.remove(m, "left the group", out), "member left"), nil
}

// checkCommit: a commit is accepted from a member of the current generation,
// also while a rebalance is in progress (as Kafka accepts it in
// PreparingRebalance: a member told to rejoin commits first), and from a
// non-member (member "" with a negative generation) only while the group has
// no members, as Kafka does for consumers that assign partitions themselves.
func (g *groupState) checkCommit(now time.Time, ev commitEvent) error {
	if ev.member == "" && ev.generation < 0 {
		if len(g.members) > 0 {
			return fmt.Errorf("%w: a commit without a member id to group %q, which has members", ErrUnknownMember, g.id)
		}
		return nil
	}
	m := g.members[ev.member]
	if m == nil {
		return fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	if ev.generation != g.generation {
		return fmt.Errorf("%w: commit from generation %d, group %q is at %d", ErrIllegalGeneration, ev.generation, g.id, g.generation)
	}
	if !m.joining {
		m.deadline = now.Add(m.sessionTimeout)
	}
	return nil
}

// applyCommit records offsets that checkCommit allowed and the store made
// durable.
func (g *groupState) applyCommit(offsets map[TopicPartition]int64) {
	maps.Copy(g.offsets, offsets)
}

func (g *groupState) timer(now time.Time, ev timerEvent, out []effect) []effect {
	if ev.member == "" {
		return g.rebalanceTimer(now, out)
	}
	m := g.members[ev.member]
	if m == nil || m.joining {
		return out // stale: removed, or alive while joining
	}
	if now.Before(m.deadline) {
		return append(out, effect{kind: effArm, timer: m.id, at: m.deadline})
	}
	return g.removed(now, g.remove(m, "session timed out", out), "member's session timed out")
}

func (g *groupState) rebalanceTimer(now time.Time, out []effect) []effect {
	if g.phase != phasePreparing {
		return out // stale
	}
	if now.Before(g.rebalanceDeadline) {
		out = g.maybeComplete(now, out)
		if g.phase == phasePreparing {
			out = append(out, effect{kind: effArm, at: g.nextRebalanceTimer(now)})
		}
		return out
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		if m := g.members[id]; !m.joining {
			out = g.remove(m, "did not rejoin within the rebalance timeout", out)
		}
	}
	return g.complete(now, out)
}

// remove deletes m from the group; its pending Join, if any, fails with
// ErrUnknownMember.
func (g *groupState) remove(m *member, reason string, out []effect) []effect {
	delete(g.members, m.id)
	out = append(out,
		effect{kind: effCancel, timer: m.id},
		effect{kind: effLog, msg: "member removed", member: m.id, reason: reason})
	if m.joining {
		out = append(out, effect{kind: effReply, waiter: m.waiter,
			err: fmt.Errorf("%w: %q %s", ErrUnknownMember, m.id, reason)})
	}
	return out
}

// removed moves the group on after a member was removed: a stable group
// rebalances, a rebalancing one may now be complete.
func (g *groupState) removed(now time.Time, out []effect, reason string) []effect {
	if g.phase == phaseStable {
		out = g.startRebalance(now, reason, false, out)
	}
	return g.maybeComplete(now, out)
}

// startRebalance moves the group to preparing: every member must join again
// (the eager protocol) before rebalanceDeadline, the longest rebalance
// timeout of its members from now. fromEmpty applies the initial delay.
func (g *groupState) startRebalance(now time.Time, reason string, fromEmpty bool, out []effect) []effect {
	g.phase = phasePreparing
	var longest time.Duration
	for _, m := range g.members {
		longest = max(longest, m.rebalanceTimeout)
	}
	g.rebalanceDeadline = now.Add(longest)
	g.delayUntil = time.Time{}
	if fromEmpty && g.initialDelay > 0 {
		g.delayUntil = minTime(now.Add(g.initialDelay), g.rebalanceDeadline)
	}
	return append(out,
		effect{kind: effArm, at: g.nextRebalanceTimer(now)},
		effect{kind: effLog, msg: "rebalance started", reason: reason})
}

func (g *groupState) nextRebalanceTimer(now time.Time) time.Time {
	if now.Before(g.delayUntil) {
		return g.delayUntil
	}
	return g.rebalanceDeadline
}

func (g *groupState) maybeComplete(now time.Time, out []effect) []effect {
	if g.phase != phasePreparing || len(g.members) > 0 && now.Before(g.delayUntil) {
		return out // (with no members left, there is no one to wait for)
	}
	for _, m := range g.members {
		if !m.joining {
			return out
		}
	}
	return g.complete(now, out)
}

// complete ends the rebalance: a new generation of the members that joined,
// each answered with its range assignment, each session starting now.
func (g *groupState) complete(now time.Time, out []effect) []effect {
	g.generation++
	g.rebalanceDeadline, g.delayUntil = time.Time{}, time.Time{}
	out = append(out, effect{kind: effCancel})
	if len(g.members) == 0 {
		g.phase = phaseEmpty
		clear(g.partitions)
		g.assigned = nil
		return append(out, effect{kind: effLog, msg: "group is empty", reason: fmt.Sprintf("generation %d", g.generation)})
	}
	g.phase = phaseStable
	subs := make(map[string][]string, len(g.members))
	counts := make(map[string]int)
	for id, m := range g.members {
		subs[id] = m.topics
		for _, t := range m.topics {
			counts[t] = g.partitions[t]
		}
	}
	g.partitions, g.assigned = counts, maps.Clone(counts) // forget topics no one subscribes to
	assignment := assign.Range(subs, g.partitions)
	out = append(out, effect{kind: effLog, msg: "rebalance completed",
		reason: fmt.Sprintf("generation %d with %d members", g.generation, len(g.members))})
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		waiter := m.waiter
		m.assignment, m.inGeneration = assignment[id], true
		m.joining, m.waiter = false, 0
		m.deadline = now.Add(m.sessionTimeout)
		out = append(out,
			effect{kind: effArm, timer: id, at: m.deadline},
			effect{kind: effReply, waiter: waiter, resp: g.response(m)})
	}
	return out
}

func (g *groupState) response(m *member) JoinResponse {
	return JoinResponse{
		MemberID:   m.id,
		Generation: g.generation,
		Assignment: slices.Clone(m.assignment),
		Members:    len(g.members),
	}
}

func (g *groupState) describe() Description {
	d := Description{Group: g.id, State: g.phase.state(), Generation: g.generation}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		md := MemberDescription{ID: id, ClientID: m.clientID, Topics: slices.Clone(m.topics), Joining: m.joining}
		if m.inGeneration {
			md.Assignment = slices.Clone(m.assignment)
		}
		d.Members = append(d.Members, md)
	}
	return d
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
