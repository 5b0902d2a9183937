package group

import (
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

	"github.com/strata-log/strata/group/assign"
)

// The consumer group machine is tested as the classic one: scripts of
// heartbeats and timer firings at virtual times. After every step the
// harness checks the invariants (every held partition has one holder, the
// owners index matches the members) and that replaying every record
// emitted so far onto an empty group gives the same state: the records
// are the state.

// pp parses "foo:0,1,2 bar:0" into partitions; "" is none (not nil).
func pp(s string) assign.Partitions {
	out := assign.Partitions{}
	for _, f := range strings.Fields(s) {
		t, ps, _ := strings.Cut(f, ":")
		for _, p := range strings.Split(ps, ",") {
			var n int
			fmt.Sscan(p, &n)
			out[t] = append(out[t], n)
		}
	}
	return out
}

type testImage struct {
	version int64
	topics  map[string]assign.Topic
}

func newImage(topics map[string]int) *testImage {
	im := &testImage{version: 1, topics: map[string]assign.Topic{}}
	for t, n := range topics {
		im.topics[t] = assign.Topic{Partitions: n}
	}
	return im
}

func (im *testImage) Version() int64 { return im.version }
func (im *testImage) Topic(name string) (assign.Topic, bool) {
	t, ok := im.topics[name]
	return t, ok
}
func (im *testImage) Names() []string { return slices.Sorted(maps.Keys(im.topics)) }

// set changes a topic (creates it, or grows it), a new version.
func (im *testImage) set(name string, partitions int) {
	im.topics[name] = assign.Topic{Partitions: partitions}
	im.version++
}

// fixedAssignor is Kafka's MockPartitionAssignor: it answers what the
// test prepared.
type fixedAssignor struct {
	name   string
	result map[string]assign.Partitions
}

func (a *fixedAssignor) Name() string { return a.name }
func (a *fixedAssignor) Assign(s assign.Spec) map[string]assign.Partitions {
	out := map[string]assign.Partitions{}
	for _, m := range s.Members {
		out[m.ID] = a.result[m.ID].Clone()
	}
	return out
}

type cgHarness struct {
	t       *testing.T
	g       *consumerGroup
	cfg     consumerConfig
	now     time.Time
	image   *testImage
	records []cgRec
	timers  map[cgTimer]time.Time
	last    []cgEffect     // effects of the last step
	replay  *consumerGroup // the records applied one by one to an empty group
}

func newCGHarness(t *testing.T, cfg consumerConfig, image *testImage) *cgHarness {
	return &cgHarness{t: t, g: newConsumerGroup("g", cfg), cfg: cfg, now: t0, image: image, timers: map[cgTimer]time.Time{},
		replay: newConsumerGroup("g", cfg)}
}

// seed applies records as if replayed at load (Kafka's context.replay).
func (h *cgHarness) seed(recs ...cgRec) {
	for _, r := range recs {
		h.g.apply(r)
		h.replay.apply(r)
		h.records = append(h.records, r)
	}
	h.check()
}

// at moves the clock to t0+d, firing the due timers in order.
func (h *cgHarness) at(d time.Duration) {
	h.t.Helper()
	to := t0.Add(d)
	require.False(h.t, to.Before(h.now), "back in time")
	for {
		var next *cgTimer
		var due time.Time
		for k, at := range h.timers {
			if !at.After(to) && (next == nil || at.Before(due) || at.Equal(due) && k.member < next.member) {
				k := k
				next, due = &k, at
			}
		}
		if next == nil {
			break
		}
		delete(h.timers, *next)
		h.now = due
		h.step(*next)
	}
	h.now = to
}

func (h *cgHarness) step(ev cgEvent) (cgResponse, error) {
	h.t.Helper()
	resp, effs, err := h.g.step(h.now, ev, nil)
	if err != nil {
		require.Empty(h.t, effs, "a failed step has no effects")
	}
	h.last = effs
	for _, e := range effs {
		switch e.kind {
		case cgRecord:
			h.records = append(h.records, e.rec)
			h.replay.apply(e.rec)
		case cgArm:
			k := cgTimer{member: e.member, revoke: e.revoke}
			if at, ok := h.timers[k]; !ok || e.at.Before(at) {
				h.timers[k] = e.at
			}
		case cgCancel:
			delete(h.timers, cgTimer{member: e.member, revoke: e.revoke})
		}
	}
	h.check()
	return resp, err
}

// hb sends a heartbeat at the harness's time.
func (h *cgHarness) hb(ev cgHeartbeat) (cgResponse, error) {
	h.t.Helper()
	ev.image = h.image
	return h.step(ev)
}

// recs returns the records of the last step.
func (h *cgHarness) recs() []cgRec {
	var out []cgRec
	for _, e := range h.last {
		if e.kind == cgRecord {
			out = append(out, e.rec)
		}
	}
	return out
}

func (h *cgHarness) check() {
	h.t.Helper()
	g := h.g
	held := map[tpID]string{}
	for id, m := range g.members {
		for _, ps := range []assign.Partitions{m.assigned, m.revoking} {
			for t, parts := range ps {
				for _, p := range parts {
					k := tpID{t, p}
					require.Empty(h.t, held[k], "%v held by %s and %s", k, held[k], id)
					held[k] = id
					require.Equal(h.t, id, g.owners[k].member, "owners of %v", k)
				}
			}
		}
		if m.instanceID != "" {
			require.Equal(h.t, id, g.static[m.instanceID])
		}
	}
	require.Len(h.t, g.owners, len(held), "owners index has stale entries")
	require.Equal(h.t, snapshotCG(g), snapshotCG(h.replay), "replaying the records gives another state")
}

