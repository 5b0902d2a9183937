package group

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The state machine is tested by scripts: each step is an event at a time
// (since t0), or an advance of the harness's virtual clock, which fires the
// timers the machine asked for, in order, as the driver would. After every
// step the harness checks the machine's invariants.
//
// Protocols are opaque to the machine; in the scripts a member's metadata
// for a protocol is "<protocol>@<member>", so that a leader's reply shows
// whose metadata, for which protocol, it got.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	testSession   = 10 * time.Second
	testRebalance = 60 * time.Second
	testType      = "consumer"
)

// join is the joinEvent of member id with Join token w and protocols
// (default: "range"), most preferred first.
func join(id string, w uint64, protocols ...string) joinEvent {
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	ev := joinEvent{member: id, clientID: "c", protocolType: testType, sessionTimeout: testSession,
		rebalanceTimeout: testRebalance, waiter: w}
	for _, p := range protocols {
		ev.protocols = append(ev.protocols, Protocol{Name: p, Metadata: []byte(p + "@" + id)})
	}
	return ev
}

// newJoin is the first Join of a member, whose id the driver assigned.
func newJoin(id string, w uint64, protocols ...string) joinEvent {
	ev := join(id, w, protocols...)
	ev.isNew = true
	return ev
}

// syn is member id's Sync of generation gen with token w; the leader's
// carries assignments "a=x b=y" (member a gets the bytes "x").
func syn(id string, gen int32, w uint64, assignments string) syncEvent {
	ev := syncEvent{member: id, generation: gen, waiter: w}
	if assignments != "" {
		ev.assignments = map[string][]byte{}
		for _, f := range strings.Fields(assignments) {
			k, v, _ := strings.Cut(f, "=")
			ev.assignments[k] = []byte(v)
		}
	}
	return ev
}

// static makes a Join's member static, with instance id instance; its
// metadata is "<protocol>@<instance>", the same for every instance.
func static(ev joinEvent, instance string) joinEvent {
	ev.instanceID = instance
	for i, p := range ev.protocols {
		ev.protocols[i].Metadata = []byte(p.Name + "@" + instance)
	}
	return ev
}

func hb(id string, gen int32) heartbeatEvent     { return heartbeatEvent{member: id, generation: gen} }
func commit(id string, gen int32) commitEvent    { return commitEvent{member: id, generation: gen} }
func leave(id string) leaveEvent                 { return leaveEvent{member: id} }
func cancel(id string, w uint64) cancelJoinEvent { return cancelJoinEvent{member: id, waiter: w} }

// advance is a harness step: move the clock to t0+to, firing due timers.
type advance struct{ to time.Duration }

func (advance) isEvent() {}

type step struct {
	at  time.Duration // since t0; ignored for advance
	ev  event
	err error // want errors.Is(err, this); nil: no error
}

type harness struct {
	t       *testing.T
	g       *groupState
	now     time.Time
	timers  map[string]time.Time // member id ("" = rebalance) → due
	replies map[uint64]string    // waiter → summary of its reply
	waiters map[uint64]bool      // tokens of the joins and syncs sent
	gone    map[uint64]bool      // tokens of withdrawn joins and syncs
	// holdStores: a store the machine asks for (effStore) waits for the
	// script's stored step; otherwise it succeeds at once, as for a
	// driver with nothing to store in.
	holdStores bool
	stores     []int32 // the generations the machine asked to store
}

func newHarness(t *testing.T, initialDelay time.Duration) *harness {
	return &harness{t: t, g: newGroupState("g", initialDelay), now: t0,
		timers: map[string]time.Time{}, replies: map[uint64]string{}, waiters: map[uint64]bool{}, gone: map[uint64]bool{}}
}

func (h *harness) run(steps []step) {
	h.t.Helper()
	for i, s := range steps {
		if a, ok := s.ev.(advance); ok {
			h.advance(t0.Add(a.to))
			continue
		}
		at := t0.Add(s.at)
		require.False(h.t, at.Before(h.now), "step %d goes back in time", i)
		h.advance(at)
		err := h.send(s.ev)
		if s.err == nil {
			require.NoError(h.t, err, "step %d: %#v", i, s.ev)
		} else {
			require.ErrorIs(h.t, err, s.err, "step %d: %#v", i, s.ev)
		}
	}
}

func (h *harness) send(ev event) error {
	h.t.Helper()
	var token uint64
	switch ev := ev.(type) {
	case joinEvent:
		token = ev.waiter
	case syncEvent:
		token = ev.waiter
	case cancelJoinEvent:
		h.gone[ev.waiter] = true
	case cancelSyncEvent:
		h.gone[ev.waiter] = true
	}
	if token != 0 {
		require.False(h.t, h.waiters[token], "token %d used twice", token)
		h.waiters[token] = true
	}
	before := snapshot(h.g)
	effs, err := h.g.step(h.now, ev, nil)
	if err != nil {
		delete(h.waiters, token)
		require.Empty(h.t, effs, "a refused %T has effects", ev)
		if !errors.Is(err, ErrRebalanceInProgress) && !errors.Is(err, ErrMemberIDRequired) { // those change a little
			require.Equal(h.t, before, snapshot(h.g), "a refused %T changed the group", ev)
		}
	}
	for _, f := range effs {
		switch f.kind {
		case effReply:
			require.True(h.t, h.waiters[f.waiter], "reply to unknown waiter %d", f.waiter)
			require.NotContains(h.t, h.replies, f.waiter, "second reply to waiter %d", f.waiter)
			h.replies[f.waiter] = summary(f)
		case effArm:
			if due, ok := h.timers[f.timer]; !ok || f.at.Before(due) {
				h.timers[f.timer] = f.at
			}
		case effCancel:
			delete(h.timers, f.timer)
		case effLog:
		case effStore:
			h.stores = append(h.stores, h.g.generation)
		default:
			h.t.Fatalf("unknown effect %v", f.kind)
		}
	}
	h.check()
	if slices.ContainsFunc(effs, func(f effect) bool { return f.kind == effStore }) && !h.holdStores {
		require.NoError(h.t, h.send(storedEvent{generation: h.g.generation}))
	}
	return err
}

