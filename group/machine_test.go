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

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	testSession   = 10 * time.Second
	testRebalance = 60 * time.Second
)

// testPartitions is the metadata every join of the scripts sees.
var testPartitions = map[string]int{"t0": 3, "t1": 2}

// join is the joinEvent of member id with Join token w.
func join(id string, w uint64, topics ...string) joinEvent {
	return joinCounts(id, w, testPartitions, topics...)
}

func joinCounts(id string, w uint64, counts map[string]int, topics ...string) joinEvent {
	slices.Sort(topics)
	ev := joinEvent{member: id, clientID: "c", topics: topics, sessionTimeout: testSession,
		rebalanceTimeout: testRebalance, partitions: map[string]int{}, waiter: w}
	for _, t := range topics {
		ev.partitions[t] = counts[t]
	}
	return ev
}

// newJoin is the first Join of a member, whose id the driver assigned.
func newJoin(id string, w uint64, topics ...string) joinEvent {
	ev := join(id, w, topics...)
	ev.isNew = true
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
	waiters map[uint64]bool      // tokens of the joins sent
	gone    map[uint64]bool      // tokens of withdrawn joins
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
	switch ev := ev.(type) {
	case joinEvent:
		h.waiters[ev.waiter] = true
	case cancelJoinEvent:
		h.gone[ev.waiter] = true
	}
	before := snapshot(h.g)
	effs, err := h.g.step(h.now, ev, nil)
	if err != nil {
		if j, ok := ev.(joinEvent); ok {
			delete(h.waiters, j.waiter)
		}
		require.Empty(h.t, effs, "a refused %T has effects", ev)
		if !errors.Is(err, ErrRebalanceInProgress) { // that heartbeat renews the session
			require.Equal(h.t, before, snapshot(h.g), "a refused %T changed the group", ev)
		}
	}
	for _, f := range effs {
		switch f.kind {
		case effReply:
			require.True(h.t, h.waiters[f.waiter], "reply to unknown waiter %d", f.waiter)
			require.NotContains(h.t, h.replies, f.waiter, "second reply to waiter %d", f.waiter)
			h.replies[f.waiter] = summary(f.resp, f.err)
		case effArm:
			if due, ok := h.timers[f.timer]; !ok || f.at.Before(due) {
				h.timers[f.timer] = f.at
			}
		case effCancel:
			delete(h.timers, f.timer)
		case effLog:
		default:
			h.t.Fatalf("unknown effect %v", f.kind)
		}
	}
	h.check()
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
		if !m.joining {
			due, ok := h.timers[id]
			require.True(h.t, ok, "member %s has no session timer", id)
			require.False(h.t, due.After(m.deadline), "member %s: timer %v after deadline %v", id, due, m.deadline)
			require.Zero(h.t, m.waiter)
		}
	}
	for k := range h.timers {
		if k != "" {
			require.Contains(h.t, g.members, k, "timer left for removed member %s", k)
		}
	}
	switch g.phase {
	case phaseEmpty:
		require.Empty(h.t, g.members)
		require.NotContains(h.t, h.timers, "")
	case phasePreparing:
		due, ok := h.timers[""]
		require.True(h.t, ok, "preparing without a rebalance timer")
		require.False(h.t, due.After(g.nextRebalanceTimer(h.now)))
		require.False(h.t, g.rebalanceDeadline.Before(h.now), "rebalance deadline passed")
	case phaseStable:
		require.NotContains(h.t, h.timers, "")
		owner := map[TopicPartition]string{}
		for id, m := range g.members {
			require.False(h.t, m.joining)
			require.True(h.t, m.inGeneration)
			for _, tp := range m.assignment {
				require.Empty(h.t, owner[tp], "%v assigned to %s and %s", tp, owner[tp], id)
				owner[tp] = id
			}
		}
	}
}

// snapshot renders everything of the group's state.
func snapshot(g *groupState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %d %v %v %v %v %v\n", g.phase, g.generation, g.partitions, g.assigned,
		g.rebalanceDeadline, g.delayUntil, g.offsets)
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		fmt.Fprintf(&b, "%+v\n", *g.members[id])
	}
	return b.String()
}