type cgSnapshot struct {
	Epoch, AssignmentEpoch int32
	Members                map[string]string
	Static                 map[string]string
	Target                 map[string]string
	Topics                 string
	Regexes                map[string]string
	Owners                 map[string]string
}

func partsString(p assign.Partitions) string {
	var fs []string
	for _, t := range slices.Sorted(maps.Keys(p)) {
		if len(p[t]) > 0 {
			fs = append(fs, fmt.Sprintf("%s:%v", t, p[t]))
		}
	}
	return strings.Join(fs, " ")
}

func snapshotCG(g *consumerGroup) cgSnapshot {
	s := cgSnapshot{Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Members: map[string]string{}, Static: maps.Clone(g.static),
		Target: map[string]string{}, Regexes: map[string]string{}, Owners: map[string]string{}}
	for id, m := range g.members {
		s.Members[id] = fmt.Sprintf("%+v epoch=%d prev=%d %v assigned=[%s] revoking=[%s]", m.subscription, m.epoch, m.prevEpoch,
			m.state, partsString(m.assigned), partsString(m.revoking))
	}
	for id, p := range g.target {
		s.Target[id] = partsString(p)
	}
	s.Topics = fmt.Sprint(g.topics)
	for re, r := range g.regexes {
		s.Regexes[re] = fmt.Sprint(r.topics, r.version)
	}
	for k, o := range g.owners {
		s.Owners[fmt.Sprint(k)] = fmt.Sprint(o)
	}
	return s
}

// join is a first heartbeat of member id subscribed to topics.
func cgJoin(id string, topics ...string) cgHeartbeat {
	return cgHeartbeat{member: id, epoch: 0, rebalanceTimeout: 5 * time.Second, topics: topics, owned: assign.Partitions{},
		clientID: "client", clientHost: "localhost"}
}

// beat is a heartbeat at epoch e; owned as pp, "-" for not sent.
func cgBeat(id string, e int32, owned string) cgHeartbeat {
	ev := cgHeartbeat{member: id, epoch: e, rebalanceTimeout: -1, clientID: "client", clientHost: "localhost"}
	if owned != "-" {
		ev.owned = pp(owned)
	}
	return ev
}

// stableMember seeds a member as Kafka's ConsumerGroupBuilder does.
func stableMember(id string, epoch, prev int32, topics []string, assigned string) []cgRec {
	sub := subscription{clientID: "client", clientHost: "localhost", topics: topics, rebalanceTimeout: 5 * time.Second, assignor: "range"}
	cur := currentAssignment{epoch: epoch, prevEpoch: prev, state: memberStable, assigned: pp(assigned), revoking: assign.Partitions{}}
	return []cgRec{{kind: recMember, member: id, sub: &sub}, {kind: recCurrent, member: id, current: &cur}}
}

func seedGroup(epoch int32, topics map[string]int, members ...[]cgRec) []cgRec {
	var out []cgRec
	for _, m := range members {
		out = append(out, m...)
	}
	md := map[string]assign.Topic{}
	for t, n := range topics {
		md[t] = assign.Topic{Partitions: n}
	}
	out = append(out, cgRec{kind: recPartitionMeta, topics: md}, cgRec{kind: recGroupEpoch, epoch: epoch})
	for _, m := range members {
		out = append(out, cgRec{kind: recTargetMember, member: m[0].member, partitions: m[1].current.assigned.Clone()})
	}
	return append(out, cgRec{kind: recTargetMeta, epoch: epoch})
}