// advance fires, in order, the timers due by to.
func (h *harness) advance(to time.Time) {
	h.t.Helper()
	for {
		next, due := "", time.Time{}
		for k, at := range h.timers {
			if !at.After(to) && (due.IsZero() || at.Before(due) || at.Equal(due) && k < next) {
				next, due = k, at
			}
		}
		if due.IsZero() {
			break
		}
		delete(h.timers, next)
		if due.After(h.now) {
			h.now = due
		}
		require.NoError(h.t, h.send(timerEvent{member: next}))
	}
	h.now = to
}

// check asserts the machine's invariants.
func (h *harness) check() {
	h.t.Helper()
	g := h.g
	for id, m := range g.members {
		require.Equal(h.t, id, m.id)
		require.False(h.t, m.joining && m.syncing, "member %s joining and syncing", id)
		if m.joining {
			require.Equal(h.t, phasePreparing, g.phase, "member %s joining outside a rebalance", id)
		}
		if m.syncing {
			require.Equal(h.t, phaseCompleting, g.phase, "member %s awaiting an assignment outside CompletingRebalance", id)
			require.True(h.t, g.leader != id || g.storing, "the leader waits for itself")
		}
		if !m.joining && !m.syncing {
			due, ok := h.timers[id]
			require.True(h.t, ok, "member %s has no session timer", id)
			require.False(h.t, due.After(m.deadline), "member %s: timer %v after deadline %v", id, due, m.deadline)
			require.Zero(h.t, m.waiter)
			require.Zero(h.t, m.syncer)
		}
		require.Equal(h.t, g.protocolType, m.protocolType, "member %s of another protocol type", id)
	}
	for inst, id := range g.static {
		require.Contains(h.t, g.members, id, "instance %s held by removed member %s", inst, id)
		require.Equal(h.t, inst, g.members[id].instanceID)
	}
	for id, m := range g.members {
		if m.instanceID != "" {
			require.Equal(h.t, id, g.static[m.instanceID], "static member %s not registered", id)
		}
	}
	if len(g.members) > 0 {
		common := false
		for _, p := range slices.Collect(maps.Values(g.members))[0].protocols {
			common = common || g.supportedByAll(p.Name, "")
		}
		require.True(h.t, common, "no protocol in common")
	}
	for k := range h.timers {
		if k != "" {
			require.Contains(h.t, g.members, k, "timer left for removed member %s", k)
		}
	}
	if g.storing {
		require.Equal(h.t, phaseCompleting, g.phase, "storing a generation outside CompletingRebalance")
	}
	switch g.phase {
	case phaseEmpty:
		require.Empty(h.t, g.members)
		require.NotContains(h.t, h.timers, "")
		require.Empty(h.t, g.leader)
	case phasePreparing:
		due, ok := h.timers[""]
		require.True(h.t, ok, "preparing without a rebalance timer")
		require.False(h.t, due.After(g.nextRebalanceTimer(h.now)))
		require.False(h.t, g.rebalanceDeadline.Before(h.now), "rebalance deadline passed")
	case phaseCompleting:
		due, ok := h.timers[""]
		require.True(h.t, ok, "completing without a rebalance timer")
		require.False(h.t, due.After(g.rebalanceDeadline))
		require.Contains(h.t, g.members, g.leader, "completing without a leader")
		require.True(h.t, g.supportedByAll(g.protocol, ""), "protocol %q not supported by all", g.protocol)
	case phaseStable:
		require.NotContains(h.t, h.timers, "")
		require.Contains(h.t, g.members, g.leader, "stable without a leader")
		require.True(h.t, g.supportedByAll(g.protocol, ""), "protocol %q not supported by all", g.protocol)
		for id, m := range g.members {
			require.False(h.t, m.joining, id)
			require.True(h.t, m.inGeneration, id)
		}
	}
}

// snapshot renders everything of the group's state but the pending ids.
func snapshot(g *groupState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %d %q %q %q %v %v %v\n", g.phase, g.generation, g.protocolType, g.protocol, g.leader,
		g.rebalanceDeadline, g.delayUntil, g.offsets)
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		fmt.Fprintf(&b, "%+v\n", *g.members[id])
	}
	return b.String()
}

// summary renders a reply: a Join's "gen 2 of 2 range leader a", with the
// metadata to the leader "[a=range@a b=range@b]"; a Sync's "sync <bytes>";
// or the sentinel error's text.
func summary(f effect) string {
	if f.err != nil {
		for _, s := range []error{ErrRebalanceInProgress, ErrUnknownMember, ErrIllegalGeneration, ErrClosed, ErrFencedInstanceID} {
			if errors.Is(f.err, s) {
				return s.Error()
			}
		}
		return f.err.Error()
	}
	if f.resp.MemberID == "" {
		return "sync " + string(f.sync.Assignment)
	}
	r := f.resp
	s := fmt.Sprintf("gen %d of %d %s leader %s", r.Generation, r.Members, r.Protocol, r.Leader)
	if r.MemberMetadata != nil {
		var ms []string
		for _, m := range r.MemberMetadata {
			ms = append(ms, m.ID+"="+string(m.Metadata))
		}
		s += " [" + strings.Join(ms, " ") + "]"
	}
	return s
}