// summary renders a Join's outcome: "gen 2 of 2: t0/0 t0/1" or the
// sentinel error's text.
func summary(resp JoinResponse, err error) string {
	if err != nil {
		for _, s := range []error{ErrRebalanceInProgress, ErrUnknownMember, ErrIllegalGeneration, ErrClosed} {
			if errors.Is(err, s) {
				return s.Error()
			}
		}
		return err.Error()
	}
	var parts []string
	for _, tp := range resp.Assignment {
		parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
	}
	return strings.TrimSpace(fmt.Sprintf("gen %d of %d: %s", resp.Generation, resp.Members, strings.Join(parts, " ")))
}

// assignments renders the members' current assignments.
func assignments(g *groupState) map[string]string {
	out := map[string]string{}
	for id, m := range g.members {
		var parts []string
		for _, tp := range m.assignment {
			parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
		}
		out[id] = strings.Join(parts, " ")
	}
	return out
}

// twoMembers: a then b join t0; a learns of the rebalance and rejoins: gen 2,
// a [t0/0 t0/1], b [t0/2]. Tokens 1, 2, 3 used.
var twoMembers = []step{
	{at: 0, ev: newJoin("a", 1, "t0")},
	{at: time.Second, ev: newJoin("b", 2, "t0")},
	{at: 2 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
	{at: 2 * time.Second, ev: join("a", 3, "t0")},
}

func TestMachine(t *testing.T) {
	cases := []struct {
		name         string
		initialDelay time.Duration
		steps        []step
		replies      map[uint64]string
		phase        phase
		generation   int32
		members      map[string]string // id → assignment
	}{{
		name:       "first member completes a generation at once",
		steps:      []step{{at: 0, ev: newJoin("a", 1, "t0", "t1")}},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2 t1/0 t1/1"},
		phase:      phaseStable,
		generation: 1,
		members:    map[string]string{"a": "t0/0 t0/1 t0/2 t1/0 t1/1"},
	}, {
		name:       "a second member waits until the first rejoins",
		steps:      twoMembers,
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2"},
	}, {
		name: "different subscriptions",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: 0, ev: newJoin("b", 2, "t0", "t1")},
			{at: 0, ev: join("a", 3, "t0")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2 t1/0 t1/1", 3: "gen 2 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2 t1/0 t1/1"},
	}, {
		name: "heartbeats: ok when stable, stale generation, unknown member",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: hb("a", 2)},
			step{at: 3 * time.Second, ev: hb("b", 2)},
			step{at: 3 * time.Second, ev: hb("a", 1), err: ErrIllegalGeneration},
			step{at: 3 * time.Second, ev: hb("zz", 2), err: ErrUnknownMember},
		),
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2"},
	}, {
		name: "a leaving member: the others rebalance and take its partitions",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: leave("b")},
			step{at: 3 * time.Second, ev: hb("b", 2), err: ErrUnknownMember},
			step{at: 4 * time.Second, ev: hb("a", 2), err: ErrRebalanceInProgress},
			step{at: 4 * time.Second, ev: join("a", 4, "t0")},
			step{at: 4 * time.Second, ev: leave("b"), err: ErrUnknownMember},
		),
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1",
			4: "gen 3 of 1: t0/0 t0/1 t0/2"},
		phase:      phaseStable,
		generation: 3,
		members:    map[string]string{"a": "t0/0 t0/1 t0/2"},
	}, {
		name: "the last member leaving empties the group in a new generation",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: time.Second, ev: leave("a")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2"},
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
			step{at: 22 * time.Second, ev: join("a", 4, "t0")},
		),
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1",
			4: "gen 3 of 1: t0/0 t0/1 t0/2"},
		phase:      phaseStable,
		generation: 3,
		members:    map[string]string{"a": "t0/0 t0/1 t0/2"},
	}, {
		name: "the only member times out: the group empties",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: 9 * time.Second, ev: commit("a", 1)}, // a commit renews the session too
			{ev: advance{to: 18 * time.Second}},
			{at: 18 * time.Second, ev: hb("a", 1)},
			{ev: advance{to: 28 * time.Second}},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2"},
		phase:      phaseEmpty,
		generation: 2,
		members:    map[string]string{},
	}, {
		name: "a member that does not rejoin within the rebalance timeout is dropped",
		steps: append(slices.Clone(twoMembers),
			step{at: 5 * time.Second, ev: newJoin("c", 4, "t0")}, // rebalance deadline: 65 s
			step{at: 6 * time.Second, ev: join("a", 5, "t0")},
			// b heartbeats (so its session lives) but never rejoins.
			step{at: 9 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 18 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 27 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 36 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 45 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 54 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{at: 63 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{ev: advance{to: 64 * time.Second}},
			step{at: 64 * time.Second, ev: hb("b", 2), err: ErrRebalanceInProgress},
			step{ev: advance{to: 65 * time.Second}},
			step{at: 66 * time.Second, ev: hb("b", 3), err: ErrUnknownMember},
		),
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1",
			4: "gen 3 of 2: t0/2", 5: "gen 3 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 3,
		members:    map[string]string{"a": "t0/0 t0/1", "c": "t0/2"},
	}, {
		name: "three members form one generation",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: newJoin("c", 4, "t0")},
			step{at: 3 * time.Second, ev: join("a", 5, "t0")},
			step{at: 3 * time.Second, ev: join("b", 6, "t0")}, // the last one completes it
			step{at: 4 * time.Second, ev: hb("a", 3)},
		),
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1",
			4: "gen 3 of 3: t0/2", 5: "gen 3 of 3: t0/0", 6: "gen 3 of 3: t0/1"},
		phase:      phaseStable,
		generation: 3,
		members:    map[string]string{"a": "t0/0", "b": "t0/1", "c": "t0/2"},
	}, {
		name: "a join pending for longer than the session timeout does not expire",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: time.Second, ev: newJoin("b", 2, "t0")}, // pending until a rejoins
			{at: 9 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{at: 18 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{at: 27 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{ev: advance{to: 30 * time.Second}},
			{at: 30 * time.Second, ev: join("a", 3, "t0")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2"},
	}, {
		name: "a member that leaves while its join is pending: the join fails",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: time.Second, ev: newJoin("b", 2, "t0")},
			{at: 2 * time.Second, ev: leave("b")},
			{at: 3 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
			{at: 3 * time.Second, ev: join("a", 3, "t0")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "group: unknown member", 3: "gen 2 of 1: t0/0 t0/1 t0/2"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1 t0/2"},
	}, {
		name: "commits: current generation (also while rebalancing), stale, unknown, non-member",
		steps: []step{
			{at: 0, ev: commit("", -1)}, // no members yet: a "simple" commit
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: 0, ev: commit("a", 1)},
			{at: 0, ev: commit("", -1), err: ErrUnknownMember},
			{at: 0, ev: commit("zz", 1), err: ErrUnknownMember},
			{at: time.Second, ev: newJoin("b", 2, "t0")},
			{at: time.Second, ev: commit("a", 1)}, // commit before rejoining
			{at: time.Second, ev: join("a", 3, "t0")},
			{at: time.Second, ev: commit("a", 1), err: ErrIllegalGeneration},
			{at: time.Second, ev: commit("a", 2)},
			{at: time.Second, ev: commit("b", 0), err: ErrIllegalGeneration},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2"},
	}, {
		name: "rejoining a stable group: same subscription keeps the generation, a new one rebalances",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: join("b", 4, "t0")},
			step{at: 3 * time.Second, ev: join("b", 5, "t0", "t1")},
			step{at: 3 * time.Second, ev: join("a", 6, "t0")},
		),
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1",
			4: "gen 2 of 2: t0/2", 5: "gen 3 of 2: t0/2 t1/0 t1/1", 6: "gen 3 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 3,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2 t1/0 t1/1"},
	}, {
		name: "a rejoin that sees more partitions rebalances",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: time.Second, ev: joinCounts("a", 2, map[string]int{"t0": 5}, "t0")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 1: t0/0 t0/1 t0/2 t0/3 t0/4"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1 t0/2 t0/3 t0/4"},
	}, {
		name: "a newer join of the same member supersedes the pending one",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: 0, ev: newJoin("b", 2, "t0")},
			{at: 0, ev: join("b", 3, "t0")}, // b's first join answered with "superseded"
			{at: 0, ev: join("a", 4, "t0")},
		},
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "group: rebalance in progress",
			3: "gen 2 of 2: t0/2", 4: "gen 2 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2"},
	}, {
		name: "a withdrawn first join is forgotten",
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: time.Second, ev: newJoin("b", 2, "t0")},
			{at: 2 * time.Second, ev: cancel("b", 2)},
			{at: 2 * time.Second, ev: hb("b", 1), err: ErrUnknownMember},
			{at: 3 * time.Second, ev: join("a", 3, "t0")},
		},
		replies:    map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 3: "gen 2 of 1: t0/0 t0/1 t0/2"},
		phase:      phaseStable,
		generation: 2,
		members:    map[string]string{"a": "t0/0 t0/1 t0/2"},
	}, {
		name: "a withdrawn rejoin: the member stays until its session times out",
		steps: append(slices.Clone(twoMembers),
			step{at: 3 * time.Second, ev: newJoin("c", 4, "t0")},
			step{at: 4 * time.Second, ev: join("a", 5, "t0")},
			step{at: 5 * time.Second, ev: cancel("a", 5)}, // session restarts: expires at 15 s
			step{at: 5 * time.Second, ev: cancel("a", 5)}, // twice: no effect
			step{at: 5 * time.Second, ev: join("b", 6, "t0")},
			step{ev: advance{to: 14 * time.Second}},
			step{at: 14 * time.Second, ev: hb("a", 2), err: ErrRebalanceInProgress}, // a lives on, to 24 s
			step{ev: advance{to: 23 * time.Second}},
			step{at: 23 * time.Second, ev: hb("a", 2), err: ErrRebalanceInProgress}, // to 33 s
			step{ev: advance{to: 33 * time.Second}},
		),
		replies: map[uint64]string{1: "gen 1 of 1: t0/0 t0/1 t0/2", 2: "gen 2 of 2: t0/2", 3: "gen 2 of 2: t0/0 t0/1",
			4: "gen 3 of 2: t0/2", 6: "gen 3 of 2: t0/0 t0/1"},
		phase:      phaseStable,
		generation: 3,
		members:    map[string]string{"b": "t0/0 t0/1", "c": "t0/2"},
	}, {
		name:         "the initial rebalance delay collects a starting fleet into one generation",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: 2 * time.Second, ev: newJoin("b", 2, "t0")}, // delay now ends at 5 s
			{ev: advance{to: 4 * time.Second}},
			{at: 4 * time.Second, ev: newJoin("c", 3, "t0")}, // and now at 7 s
			{ev: advance{to: 6 * time.Second}},
			{at: 6 * time.Second, ev: commit("", -1), err: ErrUnknownMember},
			{ev: advance{to: 7 * time.Second}},
		},
		replies:    map[uint64]string{1: "gen 1 of 3: t0/0", 2: "gen 1 of 3: t0/1", 3: "gen 1 of 3: t0/2"},
		phase:      phaseStable,
		generation: 1,
		members:    map[string]string{"a": "t0/0", "b": "t0/1", "c": "t0/2"},
	}, {
		name:         "the only join withdrawn during the initial delay: the group empties at once",
		initialDelay: 3 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: time.Second, ev: cancel("a", 1)},
		},
		replies:    map[uint64]string{},
		phase:      phaseEmpty,
		generation: 1,
		members:    map[string]string{},
	}, {
		name:         "the initial delay does not outlast the rebalance timeout",
		initialDelay: 40 * time.Second,
		steps: []step{
			{at: 0, ev: newJoin("a", 1, "t0")},
			{at: 39 * time.Second, ev: newJoin("b", 2, "t0")}, // would end at 79 s; capped at 60 s
			{ev: advance{to: 59 * time.Second}},
			{ev: advance{to: 60 * time.Second}},
		},
		replies:    map[uint64]string{1: "gen 1 of 2: t0/0 t0/1", 2: "gen 1 of 2: t0/2"},
		phase:      phaseStable,
		generation: 1,
		members:    map[string]string{"a": "t0/0 t0/1", "b": "t0/2"},
	}, {
		name: "refused: join with an unknown member id, leave of an unknown member",
		steps: []step{
			{at: 0, ev: join("ghost", 1, "t0"), err: ErrUnknownMember},
			{at: 0, ev: leave("ghost"), err: ErrUnknownMember},
			{at: 0, ev: hb("ghost", 0), err: ErrUnknownMember},
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
			require.Equal(t, tc.members, assignments(h.g), "members")
			for w := range h.waiters {
				if _, replied := h.replies[w]; !replied && !h.gone[w] {
					m := h.memberOf(w)
					require.NotNil(t, m, "waiter %d neither replied nor pending", w)
				}
			}
		})
	}
}