// Kafka's CurrentAssignmentBuilderTest, case by case.
func TestReconcileKafkaCases(t *testing.T) {
	type state struct {
		epoch, prev        int32
		st                 memberState
		assigned, revoking string
	}
	cases := []struct {
		name        string
		from        state
		targetEpoch int32
		target      string
		held        func(topic string, p int) bool
		owned       string // "-": not sent
		want        state
	}{{
		name: "StableToStable", from: state{10, 10, memberStable, "a:1,2,3 b:4,5,6", ""},
		targetEpoch: 11, target: "a:1,2,3 b:4,5,6", held: heldAll, owned: "-",
		want: state{11, 10, memberStable, "a:1,2,3 b:4,5,6", ""},
	}, {
		name: "StableToStableWithNewPartitions", from: state{10, 10, memberStable, "a:1,2,3 b:4,5,6", ""},
		targetEpoch: 11, target: "a:1,2,3,4 b:4,5,6,7", held: heldNone, owned: "-",
		want: state{11, 10, memberStable, "a:1,2,3,4 b:4,5,6,7", ""},
	}, {
		name: "StableToUnrevokedPartitions", from: state{10, 10, memberStable, "a:1,2,3 b:4,5,6", ""},
		targetEpoch: 11, target: "a:2,3,4 b:5,6,7", held: heldNone, owned: "-",
		want: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
	}, {
		name: "StableToUnreleasedPartitions", from: state{10, 10, memberStable, "a:1,2,3 b:4,5,6", ""},
		targetEpoch: 11, target: "a:1,2,3,4 b:4,5,6,7", held: heldAll, owned: "-",
		want: state{11, 10, memberUnreleased, "a:1,2,3 b:4,5,6", ""},
	}, {
		name: "StableToUnreleasedPartitionsWithOwnedPartitionsNotHavingRevokedPartitions", from: state{10, 10, memberStable, "a:1,2,3 b:4,5,6", ""},
		targetEpoch: 11, target: "a:1,2,3 b:4,5,7", held: func(t string, _ int) bool { return t == "b" }, owned: "",
		want: state{11, 10, memberUnreleased, "a:1,2,3 b:4,5", ""},
	}, {
		name: "UnrevokedPartitionsToStable", from: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
		targetEpoch: 11, target: "a:2,3 b:5,6", held: heldNone, owned: "a:2,3 b:5,6",
		want: state{11, 10, memberStable, "a:2,3 b:5,6", ""},
	}, {
		name: "RemainsInUnrevokedPartitions (owned not sent)", from: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
		targetEpoch: 12, target: "a:3 b:6", held: heldNone, owned: "-",
		want: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
	}, {
		name: "RemainsInUnrevokedPartitions (still owns a:1)", from: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
		targetEpoch: 12, target: "a:3 b:6", held: heldNone, owned: "a:1,2,3 b:5,6",
		want: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
	}, {
		name: "RemainsInUnrevokedPartitions (still owns b:4)", from: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
		targetEpoch: 12, target: "a:3 b:6", held: heldNone, owned: "a:2,3 b:4,5,6",
		want: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
	}, {
		name: "UnrevokedPartitionsToUnrevokedPartitions", from: state{10, 10, memberUnrevoked, "a:2,3 b:5,6", "a:1 b:4"},
		targetEpoch: 12, target: "a:3 b:6", held: heldNone, owned: "a:2,3 b:5,6",
		want: state{11, 10, memberUnrevoked, "a:3 b:6", "a:2 b:5"},
	}, {
		name: "UnrevokedPartitionsToUnreleasedPartitions", from: state{11, 10, memberUnrevoked, "a:2,3 b:5,6", ""},
		targetEpoch: 11, target: "a:2,3,4 b:5,6,7", held: heldAll, owned: "a:2,3 b:5,6",
		want: state{11, 11, memberUnreleased, "a:2,3 b:5,6", ""},
	}, {
		name: "UnreleasedPartitionsToStable", from: state{11, 11, memberUnreleased, "a:2,3 b:5,6", ""},
		targetEpoch: 12, target: "a:2,3 b:5,6", held: heldAll, owned: "-",
		want: state{12, 11, memberStable, "a:2,3 b:5,6", ""},
	}, {
		name: "UnreleasedPartitionsToStableWithNewPartitions", from: state{11, 11, memberUnreleased, "a:2,3 b:5,6", ""},
		targetEpoch: 11, target: "a:2,3,4 b:5,6,7", held: heldNone, owned: "-",
		want: state{11, 11, memberStable, "a:2,3,4 b:5,6,7", ""},
	}, {
		name: "UnreleasedPartitionsToUnreleasedPartitions", from: state{11, 11, memberUnreleased, "a:2,3 b:5,6", ""},
		targetEpoch: 11, target: "a:2,3,4 b:5,6,7", held: heldAll, owned: "-",
		want: state{11, 11, memberUnreleased, "a:2,3 b:5,6", ""},
	}, {
		name: "UnreleasedPartitionsToUnrevokedPartitions", from: state{11, 11, memberUnreleased, "a:2,3 b:5,6", ""},
		targetEpoch: 12, target: "a:3 b:6", held: heldAll, owned: "-",
		want: state{11, 11, memberUnrevoked, "a:3 b:6", "a:2 b:5"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := currentAssignment{epoch: tc.from.epoch, prevEpoch: tc.from.prev, state: tc.from.st, assigned: pp(tc.from.assigned), revoking: pp(tc.from.revoking)}
			var owned assign.Partitions
			if tc.owned != "-" {
				owned = pp(tc.owned)
			}
			got, err := reconcile(from, tc.targetEpoch, pp(tc.target), owned, tc.held)
			require.NoError(t, err)
			want := currentAssignment{epoch: tc.want.epoch, prevEpoch: tc.want.prev, state: tc.want.st, assigned: pp(tc.want.assigned), revoking: pp(tc.want.revoking)}
			require.True(t, want.equal(got), "want %+v, got %+v", want, got)
		})
	}
}

func heldAll(string, int) bool  { return true }
func heldNone(string, int) bool { return false }

// Kafka's testUnknownState: a member in a state this coordinator does not
// know is fenced unless it reports holding nothing.
func TestReconcileUnknownState(t *testing.T) {
	from := currentAssignment{epoch: 11, prevEpoch: 11, state: memberUnknown, assigned: pp("a:1"), revoking: assign.Partitions{}}
	_, err := reconcile(from, 12, pp("a:1"), nil, heldNone)
	require.ErrorIs(t, err, ErrFencedMemberEpoch)
	_, err = reconcile(from, 12, pp("a:1"), pp("a:1"), heldNone)
	require.ErrorIs(t, err, ErrFencedMemberEpoch)
	got, err := reconcile(from, 12, pp("a:1"), pp(""), heldNone)
	require.NoError(t, err)
	require.Equal(t, memberStable, got.state)
	require.Equal(t, int32(12), got.epoch)
}

