package group

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The membership and generation logic of one group, as a state machine
// without IO: step(now, event) changes the groupState and returns effects for
// the driver (Coordinator) to carry out — replies to pending Joins and Syncs,
// timers to arm or cancel, lines to log. Time comes in with each event; the
// machine never reads a clock nor starts a timer. Protocol metadata and
// assignments are opaque bytes to it.
//
// Timers are lazy: the machine asks the driver for a timer at a deadline
// (effArm) and the driver keeps at most one per key, firing at or before the
// latest deadline asked for. A heartbeat only moves the member's deadline;
// when the timer fires early, the machine arms it again at the new deadline.
// So a stale or early timer is harmless, and invariant: every member that is
// neither joining nor awaiting its assignment has a session timer armed at or
// before its deadline, and a group preparing or completing a rebalance has a
// rebalance timer armed at or before its next deadline.

type phase uint8

const (
	phaseEmpty      phase = iota // no members
	phasePreparing               // a rebalance is in progress: waiting for members to join
	phaseCompleting              // a generation is formed: waiting for the leader's assignment
	phaseStable                  // a generation is in effect, with its assignment
)

func (p phase) state() State {
	switch p {
	case phasePreparing:
		return StatePreparingRebalance
	case phaseCompleting:
		return StateCompletingRebalance
	case phaseStable:
		return StateStable
	}
	return StateEmpty
}

type member struct {
	id               string
	instanceID       string // "" for a dynamic member
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []Protocol // in the member's order of preference
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	// deadline is when the session expires unless renewed by a heartbeat,
	// commit, join or sync; it does not apply while the member is joining or
	// awaiting its assignment.
	deadline time.Time
	joining  bool   // a Join is pending: the member is alive whatever its deadline
	waiter   uint64 // the pending Join's token
	syncing  bool   // a Sync is pending, waiting for the leader's: alive too
	syncer   uint64 // the pending Sync's token
	synced   bool   // it sent a Sync in the current generation
	// inGeneration: the member was in some generation, so its client knows
	// its id. A member that never was is dropped if it withdraws its first
	// Join.
	inGeneration bool
	assignment   []byte // from the leader, in the current generation
}

type groupState struct {
	id         string
	phase      phase
	generation int32
	members    map[string]*member
	// protocolType is every member's; protocol and leader are the current
	// generation's ("" when empty).
	protocolType string
	protocol     string
	leader       string
	// static maps the instance id of every static member to its member id.
	static map[string]string
	// pending holds the member ids handed out with ErrMemberIDRequired
	// (KIP-394) and not joined with yet, until their deadline.
	pending map[string]time.Time
	// While preparing: the rebalance completes once every member has joined
	// and delayUntil (the initial rebalance delay, zero if none) has passed,
	// or at rebalanceDeadline, dropping the members that have not joined.
	// While completing, rebalanceDeadline is when the members that have not
	// sent a Sync are dropped (and the others rebalance).
	rebalanceDeadline time.Time
	delayUntil        time.Time
	initialDelay      time.Duration
	maxSize           int                      // members (and pending ids) at most; 0: no limit
	offsets           map[TopicPartition]int64 // committed
	// meta is the leader epoch and metadata of the commits in offsets that
	// came with any (CommitWithMetadata); the others have none.
	meta map[TopicPartition]offsetMeta
	// metaChanged: the membership changed within the generation (a static
	// member replaced, a member removed), so the group's metadata must be
	// stored again although the group did not become Stable or Empty. The
	// driver clears it.
	metaChanged bool
	// stableGeneration is the generation the group was last Stable in (its
	// metadata stored with every member's assignment).
	stableGeneration int32
	// storing: the leader's assignment of the current generation is being
	// stored (the group is completing): every Sync of the generation, the
	// leader's too, waits for the outcome (storedEvent), as Kafka answers
	// SyncGroup from its storeGroup callback, once the record is committed.
	// A member told its assignment before would hold a generation that the
	// group's next coordinator, after a move, may never have seen: its
	// commits there are ILLEGAL_GENERATION.
	storing bool
	// restored is the generation a previous coordinator stored and this
	// one restored (0 if the group was never restored): while the group is
	// still in it, a member in a newer generation is one the previous
	// coordinator formed and never stored (lostGeneration).
	restored int32
}