// memberOf returns the member whose Join w is pending, or nil.
func (h *harness) memberOf(w uint64) *member {
	for _, m := range h.g.members {
		if m.joining && m.waiter == w {
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
	h.run(twoMembers[:2])
	d := h.g.describe()
	require.Equal(t, Description{Group: "g", State: StatePreparingRebalance, Generation: 1, Members: []MemberDescription{
		{ID: "a", ClientID: "c", Topics: []string{"t0"}, Assignment: tps("t0/0 t0/1 t0/2")},
		{ID: "b", ClientID: "c", Topics: []string{"t0"}, Joining: true},
	}}, d)
}

// TestMachineRandom runs random operation sequences (replayable: the seed
// is logged; STRATA_SEED=n replays one) through the machine, checking its
// invariants after every step, then its liveness: once every member rejoins
// the rebalance completes, and once everyone falls silent the group
// empties, every Join ever sent having been answered or withdrawn.
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
	for run := range runs {
		h := newHarness(t, time.Duration(r.IntN(3))*2*time.Second)
		gen := map[string]int32{} // what each client knows: its generation
		pendingJoin := map[string]uint64{}
		var token uint64
		var nextID int
		topics := func() []string {
			return [][]string{{"t0"}, {"t1"}, {"t0", "t1"}}[r.IntN(3)]
		}
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
				!errors.Is(err, ErrRebalanceInProgress) {
				t.Fatalf("run %d: %T: unexpected error %v", run, ev, err)
			}
			return err
		}
		// learn updates the clients' knowledge from the replies so far.
		learn := func() {
			for id, w := range pendingJoin {
				if s, ok := h.replies[w]; ok {
					delete(pendingJoin, id)
					var g, n int32
					if _, err := fmt.Sscanf(s, "gen %d of %d", &g, &n); err == nil {
						gen[id] = g
					} else if h.g.members[id] == nil {
						delete(gen, id) // removed: the client starts over
					}
				}
			}
		}
		for range 60 {
			switch op := r.IntN(100); {
			case op < 15: // a new member
				token++
				nextID++
				id := fmt.Sprintf("m%02d", nextID)
				ev := join(id, token, topics()...)
				ev.isNew = true
				send(ev)
				gen[id], pendingJoin[id] = -1, token
			case op < 35: // a member rejoins
				if id, ok := pick(); ok {
					token++
					ev := join(id, token, h.memberTopics(id)...)
					if r.IntN(5) == 0 {
						ev = join(id, token, topics()...)
					}
					if send(ev) == nil {
						pendingJoin[id] = token
					} else {
						delete(gen, id)
					}
				}
			case op < 40: // a pending join is withdrawn
				if id, ok := pick(); ok && pendingJoin[id] != 0 {
					send(cancel(id, pendingJoin[id]))
					delete(pendingJoin, id)
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
			case op < 75:
				if id, ok := pick(); ok {
					send(commit(id, gen[id]))
				}
			case op < 80:
				if id, ok := pick(); ok {
					send(leave(id))
					delete(gen, id)
					delete(pendingJoin, id)
				}
			default:
				h.advance(h.now.Add(time.Duration(r.IntN(15000)) * time.Millisecond))
			}
			learn()
		}

		// Every member rejoins: the rebalance completes at once.
		for _, id := range slices.Sorted(maps.Keys(h.g.members)) {
			if !h.g.members[id].joining {
				token++
				require.NoError(t, h.send(join(id, token, h.memberTopics(id)...)), "run %d", run)
				pendingJoin[id] = token
			}
		}
		if len(h.g.members) > 0 {
			h.advance(h.now.Add(7 * time.Second)) // past any initial delay
			require.Equal(t, phaseStable, h.g.phase, "run %d: everyone rejoined, no generation", run)
		}
		// Everyone falls silent: the group empties and every Join was
		// answered or withdrawn.
		h.advance(h.now.Add(time.Hour))
		require.Equal(t, phaseEmpty, h.g.phase, "run %d", run)
		require.Empty(t, h.timers, "run %d: timers left", run)
		for w := range h.waiters {
			_, answered := h.replies[w]
			require.True(t, answered || h.gone[w], "run %d: join %d never answered", run, w)
		}
	}
}

func (h *harness) memberTopics(id string) []string {
	if m := h.g.members[id]; m != nil {
		return slices.Clone(m.topics)
	}
	return []string{"t0"}
}

// tps parses "t0/0 t0/1 t1/2" into partitions.
func tps(s string) []TopicPartition {
	out := []TopicPartition{}
	for _, f := range strings.Fields(s) {
		var p TopicPartition
		i := strings.LastIndexByte(f, '/')
		p.Topic = f[:i]
		fmt.Sscan(f[i+1:], &p.Partition)
		out = append(out, p)
	}
	return out
}