// Kafka's testConsumerHeartbeatRequestValidation.
func TestConsumerHeartbeatValidation(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		ev   cgHeartbeat
		err  error
	}{
		{"no member id", cgHeartbeat{epoch: 1}, ErrInvalidRequest},
		{"join without rebalance timeout", cgHeartbeat{member: "m", rebalanceTimeout: -1, topics: []string{"a"}, owned: pp("")}, ErrInvalidRequest},
		{"join without owned partitions", cgHeartbeat{member: "m", topics: []string{"a"}}, ErrInvalidRequest},
		{"join owning partitions", cgHeartbeat{member: "m", topics: []string{"a"}, owned: pp("a:0")}, ErrInvalidRequest},
		{"join without names or regex", cgHeartbeat{member: "m", owned: pp("")}, ErrInvalidRequest},
		{"static leave without instance id", cgHeartbeat{member: "m", epoch: -2}, ErrInvalidRequest},
		{"epoch below -2", cgHeartbeat{member: "m", epoch: -3}, ErrInvalidRequest},
		{"an empty topic name", cgHeartbeat{member: "m", topics: []string{""}, owned: pp("")}, ErrInvalidRequest},
		{"unknown assignor", cgHeartbeat{member: "m", topics: []string{"a"}, owned: pp(""), assignor: "sticky"}, ErrUnsupportedAssignor},
		{"invalid regex", cgHeartbeat{member: "m", regex: str("[a"), owned: pp("")}, ErrInvalidRegularExpression},
		{"lookahead, which RE2/J refuses", cgHeartbeat{member: "m", regex: str("(?=a)b"), owned: pp("")}, ErrInvalidRegularExpression},
		{"Java named group, which RE2/J refuses", cgHeartbeat{member: "m", regex: str("(?<n>a)"), owned: pp("")}, ErrInvalidRegularExpression},
		{"a member id too long for a record key", cgHeartbeat{member: strings.Repeat("m", 1<<15), epoch: 1}, ErrInvalidRequest},
		{"a regex too long for a record key", cgHeartbeat{member: "m", regex: str(strings.Repeat("a", 1<<15)), owned: pp("")}, ErrInvalidRequest},
		{"a join with an empty list", cgHeartbeat{member: "m", topics: []string{}, owned: pp("")}, nil},
		{"a join with an empty regex", cgHeartbeat{member: "m", regex: str(""), owned: pp("")}, nil},
		{"a regular heartbeat", cgHeartbeat{member: "m", epoch: 5, rebalanceTimeout: -1}, nil},
		{"a leave", cgHeartbeat{member: "m", epoch: -1, rebalanceTimeout: -1}, nil},
		{"a static leave", cgHeartbeat{member: "m", epoch: -2, instanceID: "i", rebalanceTimeout: -1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ev.validate()
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
			}
		})
	}
}

// Kafka's testUnknownMemberIdJoinsConsumerGroup and
// testConsumerGroupMemberEpochValidation.
func TestConsumerMemberEpochValidation(t *testing.T) {
	h := newCGHarness(t, consumerConfig{assignors: []assign.Assignor{&fixedAssignor{name: "range"}}}, newImage(map[string]int{"foo": 6, "bar": 3}))
	m := stableMember("m", 100, 99, []string{"bar", "foo"}, "foo:1,2,3")
	h.seed(seedGroup(100, map[string]int{"foo": 6, "bar": 3}, m)...)

	_, err := h.hb(cgBeat("unknown", 100, "-"))
	require.ErrorIs(t, err, ErrUnknownMember)
	_, err = h.hb(cgBeat("m", 200, "-"))
	require.ErrorIs(t, err, ErrFencedMemberEpoch, "greater than the member's")
	_, err = h.hb(cgBeat("m", 50, "-"))
	require.ErrorIs(t, err, ErrFencedMemberEpoch, "smaller")
	_, err = h.hb(cgBeat("m", 99, "-"))
	require.ErrorIs(t, err, ErrFencedMemberEpoch, "previous epoch without partitions")
	_, err = h.hb(cgBeat("m", 99, "foo:1,2,3,4"))
	require.ErrorIs(t, err, ErrFencedMemberEpoch, "previous epoch with a partition not its own")
	resp, err := h.hb(cgBeat("m", 99, "foo:1,2"))
	require.NoError(t, err, "previous epoch with a subset: the answer was lost")
	require.Equal(t, int32(100), resp.epoch)
	// KAFKA-19233: a fenced member rejoins under its id with epoch 0.
	resp, err = h.hb(cgJoin("m", "bar", "foo"))
	require.NoError(t, err)
	require.Equal(t, int32(100), resp.epoch)
	require.Equal(t, pp("foo:1,2,3"), resp.assignment, "a join gets its whole assignment back")
}