func newGroupState(id string, initialDelay time.Duration) *groupState {
	return &groupState{
		id:           id,
		members:      make(map[string]*member),
		pending:      make(map[string]time.Time),
		static:       make(map[string]string),
		initialDelay: initialDelay,
		offsets:      make(map[TopicPartition]int64),
	}
}

// idle reports whether the group holds nothing worth keeping.
func (g *groupState) idle() bool {
	return g.phase == phaseEmpty && len(g.members) == 0 && len(g.offsets) == 0 && len(g.pending) == 0
}

// Events.

type event interface{ isEvent() }

// joinEvent is a validated JoinRequest with its defaults applied.
type joinEvent struct {
	member string
	// isNew: the driver assigned the id (the request had none); with
	// requireKnown the member is not added but told its id
	// (ErrMemberIDRequired), to join with it.
	isNew            bool
	requireKnown     bool
	instanceID       string
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []Protocol // non-empty, names unique
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	waiter           uint64 // token of the Join call, > 0
}

// cancelJoinEvent: the Join call with this token gave up (its ctx ended).
type cancelJoinEvent struct {
	member string
	waiter uint64
}

// syncEvent is a SyncRequest; assignments only from the leader.
type syncEvent struct {
	member       string
	generation   int32
	protocolType string // "" → not checked
	protocol     string // "" → not checked
	assignments  map[string][]byte
	waiter       uint64 // token of the Sync call, > 0
}

// cancelSyncEvent: the Sync call with this token gave up.
type cancelSyncEvent struct {
	member string
	waiter uint64
}

type heartbeatEvent struct {
	member     string
	generation int32
}

type leaveEvent struct{ member string }

// commitEvent asks whether a commit may proceed; it changes nothing but the
// member's session deadline. The offsets are applied by applyCommitted once
// stored.
type commitEvent struct {
	member     string
	generation int32
}

// timerEvent: the timer of a member's session (member != "") or of the
// rebalance (member == "") fired.
type timerEvent struct{ member string }

// storedEvent: the metadata record of generation that the driver was
// asked to store (effStore), or that it stored as the group changed, is
// durable (err nil) or could not be stored. A generation whose assignment
// was being stored becomes Stable and every Sync waiting is answered; if
// the store failed, the Syncs fail with ErrRebalanceInProgress and the
// group rebalances, as Kafka does when it cannot write the leader's
// assignment; so does a group still stable in a generation whose record
// (a member replaced or removed) failed: its members join again, and the
// next generation is stored.
type storedEvent struct {
	generation int32
	err        error
}

func (joinEvent) isEvent()       {}
func (cancelJoinEvent) isEvent() {}
func (syncEvent) isEvent()       {}
func (cancelSyncEvent) isEvent() {}
func (heartbeatEvent) isEvent()  {}
func (leaveEvent) isEvent()      {}
func (commitEvent) isEvent()     {}
func (timerEvent) isEvent()      {}
func (storedEvent) isEvent()     {}

// Effects.

type effectKind uint8

const (
	effReply  effectKind = iota + 1 // answer the Join or Sync call waiter with resp, sync or err
	effArm                          // have timer fire at or before at
	effCancel                       // timer is no longer needed
	effLog                          // log msg about member for reason
	effStore                        // store the group's metadata record now, then step storedEvent
)

type effect struct {
	kind   effectKind
	waiter uint64
	resp   JoinResponse // to a Join
	sync   SyncResponse // to a Sync
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
	case effStore:
		return "store"
	}
	return fmt.Sprintf("effectKind(%d)", uint8(k))
}