// assignments renders the members' current assignments.
func assignments(g *groupState) map[string]string {
	out := map[string]string{}
	for id, m := range g.members {
		out[id] = string(m.assignment)
	}
	return out
}

// twoMembers: a joins and leads generation 1 (assignment "A1"); b joins, a
// rejoins: generation 2, a leads, b syncs first, then a with "a=A2 b=B2".
// Tokens 1 to 6 used.
var twoMembers = []step{
	{at: 0, ev: newJoin("a", 1)},
	{at: 0, ev: syn("a", 1, 2, "a=A1")},
	{at: time.Second, ev: newJoin("b", 3)},
	{at: 2 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
	{at: 2 * time.Second, ev: join("a", 4)},
	{at: 2 * time.Second, ev: syn("b", 2, 5, "")},
	{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")},
}

var twoMembersReplies = map[uint64]string{
	1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A1",
	3: "gen 2 of 2 range leader a", 4: "gen 2 of 2 range leader a [a=range@a b=range@b]",
	5: "sync B2", 6: "sync A2",
}

func with(m map[uint64]string, kv ...any) map[uint64]string {
	out := maps.Clone(m)
	for i := 0; i < len(kv); i += 2 {
		out[uint64(kv[i].(int))] = kv[i+1].(string)
	}
	return out
}

func TestMachine(t *testing.T) {
	cases := []struct {
		name         string
		initialDelay time.Duration
		steps        []step
		replies      map[uint64]string
		phase        phase
		generation   int32
		leader       string
		protocol     string
		members      map[string]string // id → assignment
	}{{
		name:       "the first member leads its generation; its Sync makes the group stable",
		steps:      []step{{at: 0, ev: newJoin("a", 1)}, {at: 0, ev: syn("a", 1, 2, "a=A1")}},
		replies:    map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A1"},
		phase:      phaseStable,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": "A1"},
	}, {
		name:       "after the joins, the group completes: waiting for the leader's Sync",
		steps:      []step{{at: 0, ev: newJoin("a", 1)}},
		replies:    map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]"},
		phase:      phaseCompleting,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": ""},
	}, {
		name:       "a follower's Sync waits for the leader's, which answers both",
		steps:      twoMembers,
		replies:    twoMembersReplies,
		phase:      phaseStable,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "A2", "b": "B2"},
	}, {
		name:         "a member the leader leaves out gets an empty assignment; a late Sync is answered at once",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: newJoin("b", 2)},
			{ev: advance{to: 3 * time.Second}},
			{at: 3 * time.Second, ev: syn("a", 1, 3, "a=A")},
			{at: 4 * time.Second, ev: syn("b", 1, 4, "")},
			{at: 4 * time.Second, ev: syn("b", 1, 5, "")},
		},
		replies: map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a",
			3: "sync A", 4: "sync ", 5: "sync "},
		phase:      phaseStable,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": "A", "b": ""},
	}, {
		name:         "mixed assignors: the protocol most members prefer among those all support wins",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "range", "roundrobin")},
			{at: 0, ev: newJoin("b", 2, "roundrobin", "range", "sticky")},
			{at: 0, ev: newJoin("c", 3, "sticky", "roundrobin", "range")},
			{ev: advance{to: 3 * time.Second}},
		},
		// All support range and roundrobin (not sticky): a votes range, b
		// and c roundrobin.
		replies: map[uint64]string{1: "gen 1 of 3 roundrobin leader a [a=roundrobin@a b=roundrobin@b c=roundrobin@c]",
			2: "gen 1 of 3 roundrobin leader a", 3: "gen 1 of 3 roundrobin leader a"},
		phase:      phaseCompleting,
		generation: 1, leader: "a", protocol: "roundrobin",
		members: map[string]string{"a": "", "b": "", "c": ""},
	}, {
		name:         "mixed assignors: a tie goes to the name that sorts first",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "roundrobin", "range")},
			{at: 0, ev: newJoin("b", 2, "range", "roundrobin")},
			{ev: advance{to: 3 * time.Second}},
		},
		replies:    map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a"},
		phase:      phaseCompleting,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": ""},
	}, {
		name:         "mixed assignors: a member leaving changes the vote",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "cooperative-sticky", "range")},
			{at: 0, ev: newJoin("b", 2, "range")},
			{ev: advance{to: 3 * time.Second}},
			{at: 3 * time.Second, ev: syn("a", 1, 3, "a=A b=B")},
			{at: 4 * time.Second, ev: leave("b")},
			{at: 4 * time.Second, ev: join("a", 4, "cooperative-sticky", "range")},
		},
		replies: map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a",
			3: "sync A", 4: "gen 2 of 1 cooperative-sticky leader a [a=cooperative-sticky@a]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "cooperative-sticky",
		members: map[string]string{"a": ""},
	}, {
		name: "a member that supports no common protocol, or another type, is refused and changes nothing",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: newJoin("c", 7, "roundrobin"), err: ErrInconsistentGroupProtocol},
			step{at: 3 * time.Second, ev: func() event {
				ev := newJoin("c", 8)
				ev.protocolType = "connect"
				return ev
			}(), err: ErrInconsistentGroupProtocol},
			// A member may not switch to a protocol the others lack either.
			step{at: 3 * time.Second, ev: join("b", 9, "sticky"), err: ErrInconsistentGroupProtocol},
			step{at: 3 * time.Second, ev: hb("a", 2)},
			step{at: 3 * time.Second, ev: hb("b", 2)},
		),
		replies:    twoMembersReplies,
		phase:      phaseStable,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "A2", "b": "B2"},
	}, {
		name: "the only member may change its protocol type and protocols",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A")},
			{at: time.Second, ev: func() event { ev := join("a", 3, "x"); ev.protocolType = "connect"; return ev }()},
		},
		replies:    map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A", 3: "gen 2 of 1 x leader a [a=x@a]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "x",
		members: map[string]string{"a": ""},
	}, {
		name:         "the leader leaving during CompletingRebalance: waiting Syncs fail, the others rebalance, a new leader",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: newJoin("b", 2)},
			{at: 0, ev: newJoin("c", 3)},
			{ev: advance{to: 3 * time.Second}},
			{at: 4 * time.Second, ev: syn("b", 1, 4, "")},
			{at: 4 * time.Second, ev: hb("c", 1)}, // heartbeats work while completing
			{at: 5 * time.Second, ev: leave("a")},
			{at: 5 * time.Second, ev: hb("c", 1), err: ErrRebalanceInProgress},
			{at: 5 * time.Second, ev: syn("c", 1, 5, ""), err: ErrRebalanceInProgress},
			{at: 6 * time.Second, ev: join("c", 6)},
			{at: 6 * time.Second, ev: join("b", 7)},
			{at: 6 * time.Second, ev: syn("b", 2, 8, "b=B c=C")},
		},
		replies: map[uint64]string{1: "gen 1 of 3 range leader a [a=range@a b=range@b c=range@c]",
			2: "gen 1 of 3 range leader a", 3: "gen 1 of 3 range leader a",
			4: "group: rebalance in progress",
			6: "gen 2 of 2 range leader b", 7: "gen 2 of 2 range leader b [b=range@b c=range@c]", 8: "sync B"},
		phase:      phaseStable,
		generation: 2, leader: "b", protocol: "range",
		members: map[string]string{"b": "B", "c": "C"},
	}, {
		name:         "the leader's session timing out during CompletingRebalance: a rebalance without it",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: newJoin("b", 2)},
			{ev: advance{to: 3 * time.Second}},
			{at: 3 * time.Second, ev: syn("b", 1, 3, "")}, // b waits: alive whatever its session
			{ev: advance{to: 13 * time.Second}},           // a's session (from 3 s) ends
			{at: 13 * time.Second, ev: hb("a", 1), err: ErrUnknownMember},
			{at: 13 * time.Second, ev: join("b", 4)},
		},
		replies: map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a",
			3: "group: rebalance in progress", 4: "gen 2 of 1 range leader b [b=range@b]"},
		phase:      phaseCompleting,
		generation: 2, leader: "b", protocol: "range",
		members: map[string]string{"b": ""},
	}, {
		name:         "a leader that heartbeats but never syncs is dropped at the rebalance timeout",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: newJoin("b", 2)},
			{ev: advance{to: 3 * time.Second}},
			{at: 12 * time.Second, ev: hb("a", 1)},
			{at: 12 * time.Second, ev: hb("b", 1)},
			{at: 21 * time.Second, ev: hb("a", 1)},
			{at: 21 * time.Second, ev: syn("b", 1, 3, "")},
			{at: 30 * time.Second, ev: hb("a", 1)},
			{at: 39 * time.Second, ev: hb("a", 1)},
			{at: 48 * time.Second, ev: hb("a", 1)},
			{at: 57 * time.Second, ev: hb("a", 1)},
			{ev: advance{to: 62 * time.Second}},
			{at: 62 * time.Second, ev: hb("a", 1)},
			{ev: advance{to: 63 * time.Second}}, // the sync deadline: a is dropped, b rebalances
			{at: 63 * time.Second, ev: hb("a", 1), err: ErrUnknownMember},
			{at: 64 * time.Second, ev: join("b", 4)},
		},
		replies: map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a",
			3: "group: rebalance in progress", 4: "gen 2 of 1 range leader b [b=range@b]"},
		phase:      phaseCompleting,
		generation: 2, leader: "b", protocol: "range",
		members: map[string]string{"b": ""},
	}, {
		name: "Syncs refused: stale generation, unknown member, while preparing, another protocol",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: syn("a", 1, 7, "a=X"), err: ErrIllegalGeneration},
			step{at: 3 * time.Second, ev: syn("zz", 2, 8, ""), err: ErrUnknownMember},
			step{at: 3 * time.Second, ev: func() event { ev := syn("b", 2, 9, ""); ev.protocol = "roundrobin"; return ev }(),
				err: ErrInconsistentGroupProtocol},
			step{at: 3 * time.Second, ev: func() event { ev := syn("b", 2, 10, ""); ev.protocolType = "connect"; return ev }(),
				err: ErrInconsistentGroupProtocol},
			step{at: 3 * time.Second, ev: func() event {
				ev := syn("b", 2, 11, "")
				ev.protocolType, ev.protocol = testType, "range"
				return ev
			}()},
			step{at: 4 * time.Second, ev: newJoin("c", 12)},
			step{at: 4 * time.Second, ev: syn("a", 2, 13, "a=Y"), err: ErrRebalanceInProgress},
			step{at: 4 * time.Second, ev: join("a", 14)},
			step{at: 4 * time.Second, ev: join("b", 15)},
			step{at: 4 * time.Second, ev: syn("b", 2, 16, ""), err: ErrIllegalGeneration}, // generation 3 now
		),
		replies: with(twoMembersReplies, 11, "sync B2",
			12, "gen 3 of 3 range leader a", 14, "gen 3 of 3 range leader a [a=range@a b=range@b c=range@c]",
			15, "gen 3 of 3 range leader a"),
		phase:      phaseCompleting,
		generation: 3, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": "", "c": ""},
	}, {
		name: "rejoining: a follower with the same protocols keeps the generation; the leader's rejoin rebalances",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: join("b", 7)},
			step{at: 3 * time.Second, ev: syn("b", 2, 8, "")},
			step{at: 4 * time.Second, ev: join("a", 9)},
			step{at: 4 * time.Second, ev: join("b", 10)},
		),
		replies: with(twoMembersReplies, 7, "gen 2 of 2 range leader a", 8, "sync B2",
			9, "gen 3 of 2 range leader a [a=range@a b=range@b]", 10, "gen 3 of 2 range leader a"),
		phase:      phaseCompleting,
		generation: 3, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": ""},
	}, {
		name:         "rejoining: new metadata rebalances, during CompletingRebalance too",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: newJoin("b", 2)},
			{ev: advance{to: 3 * time.Second}},
			{at: 3 * time.Second, ev: join("b", 3)}, // unchanged while completing: the generation again
			{at: 3 * time.Second, ev: syn("b", 1, 4, "")},
			{at: 3 * time.Second, ev: join("b", 5, "range", "roundrobin")},
			{at: 3 * time.Second, ev: join("a", 6)},
		},
		replies: map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a",
			3: "gen 1 of 2 range leader a", 4: "group: rebalance in progress",
			5: "gen 2 of 2 range leader a", 6: "gen 2 of 2 range leader a [a=range@a b=range@b]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": ""},
	}, {
		name: "a leaving member: the others rebalance",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: leave("a")},
			step{at: 3 * time.Second, ev: hb("a", 2), err: ErrUnknownMember},
			step{at: 4 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 4 * time.Second, ev: join("b", 7)},
			step{at: 4 * time.Second, ev: syn("b", 3, 8, "b=B3")},
			step{at: 4 * time.Second, ev: leave("a"), err: ErrUnknownMember},
		),
		replies:    with(twoMembersReplies, 7, "gen 3 of 1 range leader b [b=range@b]", 8, "sync B3"),
		phase:      phaseStable,
		generation: 3, leader: "b", protocol: "range",
		members: map[string]string{"b": "B3"},
	}, {
		name: "the last member leaving empties the group in a new generation",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: time.Second, ev: leave("a")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]"},
		phase:      phaseEmpty,
		generation: 2,
		members:    map[string]string{},
	}, {
		name: "a silent member is removed at its session timeout; the other rebalances",
		steps: append(slices.Clone(twoMembers),
			// Both sessions started at 2 s; a keeps heartbeating, b falls silent.
			step{at: 8 * time.Second, ev: hb("a", 2)},
			step{ev: advance{to: 11 * time.Second}}, // b's deadline was 12 s
			step{at: 11 * time.Second, ev: hb("b", 2)},
			step{at: 13 * time.Second, ev: hb("a", 2)},
			step{ev: advance{to: 22 * time.Second}}, // b, silent since 11 s, times out at 21 s
			step{at: 22 * time.Second, ev: hb("b", 2), err: ErrUnknownMember},
			step{at: 22 * time.Second, ev: hb("a", 2), err: ErrRebalanceInProgress},
			step{at: 22 * time.Second, ev: join("a", 7)},
		),
		replies:    with(twoMembersReplies, 7, "gen 3 of 1 range leader a [a=range@a]"),
		phase:      phaseCompleting,
		generation: 3, leader: "a", protocol: "range",
		members: map[string]string{"a": ""},
	}, {
		name: "a member that does not rejoin within the rebalance timeout is dropped",
		steps: append(slices.Clone(twoMembers),
			step{at: 5 * time.Second, ev: newJoin("c", 7)}, // rebalance deadline: 65 s
			step{at: 6 * time.Second, ev: join("a", 8)},
			// b heartbeats (so its session lives) but never rejoins.
			step{at: 9 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 18 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 27 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 36 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 45 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 54 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 63 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{ev: advance{to: 65 * time.Second}},
			step{at: 66 * time.Second, ev: hb("b", 3), err: ErrUnknownMember},
		),
		replies: with(twoMembersReplies, 7, "gen 3 of 2 range leader a",
			8, "gen 3 of 2 range leader a [a=range@a c=range@c]"),
		phase:      phaseCompleting,
		generation: 3, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "c": ""},
	}, {
		name: "a join pending for longer than the session timeout does not expire",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A")},
			{at: time.Second, ev: newJoin("b", 3)}, // pending until a rejoins
			{at: 9 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{at: 18 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{at: 27 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{ev: advance{to: 30 * time.Second}},
			{at: 30 * time.Second, ev: join("a", 4)},
		},
		replies: map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A",
			3: "gen 2 of 2 range leader a", 4: "gen 2 of 2 range leader a [a=range@a b=range@b]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": ""},
	}, {
		name: "a member that leaves while its join is pending: the join fails",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A")},
			{at: time.Second, ev: newJoin("b", 3)},
			{at: 2 * time.Second, ev: leave("b")},
			{at: 3 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{at: 3 * time.Second, ev: join("a", 4)},
		},
		replies: map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A",
			3: "group: unknown member", 4: "gen 2 of 1 range leader a [a=range@a]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": ""},
	}, {
		name: "commits: current generation (also while preparing, not while completing), stale, unknown, non-member",
		steps: []step{
			{at: 0, ev: commit("", -1)}, // no members yet: a "simple" commit
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: commit("a", 1), err: ErrRebalanceInProgress}, // awaiting the assignment
			{at: 0, ev: syn("a", 1, 2, "a=A")},
			{at: 0, ev: commit("a", 1)},
			{at: 0, ev: commit("", -1), err: ErrUnknownMember},
			{at: 0, ev: commit("zz", 1), err: ErrUnknownMember},
			{at: time.Second, ev: newJoin("b", 3)},
			{at: time.Second, ev: commit("a", 1)}, // commit before rejoining
			{at: time.Second, ev: join("a", 4)},
			{at: time.Second, ev: commit("a", 1), err: ErrIllegalGeneration},
			{at: time.Second, ev: syn("a", 2, 5, "a=A b=B")},
			{at: time.Second, ev: commit("a", 2)},
			{at: time.Second, ev: commit("b", 0), err: ErrIllegalGeneration},
		},
		replies: map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A",
			3: "gen 2 of 2 range leader a", 4: "gen 2 of 2 range leader a [a=range@a b=range@b]", 5: "sync A"},
		phase:      phaseStable,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "A", "b": "B"},
	}, {
		name: "KIP-394: a first join told its member id joins with it; an unknown id is still refused",
		steps: []step{
			{at: 0, ev: func() event { ev := newJoin("a", 1); ev.requireKnown = true; return ev }(), err: ErrMemberIDRequired},
			{at: 0, ev: join("zz", 2), err: ErrUnknownMember},
			{at: 0, ev: func() event { ev := newJoin("b", 4); ev.requireKnown = true; return ev }(), err: ErrMemberIDRequired},
			{at: time.Second, ev: join("a", 3)},
			{at: 9 * time.Second, ev: hb("a", 1)},
			{at: 10 * time.Second, ev: join("b", 5), err: ErrUnknownMember}, // told at 0 s: expired after its session
		},
		replies:    map[uint64]string{3: "gen 1 of 1 range leader a [a=range@a]"},
		phase:      phaseCompleting,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": ""},
	}, {
		name: "KIP-345: a restarted static follower takes its place and assignment without a rebalance",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A1")},
			{at: time.Second, ev: static(newJoin("s1", 3), "i1")},
			{at: time.Second, ev: join("a", 4)},
			{at: time.Second, ev: syn("a", 2, 5, "a=A2 s1=S2")},
			{at: 2 * time.Second, ev: static(newJoin("s2", 6), "i1")}, // the instance restarted: a new member id
			{at: 2 * time.Second, ev: hb("s1", 2), err: ErrUnknownMember},
			{at: 2 * time.Second, ev: static(join("s1", 7), "i1"), err: ErrFencedInstanceID},
			{at: 2 * time.Second, ev: static(join("a", 8), "i1"), err: ErrFencedInstanceID}, // a is dynamic
			{at: 2 * time.Second, ev: syn("s2", 2, 9, "")},
			{at: 2 * time.Second, ev: hb("a", 2)},
		},
		replies: map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A1",
			3: "gen 2 of 2 range leader a", 4: "gen 2 of 2 range leader a [a=range@a s1=range@i1]", 5: "sync A2",
			6: "gen 2 of 2 range leader a", 9: "sync S2"},
		phase:      phaseStable,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "A2", "s2": "S2"},
	}, {
		name: "KIP-345: a static member replaced while its join is pending: that join is fenced; leaving frees the instance id",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A1")},
			{at: time.Second, ev: static(newJoin("s1", 3), "i1")},
			{at: 2 * time.Second, ev: static(newJoin("s2", 4, "range", "roundrobin"), "i1")},
			{at: 2 * time.Second, ev: join("a", 5)},
			{at: 3 * time.Second, ev: leave("s2")},
			{at: 3 * time.Second, ev: static(newJoin("s3", 6), "i1")}, // a member of its own now
			{at: 3 * time.Second, ev: join("a", 7)},
		},
		replies: map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A1",
			3: "group: fenced instance id", 4: "gen 2 of 2 range leader a", 5: "gen 2 of 2 range leader a [a=range@a s2=range@i1]",
			6: "gen 3 of 2 range leader a", 7: "gen 3 of 2 range leader a [a=range@a s3=range@i1]"},
		phase:      phaseCompleting,
		generation: 3, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "s3": ""},
	}, {
		name: "a newer join of the same member supersedes the pending one",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A")},
			{at: 0, ev: newJoin("b", 3)},
			{at: 0, ev: join("b", 4)}, // b's first join answered with "superseded"
			{at: 0, ev: join("a", 5)},
		},
		replies: map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A", 3: "group: rebalance in progress",
			4: "gen 2 of 2 range leader a", 5: "gen 2 of 2 range leader a [a=range@a b=range@b]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": ""},
	}, {
		name: "a withdrawn first join is forgotten",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A")},
			{at: time.Second, ev: newJoin("b", 3)},
			{at: 2 * time.Second, ev: cancel("b", 3)},
			{at: 2 * time.Second, ev: hb("b", 1), err: ErrUnknownMember},
			{at: 3 * time.Second, ev: join("a", 4)},
		},
		replies:    map[uint64]string{1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A", 4: "gen 2 of 1 range leader a [a=range@a]"},
		phase:      phaseCompleting,
		generation: 2, leader: "a", protocol: "range",
		members: map[string]string{"a": ""},
	}, {
		name:         "a withdrawn Sync: the member stays, its session restarts",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: newJoin("b", 2)},
			{ev: advance{to: 3 * time.Second}},
			{at: 4 * time.Second, ev: syn("b", 1, 3, "")},
			{at: 5 * time.Second, ev: cancelSyncEvent{member: "b", waiter: 3}}, // session to 15 s
			{at: 12 * time.Second, ev: syn("a", 1, 4, "a=A b=B")},
			{ev: advance{to: 14 * time.Second}},
			{at: 14 * time.Second, ev: syn("b", 1, 5, "")},
		},
		replies: map[uint64]string{1: "gen 1 of 2 range leader a [a=range@a b=range@b]", 2: "gen 1 of 2 range leader a",
			4: "sync A", 5: "sync B"},
		phase:      phaseStable,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": "A", "b": "B"},
	}, {
		name:         "the initial rebalance delay collects a starting fleet into one generation",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 2 * time.Second, ev: newJoin("b", 2)}, // delay now ends at 5 s
			{ev: advance{to: 4 * time.Second}},
			{at: 4 * time.Second, ev: newJoin("c", 3)}, // and now at 7 s
			{ev: advance{to: 6 * time.Second}},
			{at: 6 * time.Second, ev: commit("", -1), err: ErrUnknownMember},
			{ev: advance{to: 7 * time.Second}},
		},
		replies: map[uint64]string{1: "gen 1 of 3 range leader a [a=range@a b=range@b c=range@c]",
			2: "gen 1 of 3 range leader a", 3: "gen 1 of 3 range leader a"},
		phase:      phaseCompleting,
		generation: 1, leader: "a", protocol: "range",
		members: map[string]string{"a": "", "b": "", "c": ""},
	}, {
		name:         "the only join withdrawn during the initial delay: the group empties at once",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: time.Second, ev: cancel("a", 1)},
		},
		replies:    map[uint64]string{},
		phase:      phaseEmpty,
		generation: 1,
		members:    map[string]string{},
	}, {
		name: "refused: join with an unknown member id, leave of an unknown member",
		steps: []step{
			{at: 0, ev: join("ghost", 1), err: ErrUnknownMember},
			{at: 0, ev: leave("ghost"), err: ErrUnknownMember},
			{at: 0, ev: hb("ghost", 0), err: ErrUnknownMember},
			{at: 0, ev: syn("ghost", 0, 2, ""), err: ErrUnknownMember},
		},
		replies:    map[uint64]string{},
		phase:      phaseEmpty,
		generation: 0,
		members:    map[string]string{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.initialDelay)
			h.run(tc.steps)
			require.Equal(t, tc.replies, h.replies, "replies")
			require.Equal(t, tc.phase, h.g.phase, "phase")
			require.Equal(t, tc.generation, h.g.generation, "generation")
			require.Equal(t, tc.leader, h.g.leader, "leader")
			require.Equal(t, tc.protocol, h.g.protocol, "protocol")
			require.Equal(t, tc.members, assignments(h.g), "members")
			for w := range h.waiters {
				if _, replied := h.replies[w]; !replied && !h.gone[w] {
					require.NotNil(t, h.memberOf(w), "waiter %d neither replied nor pending", w)
				}
			}
		})
	}
}