// Kafka's testReconciliationProcess: member 3 joins a stable group of two;
// the others revoke, then 3 takes what each released, in order.
func TestConsumerReconciliationProcess(t *testing.T) {
	a := &fixedAssignor{name: "range"}
	h := newCGHarness(t, consumerConfig{assignors: []assign.Assignor{a}}, newImage(map[string]int{"foo": 6, "bar": 3}))
	topics := []string{"bar", "foo"}
	h.seed(seedGroup(10, map[string]int{"foo": 6, "bar": 3},
		stableMember("m1", 10, 9, topics, "foo:0,1,2 bar:0,1"),
		stableMember("m2", 10, 9, topics, "foo:3,4,5 bar:2"))...)
	a.result = map[string]assign.Partitions{"m1": pp("foo:0,1 bar:0"), "m2": pp("foo:2,3 bar:2"), "m3": pp("foo:4,5 bar:1")}
	require.Equal(t, "Stable", h.g.state())

	stateOf := func(id string) (int32, int32, memberState) {
		m := h.g.members[id]
		return m.epoch, m.prevEpoch, m.state
	}
	type want struct {
		epoch, prev int32
		st          memberState
		assignment  string // "-": not sent
		records     int    // -1: not checked
		group       string
	}
	steps := []struct {
		name string
		ev   cgHeartbeat
		want want
	}{
		{"m3 joins: epoch 11, waits for partitions", func() cgHeartbeat { e := cgJoin("m3", "foo", "bar"); e.assignor = "range"; return e }(),
			want{11, 0, memberUnreleased, "", -1, "Reconciling"}},
		{"m1 heartbeats: revokes foo:2 bar:1", cgBeat("m1", 10, "-"), want{10, 10, memberUnrevoked, "foo:0,1 bar:0", 1, "Reconciling"}},
		{"m2 heartbeats: revokes foo:4,5", cgBeat("m2", 10, "-"), want{10, 10, memberUnrevoked, "foo:3 bar:2", 1, "Reconciling"}},
		{"m3 heartbeats: still waiting", cgBeat("m3", 11, "-"), want{11, 11, memberUnreleased, "-", 1, "Reconciling"}},
		{"m1 acks its revocation", cgBeat("m1", 10, "foo:0,1 bar:0"), want{11, 10, memberStable, "-", 1, "Reconciling"}},
		{"m2 heartbeats without acking: no-op", cgBeat("m2", 10, "-"), want{10, 10, memberUnrevoked, "-", 0, "Reconciling"}},
		{"m3 gets bar:1, released by m1", cgBeat("m3", 11, "-"), want{11, 11, memberUnreleased, "bar:1", 1, "Reconciling"}},
		{"m3 heartbeats: m2 has not acked", cgBeat("m3", 11, "-"), want{11, 11, memberUnreleased, "-", 0, "Reconciling"}},
		{"m2 acks, gets foo:2 released by m1", cgBeat("m2", 10, "foo:3 bar:2"), want{11, 10, memberStable, "foo:2,3 bar:2", 1, "Reconciling"}},
		{"m3 gets all its partitions", cgBeat("m3", 11, "bar:1"), want{11, 11, memberStable, "foo:4,5 bar:1", 1, "Stable"}},
	}
	for i, s := range steps {
		resp, err := h.hb(s.ev)
		require.NoError(t, err, "step %d: %s", i, s.name)
		e, p, st := stateOf(s.ev.member)
		require.Equal(t, []any{s.want.epoch, s.want.prev, s.want.st}, []any{e, p, st}, "step %d: %s", i, s.name)
		require.Equal(t, s.want.epoch, resp.epoch, "step %d", i)
		if s.want.assignment == "-" {
			require.Nil(t, resp.assignment, "step %d: %s", i, s.name)
		} else {
			require.Equal(t, pp(s.want.assignment), resp.assignment, "step %d: %s", i, s.name)
		}
		if s.want.records >= 0 {
			require.Len(t, h.recs(), s.want.records, "step %d: %s", i, s.name)
		}
		require.Equal(t, s.want.group, h.g.state(), "step %d: %s", i, s.name)
	}
}

// Kafka's testMemberJoinsEmptyConsumerGroup and
// testGroupEpochBumpWhenNewStaticMemberJoins, with the uniform assignor.
func TestConsumerJoinEmptyGroup(t *testing.T) {
	h := newCGHarness(t, consumerConfig{}, newImage(map[string]int{"foo": 6, "bar": 3}))
	_, err := h.hb(cgBeat("m", 1, "-"))
	require.ErrorIs(t, err, ErrUnknownMember)
	resp, err := h.hb(cgJoin("m", "foo", "bar"))
	require.NoError(t, err)
	require.Equal(t, cgResponse{member: "m", epoch: 1, interval: 5 * time.Second, assignment: pp("foo:0,1,2,3,4,5 bar:0,1,2")}, resp)
	kinds := []recKind{}
	for _, r := range h.recs() {
		kinds = append(kinds, r.kind)
	}
	// Kafka's order: the member, the partition metadata, the group epoch,
	// the target (member, then epoch), the current assignment.
	require.Equal(t, []recKind{recMember, recPartitionMeta, recGroupEpoch, recTargetMember, recTargetMeta, recCurrent}, kinds)
	require.Equal(t, "Stable", h.g.state())
	require.Equal(t, t0.Add(45*time.Second), h.timers[cgTimer{member: "m"}], "session armed")

	// A static member joins: the epoch is bumped, the uniform assignor
	// moves half the partitions.
	ev := cgJoin("s", "foo", "bar")
	ev.instanceID = "inst"
	resp, err = h.hb(ev)
	require.NoError(t, err)
	require.Equal(t, int32(2), resp.epoch)
	require.Equal(t, int32(2), h.g.epoch)
	require.Equal(t, assign.Partitions{}, resp.assignment, "all still held by m")
	require.Equal(t, memberUnreleased, h.g.members["s"].state)
}

// Kafka's static membership cases: testStaticMemberGetsBackAssignmentUponRejoin,
// testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves,
// testLeavingStaticMemberBumpsGroupEpoch,
// testShouldThrownUnreleasedInstanceIdExceptionWhenNewMemberJoinsWithInUseInstanceId,
// testShouldThrowUnknownMemberIdExceptionWhenUnknownStaticMemberJoins,
// testShouldThrowFencedInstanceIdExceptionWhenStaticMemberWithDifferentMemberIdJoins.
func TestConsumerStaticMembership(t *testing.T) {
	h := newCGHarness(t, consumerConfig{}, newImage(map[string]int{"foo": 4}))
	static := func(ev cgHeartbeat, inst string) cgHeartbeat { ev.instanceID = inst; return ev }
	_, err := h.hb(static(cgJoin("a", "foo"), "ia"))
	require.NoError(t, err)
	_, err = h.hb(static(cgJoin("b", "foo"), "ib"))
	require.NoError(t, err)
	_, err = h.hb(static(cgBeat("a", 1, "foo:0,1,2,3"), "ia"))
	require.NoError(t, err)
	_, err = h.hb(static(cgBeat("a", 1, "foo:0,1"), "ia"))
	require.NoError(t, err)
	_, err = h.hb(static(cgBeat("b", 2, ""), "ib"))
	require.NoError(t, err)
	require.Equal(t, "Stable", h.g.state())
	epoch := h.g.epoch
	bAssigned := h.g.members["b"].assigned.Clone()
	require.Equal(t, 2, bAssigned.Count())

	_, err = h.hb(static(cgJoin("b2", "foo"), "ib"))
	require.ErrorIs(t, err, ErrUnreleasedInstanceID, "b has not left")
	_, err = h.hb(static(cgBeat("b2", epoch, "-"), "ib"))
	require.ErrorIs(t, err, ErrFencedInstanceID, "another member id holds ib")
	_, err = h.hb(static(cgBeat("c", epoch, "-"), "ic"))
	require.ErrorIs(t, err, ErrUnknownMember, "unknown instance")

	// b leaves for now: no bump, it keeps its partitions.
	resp, err := h.hb(static(cgBeat("b", -2, "-"), "ib"))
	require.NoError(t, err)
	require.Equal(t, int32(-2), resp.epoch)
	require.Equal(t, epoch, h.g.epoch)
	require.Equal(t, bAssigned, h.g.members["b"].assigned)

	// It comes back under a new id: its assignment, no bump.
	resp, err = h.hb(static(cgJoin("b2", "foo"), "ib"))
	require.NoError(t, err)
	require.Equal(t, epoch, h.g.epoch)
	require.Equal(t, epoch, resp.epoch)
	require.Equal(t, bAssigned, resp.assignment)
	require.Nil(t, h.g.members["b"])
	_, err = h.hb(static(cgBeat("b", epoch, "-"), "ib"))
	require.ErrorIs(t, err, ErrFencedInstanceID, "the old id is fenced")

	// A static member leaving for good bumps the epoch.
	resp, err = h.hb(static(cgBeat("b2", -1, "-"), "ib"))
	require.NoError(t, err)
	require.Equal(t, int32(-1), resp.epoch)
	require.Equal(t, epoch+1, h.g.epoch)
	require.Empty(t, h.g.static["ib"])
}