// step applies ev at time now, appending the resulting effects to out. An
// event that returns an error changes nothing, apart from a heartbeat still
// renewing the member's session where Kafka does (a heartbeat during a
// rebalance answers ErrRebalanceInProgress but keeps the member alive) and
// a Join answered ErrMemberIDRequired recording the id it hands out.
func (g *groupState) step(now time.Time, ev event, out []effect) ([]effect, error) {
	switch ev := ev.(type) {
	case joinEvent:
		return g.join(now, ev, out)
	case cancelJoinEvent:
		return g.cancelJoin(now, ev, out), nil
	case syncEvent:
		return g.sync(now, ev, out)
	case cancelSyncEvent:
		return g.cancelSync(now, ev, out), nil
	case heartbeatEvent:
		return g.heartbeat(now, ev, out)
	case leaveEvent:
		return g.leave(now, ev, out)
	case commitEvent:
		return out, g.checkCommit(now, ev)
	case timerEvent:
		return g.timer(now, ev, out), nil
	case storedEvent:
		return g.stored(now, ev, out), nil
	}
	panic(fmt.Sprintf("group: unknown event %T", ev))
}

func (g *groupState) join(now time.Time, ev joinEvent, out []effect) ([]effect, error) {
	for id, until := range g.pending {
		if !now.Before(until) {
			delete(g.pending, id)
		}
	}
	m, known := g.members[ev.member]
	_, pending := g.pending[ev.member]
	holder := g.static[ev.instanceID] // the member id holding the instance id, if any
	switch {
	case ev.instanceID != "" && !ev.isNew && holder != "" && holder != ev.member,
		known && m.instanceID != ev.instanceID:
		return out, fmt.Errorf("%w: member %q with instance id %q in group %q", ErrFencedInstanceID, ev.member, ev.instanceID, g.id)
	case !known && !ev.isNew && !pending:
		return out, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	replaces := ev.instanceID != "" && ev.isNew && holder != ""
	newID := ev.member
	if replaces {
		ev.member = holder // checked as the member it replaces
	}
	if err := g.supports(ev); err != nil {
		return out, err
	}
	if !known && !pending && !replaces && g.maxSize > 0 && len(g.members)+len(g.pending) >= g.maxSize {
		return out, fmt.Errorf("%w: group %q has %d members and %d pending, at most %d", ErrGroupMaxSizeReached, g.id, len(g.members), len(g.pending), g.maxSize)
	}
	if replaces {
		// KIP-345: a new instance of a static member takes the old one's
		// place (its generation, its assignment) under the new id; the old
		// id is fenced.
		ev.member = newID
		m, known = g.members[holder], true
		out = g.fence(m, out)
		delete(g.members, holder)
		m.id = ev.member
		g.members[m.id] = m
		g.static[ev.instanceID] = m.id
		if g.leader == holder {
			g.leader = m.id
		}
		g.membershipChanged()
		out = append(out, effect{kind: effCancel, timer: holder},
			effect{kind: effLog, msg: "static member replaced", member: m.id, reason: "instance " + ev.instanceID + " was " + holder})
	}
	if !known && ev.isNew && ev.requireKnown && ev.instanceID == "" {
		// KIP-394: the member learns its id and joins again with it.
		g.pending[ev.member] = now.Add(ev.sessionTimeout)
		return out, fmt.Errorf("%w: rejoin group %q as %q", ErrMemberIDRequired, g.id, ev.member)
	}
	delete(g.pending, ev.member)
	if !known {
		m = &member{id: ev.member, instanceID: ev.instanceID}
		g.members[m.id] = m
		if ev.instanceID != "" {
			g.static[ev.instanceID] = m.id
		}
	}
	changed := !known || m.protocolType != ev.protocolType || !slices.EqualFunc(m.protocols, ev.protocols, Protocol.equal)
	if m.joining {
		out = append(out, effect{kind: effReply, waiter: m.waiter,
			err: fmt.Errorf("%w: superseded by a newer Join of member %q", ErrRebalanceInProgress, m.id)})
		m.joining, m.waiter = false, 0
	}
	if m.syncing {
		out = append(out, effect{kind: effReply, waiter: m.syncer,
			err: fmt.Errorf("%w: member %q joins again", ErrRebalanceInProgress, m.id)})
		m.syncing, m.syncer = false, 0
	}
	m.clientID, m.clientHost = ev.clientID, ev.clientHost
	m.protocolType, m.protocols = ev.protocolType, ev.protocols
	m.sessionTimeout, m.rebalanceTimeout = ev.sessionTimeout, ev.rebalanceTimeout
	g.protocolType = ev.protocolType // every member's (or the only member's, which may change it)

	// A member of the current generation rejoining with the same protocols
	// (it missed its Join's answer, say) gets the generation back, as in
	// Kafka: in CompletingRebalance any member, in Stable a follower (the
	// leader's Join rebalances: that is how it asks for a new assignment,
	// when partitions were added say).
	if !changed && (g.phase == phaseCompleting || g.phase == phaseStable && m.id != g.leader) {
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
	case phaseStable, phaseCompleting:
		reason := "member changed its protocols"
		switch {
		case !known:
			reason = "new member joined"
		case m.id == g.leader && !changed:
			reason = "leader rejoined"
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

// supports checks a Join's protocols against the group's, as Kafka does: a
// group with members other than this one has their protocol type, and some
// protocol all of them support must be among the joining member's; else
// ErrInconsistentGroupProtocol.
func (g *groupState) supports(ev joinEvent) error {
	others := 0
	for id := range g.members {
		if id != ev.member {
			others++
		}
	}
	if others == 0 {
		return nil
	}
	if ev.protocolType != g.protocolType {
		return fmt.Errorf("%w: protocol type %q, group %q has %q", ErrInconsistentGroupProtocol, ev.protocolType, g.id, g.protocolType)
	}
	for _, p := range ev.protocols {
		if g.supportedByAll(p.Name, ev.member) {
			return nil
		}
	}
	return fmt.Errorf("%w: none of the protocols of member %q is supported by every member of group %q",
		ErrInconsistentGroupProtocol, ev.member, g.id)
}

// supportedByAll reports whether every member but except lists the protocol.
func (g *groupState) supportedByAll(name, except string) bool {
	for id, m := range g.members {
		if id != except && !slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name }) {
			return false
		}
	}
	return true
}

// selectProtocol is Kafka's vote: among the protocols every member supports
// (never none: every Join was checked), each member votes for the first of
// its own list; the most votes win, a tie going to the name that sorts
// first.
func (g *groupState) selectProtocol() string {
	common := map[string]int{} // protocol → how many members list it
	for _, m := range g.members {
		for _, p := range m.protocols {
			common[p.Name]++
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if common[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
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

// sync takes a member's SyncGroup: the leader's brings the assignment of
// the generation, which answers every member's; a follower's waits for it
// while the group is completing, and is answered at once once stable.
func (g *groupState) sync(now time.Time, ev syncEvent, out []effect) ([]effect, error) {
	m := g.members[ev.member]
	switch {
	case m == nil:
		return out, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	case g.lostGen(ev.generation):
		return g.lostGeneration(now, m, ev.generation, out)
	case ev.generation != g.generation:
		return out, fmt.Errorf("%w: sync for generation %d, group %q is at %d", ErrIllegalGeneration, ev.generation, g.id, g.generation)
	case ev.protocolType != "" && ev.protocolType != g.protocolType || ev.protocol != "" && ev.protocol != g.protocol:
		return out, fmt.Errorf("%w: sync with protocol %q/%q, group %q has %q/%q", ErrInconsistentGroupProtocol,
			ev.protocolType, ev.protocol, g.id, g.protocolType, g.protocol)
	case g.phase == phasePreparing: // (also when m is joining: only a preparing group has joining members)
		return out, fmt.Errorf("%w: group %q", ErrRebalanceInProgress, g.id)
	}
	if m.syncing {
		out = append(out, effect{kind: effReply, waiter: m.syncer,
			err: fmt.Errorf("%w: superseded by a newer Sync of member %q", ErrRebalanceInProgress, m.id)})
		m.syncing, m.syncer = false, 0
	}
	m.synced = true
	if g.phase == phaseCompleting && m.id == g.leader && !g.storing {
		// The leader's: the generation's assignment, answered to every
		// member once stored (stored).
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			g.members[id].assignment = ev.assignments[id] // the event's own copy (Sync made it)
		}
		g.storing = true
		out = append(out, effect{kind: effStore},
			effect{kind: effLog, msg: "assignment received", member: m.id, reason: fmt.Sprintf("generation %d", g.generation)})
	}
	if g.phase == phaseCompleting {
		m.syncing, m.syncer = true, ev.waiter
		return append(out, effect{kind: effCancel, timer: m.id}), nil // alive while waiting
	}
	m.deadline = now.Add(m.sessionTimeout)
	return append(out,
		effect{kind: effArm, timer: m.id, at: m.deadline},
		effect{kind: effReply, waiter: ev.waiter, sync: g.syncResponse(m)}), nil
}

// stored takes the outcome of a store of the group's metadata (see
// storedEvent); an outcome for a generation the group has left behind
// changes nothing.
func (g *groupState) stored(now time.Time, ev storedEvent, out []effect) []effect {
	switch {
	case g.generation != ev.generation:
		return out
	case g.storing && ev.err == nil:
		g.storing = false
		g.phase, g.stableGeneration = phaseStable, g.generation
		g.rebalanceDeadline = time.Time{}
		out = append(out, effect{kind: effCancel},
			effect{kind: effLog, msg: "generation stored", member: g.leader, reason: fmt.Sprintf("generation %d", g.generation)})
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			if o := g.members[id]; o.syncing {
				o.deadline = now.Add(o.sessionTimeout)
				out = append(out,
					effect{kind: effArm, timer: id, at: o.deadline},
					effect{kind: effReply, waiter: o.syncer, sync: g.syncResponse(o)})
				o.syncing, o.syncer = false, 0
			}
		}
		return out
	case ev.err == nil:
		return out
	case g.storing:
		g.storing = false
		err := fmt.Errorf("%w: group %q: generation %d could not be stored: %w", ErrRebalanceInProgress, g.id, g.generation, ev.err)
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			if o := g.members[id]; o.syncing {
				o.deadline = now.Add(o.sessionTimeout)
				out = append(out,
					effect{kind: effArm, timer: id, at: o.deadline},
					effect{kind: effReply, waiter: o.syncer, err: err})
				o.syncing, o.syncer = false, 0
			}
		}
		return g.startRebalance(now, "group metadata not stored: "+ev.err.Error(), false, out)
	case g.phase == phaseStable:
		return g.startRebalance(now, "group metadata not stored: "+ev.err.Error(), false, out)
	}
	return out
}

func (g *groupState) cancelSync(now time.Time, ev cancelSyncEvent, out []effect) []effect {
	m := g.members[ev.member]
	if m == nil || !m.syncing || m.syncer != ev.waiter {
		return out
	}
	m.syncing, m.syncer = false, 0
	m.deadline = now.Add(m.sessionTimeout)
	return append(out, effect{kind: effArm, timer: m.id, at: m.deadline})
}

// lostGen reports whether generation is one a previous coordinator of
// the group formed after the generation this one restored, and never
// stored. Otherwise a newer generation is illegal, as on Kafka.
func (g *groupState) lostGen(generation int32) bool {
	return generation > g.generation && g.restored != 0 && g.generation == g.restored
}

// lostGeneration answers a member of the group that syncs or heartbeats
// in a generation newer than the group's: one an earlier coordinator of
// the group formed and never stored (it moved between the Join and the
// leader's Sync). Kafka answers ILLEGAL_GENERATION, which clients take as
// their group session failing; the member joins again all the same, so it
// is told that a rebalance is in progress — one is started if none is —
// and its session is renewed.
func (g *groupState) lostGeneration(now time.Time, m *member, generation int32, out []effect) ([]effect, error) {
	if !m.joining && !m.syncing {
		m.deadline = now.Add(m.sessionTimeout)
		out = append(out, effect{kind: effArm, timer: m.id, at: m.deadline})
	}
	if g.phase != phasePreparing {
		out = g.startRebalance(now, fmt.Sprintf("member %q is in generation %d, which was not stored", m.id, generation), false, out)
	}
	return out, fmt.Errorf("%w: group %q: generation %d was not stored, the group is at %d", ErrRebalanceInProgress, g.id, generation, g.generation)
}

// heartbeat: accepted from a member of the current generation, also while
// the group waits for the leader's assignment (Kafka's CompletingRebalance);
// ErrRebalanceInProgress while preparing, though it renews the session.
func (g *groupState) heartbeat(now time.Time, ev heartbeatEvent, out []effect) ([]effect, error) {
	m := g.members[ev.member]
	if m == nil {
		return out, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	if g.lostGen(ev.generation) {
		return g.lostGeneration(now, m, ev.generation, out)
	}
	if ev.generation != g.generation {
		return out, fmt.Errorf("%w: %d, group %q is at %d", ErrIllegalGeneration, ev.generation, g.id, g.generation)
	}
	if !m.joining && !m.syncing {
		m.deadline = now.Add(m.sessionTimeout)
	}
	if g.phase == phasePreparing {
		return out, fmt.Errorf("%w: group %q", ErrRebalanceInProgress, g.id)
	}
	return out, nil
}

func (g *groupState) leave(now time.Time, ev leaveEvent, out []effect) ([]effect, error) {
	m := g.members[ev.member]
	if m == nil {
		return out, fmt.Errorf("%w: %q in group %q", ErrUnknownMember, ev.member, g.id)
	}
	return g.removed(now, g.remove(m, "left the group", out), "member left"), nil
}

// checkCommit: a commit is accepted from a member of the current generation
// while the group is stable or preparing a rebalance (as Kafka accepts it in
// PreparingRebalance: a member told to rejoin commits first), not while it
// waits for the leader's assignment (ErrRebalanceInProgress, as Kafka), and
// from a non-member (member "" with a negative generation) only while the
// group has no members, as Kafka does for consumers that assign partitions
// themselves.
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
	if g.phase == phaseCompleting {
		return fmt.Errorf("%w: group %q awaits its assignment", ErrRebalanceInProgress, g.id)
	}
	if !m.joining && !m.syncing {
		m.deadline = now.Add(m.sessionTimeout)
	}
	return nil
}

// applyCommitted records commits that checkCommit allowed and the store
// made durable, with their leader epochs and metadata.
func (g *groupState) applyCommitted(offsets map[TopicPartition]CommittedOffset) {
	for tp, c := range offsets {
		g.offsets[tp] = c.Offset
		if m := c.meta(); m != (offsetMeta{LeaderEpoch: -1}) {
			if g.meta == nil {
				g.meta = make(map[TopicPartition]offsetMeta)
			}
			g.meta[tp] = m
		} else {
			delete(g.meta, tp)
		}
	}
}

// committed returns the commit of tp, if any.
func (g *groupState) committed(tp TopicPartition) (CommittedOffset, bool) {
	off, ok := g.offsets[tp]
	if !ok {
		return CommittedOffset{}, false
	}
	m, ok := g.meta[tp]
	if !ok {
		m = offsetMeta{LeaderEpoch: -1}
	}
	return CommittedOffset{Offset: off, LeaderEpoch: m.LeaderEpoch, Metadata: m.Metadata}, true
}

// forget drops the commits of tps.
func (g *groupState) forget(tps map[TopicPartition]int64) {
	for tp := range tps {
		delete(g.offsets, tp)
		delete(g.meta, tp)
	}
}

func (g *groupState) timer(now time.Time, ev timerEvent, out []effect) []effect {
	if ev.member == "" {
		return g.rebalanceTimer(now, out)
	}
	m := g.members[ev.member]
	if m == nil || m.joining || m.syncing {
		return out // stale: removed, or alive while joining or syncing
	}
	if now.Before(m.deadline) {
		return append(out, effect{kind: effArm, timer: m.id, at: m.deadline})
	}
	return g.removed(now, g.remove(m, "session timed out", out), "member's session timed out")
}

func (g *groupState) rebalanceTimer(now time.Time, out []effect) []effect {
	switch {
	case g.phase != phasePreparing && g.phase != phaseCompleting:
		return out // stale
	case now.Before(g.rebalanceDeadline):
		out = g.maybeComplete(now, out)
		if g.phase == phasePreparing || g.phase == phaseCompleting {
			out = append(out, effect{kind: effArm, at: g.nextRebalanceTimer(now)})
		}
		return out
	case g.phase == phaseCompleting:
		// The leader sent no assignment in time: drop the members that did
		// not sync (the leader among them), and rebalance the others.
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			if m := g.members[id]; !m.synced {
				out = g.remove(m, "sent no SyncGroup within the rebalance timeout", out)
			}
		}
		return g.removed(now, out, "no assignment within the rebalance timeout")
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		if m := g.members[id]; !m.joining {
			out = g.remove(m, "did not rejoin within the rebalance timeout", out)
		}
	}
	return g.complete(now, out)
}

// remove deletes m from the group; its pending Join or Sync, if any, fails
// with ErrUnknownMember.
func (g *groupState) remove(m *member, reason string, out []effect) []effect {
	delete(g.members, m.id)
	g.membershipChanged()
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
	out = append(out,
		effect{kind: effCancel, timer: m.id},
		effect{kind: effLog, msg: "member removed", member: m.id, reason: reason})
	if m.joining {
		out = append(out, effect{kind: effReply, waiter: m.waiter,
			err: fmt.Errorf("%w: %q %s", ErrUnknownMember, m.id, reason)})
	}
	if m.syncing {
		out = append(out, effect{kind: effReply, waiter: m.syncer,
			err: fmt.Errorf("%w: %q %s", ErrUnknownMember, m.id, reason)})
	}
	return out
}

// membershipChanged records that the members of the generation the group
// was last Stable in changed (one was removed or replaced), while the
// group still runs that generation: its metadata is stored again (Kafka
// stores it only when a generation completes), so that the next
// coordinator of the group, after a move, does not restore a member that
// is gone and wait a session timeout for it before a rebalance completes.
// Once a new generation is formed and not yet synced, the members have no
// assignment to store: the last stored one stands.
func (g *groupState) membershipChanged() { g.metaChanged = true }

// membershipToStore reports whether the change of members that
// membershipChanged recorded is to be stored now: while the group runs the
// generation it was last Stable in, every member of it has its assignment
// (one event may also have formed the next generation, whose members have
// none yet: its leader's Sync stores it).
func (g *groupState) membershipToStore() bool {
	return g.metaChanged && g.generation == g.stableGeneration && (g.phase == phaseStable || g.phase == phasePreparing)
}

// fence fails m's pending Join and Sync with ErrFencedInstanceID: a newer
// instance of the static member took its place.
func (g *groupState) fence(m *member, out []effect) []effect {
	err := fmt.Errorf("%w: instance %q of group %q has a newer member", ErrFencedInstanceID, m.instanceID, g.id)
	if m.joining {
		out = append(out, effect{kind: effReply, waiter: m.waiter, err: err})
		m.joining, m.waiter = false, 0
	}
	if m.syncing {
		out = append(out, effect{kind: effReply, waiter: m.syncer, err: err})
		m.syncing, m.syncer = false, 0
	}
	return out
}

// removed moves the group on after a member was removed: a stable or
// completing group rebalances, a preparing one may now be complete.
func (g *groupState) removed(now time.Time, out []effect, reason string) []effect {
	if g.phase == phaseStable || g.phase == phaseCompleting {
		out = g.startRebalance(now, reason, false, out)
	}
	return g.maybeComplete(now, out)
}

// startRebalance moves the group to preparing: every member must join again
// (the eager protocol) before rebalanceDeadline, the longest rebalance
// timeout of its members from now. fromEmpty applies the initial delay. A
// group that was completing answers the Syncs waiting for the leader's
// assignment with ErrRebalanceInProgress.
func (g *groupState) startRebalance(now time.Time, reason string, fromEmpty bool, out []effect) []effect {
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		m.synced = false
		if m.syncing {
			out = append(out, effect{kind: effReply, waiter: m.syncer,
				err: fmt.Errorf("%w: group %q: %s", ErrRebalanceInProgress, g.id, reason)})
			m.syncing, m.syncer = false, 0
			m.deadline = now.Add(m.sessionTimeout)
			out = append(out, effect{kind: effArm, timer: id, at: m.deadline})
		}
	}
	g.phase, g.storing = phasePreparing, false
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

// complete ends the joining: a new generation of the members that joined,
// with the protocol they voted for and a leader (the previous one if it is
// still a member, else the member whose id sorts first). Every Join is
// answered, the leader's with every member's metadata; the group then waits
// for the leader's Sync, up to the longest rebalance timeout.
func (g *groupState) complete(now time.Time, out []effect) []effect {
	g.generation++
	g.rebalanceDeadline, g.delayUntil = time.Time{}, time.Time{}
	out = append(out, effect{kind: effCancel})
	if len(g.members) == 0 {
		g.phase = phaseEmpty
		g.protocolType, g.protocol, g.leader = "", "", ""
		return append(out, effect{kind: effLog, msg: "group is empty", reason: fmt.Sprintf("generation %d", g.generation)})
	}
	g.phase = phaseCompleting
	g.protocol = g.selectProtocol()
	ids := slices.Sorted(maps.Keys(g.members))
	if g.members[g.leader] == nil {
		g.leader = ids[0]
	}
	var longest time.Duration
	for _, m := range g.members {
		longest = max(longest, m.rebalanceTimeout)
	}
	g.rebalanceDeadline = now.Add(longest)
	out = append(out,
		effect{kind: effArm, at: g.rebalanceDeadline},
		effect{kind: effLog, msg: "rebalance completed", member: g.leader,
			reason: fmt.Sprintf("generation %d with %d members, protocol %q", g.generation, len(g.members), g.protocol)})
	for _, id := range ids {
		m := g.members[id]
		waiter := m.waiter
		m.assignment, m.inGeneration, m.synced = nil, true, false
		m.joining, m.waiter = false, 0
		m.deadline = now.Add(m.sessionTimeout)
		out = append(out,
			effect{kind: effArm, timer: id, at: m.deadline},
			effect{kind: effReply, waiter: waiter, resp: g.response(m)})
	}
	return out
}

// response is m's JoinResponse for the current generation.
func (g *groupState) response(m *member) JoinResponse {
	r := JoinResponse{
		MemberID:     m.id,
		Generation:   g.generation,
		Members:      len(g.members),
		ProtocolType: g.protocolType,
		Protocol:     g.protocol,
		Leader:       g.leader,
	}
	if m.id == g.leader {
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			o := g.members[id]
			// Shared, not copied: the leader's answer carries every
			// member's metadata, and a member's bytes are never written
			// (a rejoin replaces them).
			r.MemberMetadata = append(r.MemberMetadata, MemberMetadata{ID: id, InstanceID: o.instanceID, Metadata: o.metadataRef(g.protocol)})
		}
	}
	return r
}

func (g *groupState) syncResponse(m *member) SyncResponse {
	return SyncResponse{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment} // shared, as MemberMetadata
}

// metadata is a copy of m's metadata for protocol name (nil if it has
// none).
func (m *member) metadata(name string) []byte { return slices.Clone(m.metadataRef(name)) }

// metadataRef is m's metadata for protocol name, not copied: read only.
func (m *member) metadataRef(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

func (g *groupState) describe() Description {
	d := Description{Group: g.id, State: g.phase.state(), Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		md := MemberDescription{ID: id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost, Joining: m.joining}
		if m.inGeneration {
			md.MemberMetadata = m.metadata(g.protocol)
		}
		if g.phase == phaseStable || g.phase == phasePreparing && m.inGeneration {
			md.MemberAssignment = slices.Clone(m.assignment)
		}
		d.Members = append(d.Members, md)
	}
	return d
}

func (p Protocol) equal(q Protocol) bool {
	return p.Name == q.Name && string(p.Metadata) == string(q.Metadata)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