// memberOf returns the member whose Join or Sync w is pending, or nil.
func (h *harness) memberOf(w uint64) *member {
	for _, m := range h.g.members {
		if m.joining && m.waiter == w || m.syncing && m.syncer == w {
			return m
		}
	}
	return nil
}

// TestMachineStaleTimers: timers that fire late, early or for something
// gone are harmless.
func TestMachineStaleTimers(t *testing.T) {
	h := newHarness(t, 0)
	h.run(twoMembers)
	// Timers of members and rebalances that no longer exist do nothing.
	for _, ev := range []event{timerEvent{member: "ghost"}, timerEvent{member: ""}} {
		before := h.g.describe()
		effs, err := h.g.step(h.now, ev, nil)
		require.NoError(t, err)
		require.Empty(t, effs)
		require.Equal(t, before, h.g.describe())
	}
	// An early session timer re-arms at the deadline instead of expiring.
	h.run([]step{{at: 5 * time.Second, ev: hb("a", 2)}})
	effs, err := h.g.step(t0.Add(12*time.Second), timerEvent{member: "a"}, nil)
	require.NoError(t, err)
	require.Equal(t, []effect{{kind: effArm, timer: "a", at: t0.Add(15 * time.Second)}}, effs)
	require.Equal(t, []string{"a", "b"}, slices.Sorted(maps.Keys(h.g.members)))
}