// Kafka's testLeavingMemberBumpsGroupEpoch and testSessionTimeoutExpiration:
// a member that leaves, or stops heartbeating for a session, is removed;
// the others get its partitions.
func TestConsumerLeaveAndSessionTimeout(t *testing.T) {
	h := newCGHarness(t, consumerConfig{sessionTimeout: 10 * time.Second}, newImage(map[string]int{"foo": 2}))
	_, err := h.hb(cgJoin("a", "foo"))
	require.NoError(t, err)
	_, err = h.hb(cgJoin("b", "foo"))
	require.NoError(t, err)
	_, err = h.hb(cgBeat("a", 1, "foo:0,1"))
	require.NoError(t, err)
	_, err = h.hb(cgBeat("a", 1, "foo:0"))
	require.NoError(t, err)
	_, err = h.hb(cgBeat("b", 2, ""))
	require.NoError(t, err)
	require.Equal(t, "Stable", h.g.state())

	// b keeps heartbeating, a goes silent.
	h.at(5 * time.Second)
	_, err = h.hb(cgBeat("b", 2, "foo:1"))
	require.NoError(t, err)
	h.at(10*time.Second - time.Millisecond)
	require.NotNil(t, h.g.members["a"])
	h.at(10 * time.Second)
	require.Nil(t, h.g.members["a"], "a's session expired at 10 s")
	require.Equal(t, int32(3), h.g.epoch)
	require.Equal(t, "Assigning", h.g.state())
	resp, err := h.hb(cgBeat("b", 2, "foo:1"))
	require.NoError(t, err)
	require.Equal(t, int32(3), resp.epoch)
	require.Equal(t, pp("foo:0,1"), resp.assignment)

	_, err = h.hb(cgJoin("c", "foo"))
	require.NoError(t, err)
	resp, err = h.hb(cgBeat("c", 4, "-"))
	require.NoError(t, err)
	require.Equal(t, "Reconciling", h.g.state())
	resp, err = h.hb(cgBeat("c", -1, "-"))
	require.NoError(t, err)
	require.Equal(t, int32(-1), resp.epoch)
	require.Equal(t, int32(5), h.g.epoch, "leaving bumps")
	_, err = h.hb(cgBeat("c", -1, "-"))
	require.ErrorIs(t, err, ErrUnknownMember)
}

// Kafka's testRebalanceTimeoutExpiration: a member that does not revoke
// within its rebalance timeout is fenced; one that revokes in time is not.
func TestConsumerRebalanceTimeout(t *testing.T) {
	h := newCGHarness(t, consumerConfig{}, newImage(map[string]int{"foo": 2}))
	_, err := h.hb(cgJoin("a", "foo"))
	require.NoError(t, err)
	h.at(time.Second)
	_, err = h.hb(cgJoin("b", "foo"))
	require.NoError(t, err)
	_, err = h.hb(cgBeat("a", 1, "foo:0,1"))
	require.NoError(t, err)
	require.Equal(t, memberUnrevoked, h.g.members["a"].state)
	require.Equal(t, t0.Add(6*time.Second), h.timers[cgTimer{member: "a", revoke: true}])
	// a keeps heartbeating but never gives foo:0 up.
	for s := 2; s <= 5; s++ {
		h.at(time.Duration(s) * time.Second)
		_, err = h.hb(cgBeat("a", 1, "foo:0,1"))
		require.NoError(t, err)
		_, err = h.hb(cgBeat("b", 2, "-"))
		require.NoError(t, err)
	}
	h.at(6*time.Second - time.Millisecond)
	require.NotNil(t, h.g.members["a"])
	h.at(6 * time.Second)
	require.Nil(t, h.g.members["a"], "fenced at 6 s")
	resp, err := h.hb(cgBeat("b", 2, ""))
	require.NoError(t, err)
	require.Equal(t, pp("foo:0,1"), resp.assignment)
}

// Kafka's testPartitionMetadataRefresh, and a topic created after a regex
// subscription: the group epoch is bumped and the partitions assigned.
func TestConsumerMetadataAndRegex(t *testing.T) {
	im := newImage(map[string]int{"foo": 2, "logs-a": 1, "other": 1})
	h := newCGHarness(t, consumerConfig{}, im)
	re := "logs-.*"
	ev := cgHeartbeat{member: "m", rebalanceTimeout: time.Second, regex: &re, owned: pp("")}
	resp, err := h.hb(ev)
	require.NoError(t, err)
	require.Equal(t, pp("logs-a:0"), resp.assignment)
	require.Equal(t, []string{"logs-a"}, h.g.regexes[re].topics)

	im.set("logs-b", 2)
	resp, err = h.hb(cgBeat("m", 1, "logs-a:0"))
	require.NoError(t, err)
	require.Equal(t, int32(2), resp.epoch)
	require.Equal(t, pp("logs-a:0 logs-b:0,1"), resp.assignment)

	im.set("logs-a", 3) // grows
	resp, err = h.hb(cgBeat("m", 2, "-"))
	require.NoError(t, err)
	require.Equal(t, int32(3), resp.epoch)
	require.Equal(t, pp("logs-a:0,1,2 logs-b:0,1"), resp.assignment)

	im.set("unrelated", 1) // no bump: not subscribed
	resp, err = h.hb(cgBeat("m", 3, "-"))
	require.NoError(t, err)
	require.Equal(t, int32(3), resp.epoch)
	require.Nil(t, resp.assignment)

	// Switching to topic names drops the regex and its record.
	ev = cgBeat("m", 3, "-")
	ev.topics, ev.regex = []string{"foo"}, new(string)
	resp, err = h.hb(ev)
	require.NoError(t, err)
	require.Empty(t, h.g.regexes)
	require.Equal(t, int32(3), resp.epoch, "revoking the logs partitions first")
	resp, err = h.hb(cgBeat("m", 3, ""))
	require.NoError(t, err)
	require.Equal(t, pp("foo:0,1"), resp.assignment)
}

// TestConsumerMemberJoinMovesOnlyItsShare: the rebalance test. A
// fourth member joins a stable group of three; the others keep consuming
// everything they are not asked to give up, and only the partitions the
// new member takes change hands.
func TestConsumerMemberJoinMovesOnlyItsShare(t *testing.T) {
	h := newCGHarness(t, consumerConfig{}, newImage(map[string]int{"t": 12}))
	clients := newClientModel(h)
	for _, id := range []string{"a", "b", "c"} {
		clients.join(id, "t")
	}
	clients.settle()
	before := map[string]assign.Partitions{}
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, 4, clients.held[id].Count())
		before[id] = clients.held[id].Clone()
	}
	clients.join("d", "t")
	clients.settle()
	require.Equal(t, 3, clients.held["d"].Count())
	moved := 0
	for id, ps := range before {
		require.Equal(t, 3, clients.held[id].Count())
		for topic, parts := range clients.held[id] {
			for _, p := range parts {
				require.Contains(t, before[id][topic], p, "%s gained a partition", id)
			}
		}
		moved += ps.Count() - clients.held[id].Count()
		// Never a stop: through the rebalance each held at least what it
		// keeps.
		require.GreaterOrEqual(t, clients.minHeld[id], 3)
	}
	require.Equal(t, 3, moved)
}

// clientModel plays well-behaved consumers against the harness: each holds
// what its last answer assigned, gives up what is no longer there at once
// and says so in its next heartbeat. It checks the protocol's promise: no
// partition is ever held by two clients.
type clientModel struct {
	h       *cgHarness
	epoch   map[string]int32
	held    map[string]assign.Partitions
	minHeld map[string]int
}

func newClientModel(h *cgHarness) *clientModel {
	return &clientModel{h: h, epoch: map[string]int32{}, held: map[string]assign.Partitions{}, minHeld: map[string]int{}}
}

func (c *clientModel) join(id string, topics ...string) {
	c.h.t.Helper()
	resp, err := c.h.hb(cgJoin(id, topics...))
	require.NoError(c.h.t, err)
	c.answer(id, resp)
}

func (c *clientModel) beat(id string) error {
	c.h.t.Helper()
	resp, err := c.h.hb(cgBeat(id, c.epoch[id], partsString2(c.held[id])))
	if err != nil {
		return err
	}
	c.answer(id, resp)
	return nil
}

func partsString2(p assign.Partitions) string {
	var fs []string
	for _, t := range slices.Sorted(maps.Keys(p)) {
		if len(p[t]) > 0 {
			var ns []string
			for _, n := range p[t] {
				ns = append(ns, fmt.Sprint(n))
			}
			fs = append(fs, t+":"+strings.Join(ns, ","))
		}
	}
	return strings.Join(fs, " ")
}

func (c *clientModel) answer(id string, resp cgResponse) {
	c.epoch[id] = resp.epoch
	if resp.assignment != nil {
		c.held[id] = resp.assignment.Clone()
	}
	n := c.held[id].Count()
	if m, ok := c.minHeld[id]; !ok || n < m || m == 0 {
		c.minHeld[id] = n
	}
	c.checkDisjoint()
}

func (c *clientModel) checkDisjoint() {
	c.h.t.Helper()
	seen := map[tpID]string{}
	for id, ps := range c.held {
		for t, parts := range ps {
			for _, p := range parts {
				require.Empty(c.h.t, seen[tpID{t, p}], "%s/%d held by %s and %s", t, p, seen[tpID{t, p}], id)
				seen[tpID{t, p}] = id
			}
		}
	}
}