func TestMachineDescribe(t *testing.T) {
	h := newHarness(t, 0)
	h.run(twoMembers[:3])
	require.Equal(t, Description{Group: "g", State: StatePreparingRebalance, Generation: 1, ProtocolType: testType,
		Protocol: "range", Leader: "a", Members: []MemberDescription{
			{ID: "a", ClientID: "c", MemberMetadata: []byte("range@a"), MemberAssignment: []byte("A1")},
			{ID: "b", ClientID: "c", Joining: true},
		}}, h.g.describe())
	h.run(twoMembers[3:5])
	require.Equal(t, Description{Group: "g", State: StateCompletingRebalance, Generation: 2, ProtocolType: testType,
		Protocol: "range", Leader: "a", Members: []MemberDescription{
			{ID: "a", ClientID: "c", MemberMetadata: []byte("range@a")},
			{ID: "b", ClientID: "c", MemberMetadata: []byte("range@b")},
		}}, h.g.describe())
}

// TestMachineRandom runs random operation sequences (replayable: the seed
// is logged; STRATA_SEED=n replays one) through the machine, with members
// of mixed protocols, checking its invariants after every step, then its
// liveness: once every member rejoins and the leader syncs the group is
// stable, and once everyone falls silent the group empties, every Join and
// Sync ever sent having been answered or withdrawn.
func TestMachineRandom(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (STRATA_SEED=%d to replay)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	runs := 200
	if os.Getenv("STRATA_SOAK") != "" {
		runs = 20000
	}
	protocolSets := [][]string{{"range"}, {"range", "roundrobin"}, {"roundrobin", "range"}, {"sticky", "range"}, {"sticky"}}
	for run := range runs {
		h := newHarness(t, time.Duration(r.IntN(3))*2*time.Second)
		gen := map[string]int32{} // what each client knows: its generation
		pending := map[string]uint64{}
		var token uint64
		var nextID int
		ids := func() []string { return slices.Sorted(maps.Keys(gen)) }
		pick := func() (string, bool) {
			if len(gen) == 0 {
				return "", false
			}
			all := ids()
			return all[r.IntN(len(all))], true
		}
		send := func(ev event) error {
			err := h.send(ev)
			if err != nil && !errors.Is(err, ErrUnknownMember) && !errors.Is(err, ErrIllegalGeneration) &&
				!errors.Is(err, ErrRebalanceInProgress) && !errors.Is(err, ErrInconsistentGroupProtocol) &&
				!errors.Is(err, ErrFencedInstanceID) {
				t.Fatalf("run %d: %T: unexpected error %v", run, ev, err)
			}
			return err
		}
		// learn updates the clients' knowledge from the replies so far.
		learn := func() {
			for id, w := range pending {
				if s, ok := h.replies[w]; ok {
					delete(pending, id)
					var g, n int32
					if _, err := fmt.Sscanf(s, "gen %d of %d", &g, &n); err == nil {
						gen[id] = g
					} else if h.g.members[id] == nil {
						delete(gen, id) // removed: the client starts over
					}
				}
			}
		}
		syncAll := func(id string) syncEvent {
			token++
			ev := syn(id, gen[id], token, "")
			ev.assignments = map[string][]byte{}
			for m := range h.g.members {
				ev.assignments[m] = []byte(fmt.Sprint(m, "/", gen[id]))
			}
			return ev
		}
		for range 80 {
			switch op := r.IntN(100); {
			case op < 12: // a new member
				token++
				nextID++
				id := fmt.Sprintf("m%02d", nextID)
				ev := newJoin(id, token, protocolSets[r.IntN(len(protocolSets))]...)
				if r.IntN(3) == 0 { // static, maybe replacing a member
					ev = static(ev, []string{"i1", "i2"}[r.IntN(2)])
				}
				if send(ev) == nil {
					gen[id], pending[id] = -1, token
				}
			case op < 27: // a member rejoins
				if id, ok := pick(); ok && pending[id] == 0 {
					token++
					ev := h.rejoin(id, token)
					if r.IntN(5) == 0 {
						ev = join(id, token, protocolSets[r.IntN(len(protocolSets))]...)
						ev.instanceID = h.memberInstance(id)
					}
					switch err := send(ev); {
					case err == nil:
						pending[id] = token
					case errors.Is(err, ErrUnknownMember), errors.Is(err, ErrFencedInstanceID):
						delete(gen, id)
					}
				}
			case op < 42: // a member syncs: the leader with everyone's assignment
				if id, ok := pick(); ok && pending[id] == 0 {
					ev := syncAll(id)
					if id != h.g.leader || r.IntN(4) == 0 {
						ev.assignments = nil
					}
					if send(ev) == nil {
						pending[id] = ev.waiter
					}
				}
			case op < 45: // a pending join or sync is withdrawn
				if id, ok := pick(); ok && pending[id] != 0 {
					send(cancel(id, pending[id]))
					send(cancelSyncEvent{member: id, waiter: pending[id]})
					delete(pending, id)
					if h.g.members[id] == nil {
						delete(gen, id)
					}
				}
			case op < 65:
				if id, ok := pick(); ok {
					if errors.Is(send(hb(id, gen[id])), ErrUnknownMember) {
						delete(gen, id)
					}
				}
			case op < 72:
				if id, ok := pick(); ok {
					send(commit(id, gen[id]))
				}
			case op < 77:
				if id, ok := pick(); ok {
					send(leave(id))
					delete(gen, id)
					delete(pending, id)
				}
			default:
				h.advance(h.now.Add(time.Duration(r.IntN(15000)) * time.Millisecond))
			}
			learn()
		}

		// Every member rejoins, the leader first (a follower rejoining a
		// stable group just gets the generation back): the joining
		// completes; the leader syncs: the group is stable.
		order := slices.Sorted(maps.Keys(h.g.members))
		if i := slices.Index(order, h.g.leader); i > 0 {
			order[0], order[i] = order[i], order[0]
		}
		for _, id := range order {
			if m := h.g.members[id]; !m.joining {
				token++
				require.NoError(t, h.send(h.rejoin(id, token)), "run %d", run)
				pending[id] = token
			}
		}
		if len(h.g.members) > 0 {
			h.advance(h.now.Add(7 * time.Second)) // past any initial delay
			require.Equal(t, phaseCompleting, h.g.phase, "run %d: everyone rejoined, no generation\n%s", run, snapshot(h.g))
			learn()
			require.NoError(t, h.send(syncAll(h.g.leader)), "run %d", run)
			require.Equal(t, phaseStable, h.g.phase, "run %d: the leader synced", run)
			for id, m := range h.g.members {
				require.Equal(t, fmt.Sprint(id, "/", h.g.generation), string(m.assignment), "run %d", run)
			}
		}
		// Everyone falls silent: the group empties and every Join and Sync
		// was answered or withdrawn.
		h.advance(h.now.Add(time.Hour))
		require.Equal(t, phaseEmpty, h.g.phase, "run %d", run)
		require.Empty(t, h.timers, "run %d: timers left", run)
		for w := range h.waiters {
			_, answered := h.replies[w]
			require.True(t, answered || h.gone[w], "run %d: call %d never answered", run, w)
		}
	}
}

func (h *harness) memberInstance(id string) string {
	if m := h.g.members[id]; m != nil {
		return m.instanceID
	}
	return ""
}

// rejoin is member id's Join with the same protocols and instance id (a
// member no longer in the group: "range").
func (h *harness) rejoin(id string, token uint64) joinEvent {
	ev := join(id, token)
	if m := h.g.members[id]; m != nil {
		ev.instanceID = m.instanceID
		ev.protocols = slices.Clone(m.protocols)
	}
	return ev
}