// settle heartbeats every client until all are stable at the group's
// assignment epoch.
func (c *clientModel) settle() {
	c.h.t.Helper()
	for range 20 {
		for _, id := range slices.Sorted(maps.Keys(c.epoch)) {
			require.NoError(c.h.t, c.beat(id))
		}
		if c.h.g.state() == "Stable" {
			return
		}
	}
	c.h.t.Fatalf("group not stable: %s", c.h.g.state())
}

// TestConsumerRandom plays random well-behaved and misbehaving clients
// against a group: joins, heartbeats that report what they hold, leaves,
// static leaves and returns, silent members timing out, topics growing.
// After every step the harness checks its invariants and the replay of the
// records; the client model checks that no partition is ever held by two
// clients. A failure prints its seed; STRATA_SEED=n replays it.
func TestConsumerRandom(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	for run := range 40 {
		im := newImage(map[string]int{"a": 1 + r.IntN(6), "b": 1 + r.IntN(6)})
		cfg := consumerConfig{sessionTimeout: 10 * time.Second}
		if r.IntN(2) == 0 {
			cfg.assignors = []assign.Assignor{assign.RangeServer{}, assign.Uniform{}}
		}
		h := newCGHarness(t, cfg, im)
		c := newClientModel(h)
		ids := []string{"m0", "m1", "m2", "m3", "m4"}
		static := map[string]string{}
		for _, id := range ids[:2] {
			if r.IntN(2) == 0 {
				static[id] = "i-" + id
			}
		}
		now := time.Duration(0)
		for step := range 300 {
			now += time.Duration(r.IntN(2000)) * time.Millisecond
			h.at(now)
			for id := range c.epoch {
				if h.g.members[id] == nil { // fenced by a timer: the client learns it on its next heartbeat
					delete(c.epoch, id)
					delete(c.held, id)
				}
			}
			id := ids[r.IntN(len(ids))]
			_, joined := c.epoch[id]
			switch op := r.IntN(20); {
			case !joined:
				ev := cgJoin(id, []string{"a", "b"}[:1+r.IntN(2)]...)
				ev.instanceID = static[id]
				resp, err := h.hb(ev)
				if err != nil {
					require.ErrorIs(t, err, ErrUnreleasedInstanceID, "run %d step %d", run, step)
					continue
				}
				c.answer(id, resp)
			case op == 0:
				ev := cgBeat(id, -1, "-")
				ev.instanceID = static[id]
				_, err := h.hb(ev)
				require.NoError(t, err, "run %d step %d", run, step)
				delete(c.epoch, id)
				delete(c.held, id)
			case op == 1 && static[id] != "":
				ev := cgBeat(id, -2, "-")
				ev.instanceID = static[id]
				_, err := h.hb(ev)
				require.NoError(t, err)
				delete(c.epoch, id)
				delete(c.held, id) // it stops consuming
			case op == 2:
				im.set([]string{"a", "b"}[r.IntN(2)], 1+r.IntN(8))
			case op < 5:
				// silent this time
			default:
				ev := cgBeat(id, c.epoch[id], partsString2(c.held[id]))
				ev.instanceID = static[id]
				resp, err := h.hb(ev)
				if err != nil {
					// Only a member that missed its session may fail.
					require.ErrorIs(t, err, ErrUnknownMember, "run %d step %d", run, step)
					delete(c.epoch, id)
					delete(c.held, id)
					continue
				}
				c.answer(id, resp)
			}
		}
		// Everyone left heartbeats until the group is stable: the
		// reconciliation always completes.
		for range 30 {
			for _, id := range slices.Sorted(maps.Keys(c.epoch)) {
				ev := cgBeat(id, c.epoch[id], partsString2(c.held[id]))
				ev.instanceID = static[id]
				resp, err := h.hb(ev)
				require.NoError(t, err)
				c.answer(id, resp)
			}
		}
		if len(c.epoch) > 0 && len(c.epoch) == len(h.g.members) {
			require.Equal(t, "Stable", h.g.state(), "run %d", run)
		}
	}
}

// testSeed is STRATA_SEED if set, else a random seed; it is logged.
func testSeed(t *testing.T) uint64 {
	seed := rand.Uint64()
	if s := os.Getenv("STRATA_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	t.Logf("seed %d (STRATA_SEED=%d to replay)", seed, seed)
	return seed
}

// TestConsumerRestart: a group read back from its records after a restart
// is the same group, with new sessions (and the rebalance timer of a
// member revoking); its members carry on where they were.
func TestConsumerRestart(t *testing.T) {
	h := newCGHarness(t, consumerConfig{}, newImage(map[string]int{"t": 4}))
	c := newClientModel(h)
	c.join("a", "t")
	c.settle()
	c.join("b", "t")
	require.NoError(t, c.beat("a")) // a is told to revoke half
	require.Equal(t, memberUnrevoked, h.g.members["a"].state)

	h.at(2 * time.Second) // a restart before a's rebalance timeout
	g := newConsumerGroup("g", h.cfg)
	for _, r := range h.records {
		g.apply(r)
	}
	require.Equal(t, snapshotCG(h.g), snapshotCG(g))
	effs := g.restarted(h.now, nil)
	require.ElementsMatch(t, []cgEffect{
		{kind: cgArm, member: "a", at: h.now.Add(45 * time.Second)},
		{kind: cgArm, member: "a", revoke: true, at: h.now.Add(5 * time.Second)},
		{kind: cgArm, member: "b", at: h.now.Add(45 * time.Second)},
	}, effs)

	// The restored group carries on: a revokes, b gets the rest.
	h.g, h.timers = g, map[cgTimer]time.Time{}
	for _, e := range effs {
		h.timers[cgTimer{member: e.member, revoke: e.revoke}] = e.at
	}
	c.settle()
	require.Equal(t, 2, c.held["a"].Count())
	require.Equal(t, 2, c.held["b"].Count())
}
