package assign

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// parts parses "t1:0,1 t3:4" into Partitions.
func parts(s string) Partitions {
	out := Partitions{}
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

type testMember struct {
	id, instance, rack string
	topics             []string
	current            string // parts syntax
}

func spec(topics map[string]int, members ...testMember) Spec {
	s := Spec{Topics: map[string]Topic{}}
	for t, n := range topics {
		s.Topics[t] = Topic{Partitions: n}
	}
	for _, m := range members {
		s.Members = append(s.Members, Member{ID: m.id, InstanceID: m.instance, Rack: m.rack, Topics: m.topics, Current: parts(m.current)})
	}
	return s
}

// checkValidityAndBalance is Kafka's check of a uniform assignment: every
// partition of a subscribed topic is assigned exactly once, to a
// subscriber, and no partition could move from its member to a subscriber
// of its topic holding two fewer partitions.
func checkValidityAndBalance(t *testing.T, s Spec, got map[string]Partitions) {
	t.Helper()
	require.Len(t, got, len(s.Members))
	owner := map[string]string{}
	subs := map[string][]string{}
	for _, m := range s.Members {
		subs[m.ID] = subscribed(m, s.Topics)
		for topic, ps := range got[m.ID] {
			require.Contains(t, subs[m.ID], topic, "member %s given %s", m.ID, topic)
			require.True(t, slices.IsSorted(ps))
			for _, p := range ps {
				k := fmt.Sprintf("%s/%d", topic, p)
				require.Empty(t, owner[k], "%s assigned twice", k)
				require.Less(t, p, s.Topics[topic].Partitions)
				owner[k] = m.ID
			}
		}
	}
	for topic, tm := range s.Topics {
		subscribedBy := 0
		for _, ts := range subs {
			if slices.Contains(ts, topic) {
				subscribedBy++
			}
		}
		for p := range tm.Partitions {
			if subscribedBy > 0 {
				require.NotEmpty(t, owner[fmt.Sprintf("%s/%d", topic, p)], "%s/%d unassigned", topic, p)
			}
		}
	}
	for _, a := range s.Members {
		for topic := range got[a.ID] {
			for _, b := range s.Members {
				if slices.Contains(subs[b.ID], topic) {
					require.LessOrEqual(t, got[a.ID].Count()-got[b.ID].Count(), 1,
						"%s could move from %s (%d) to %s (%d)", topic, a.ID, got[a.ID].Count(), b.ID, got[b.ID].Count())
				}
			}
		}
	}
}

// moved counts the partitions of the members' current assignments that
// are not theirs in got.
func moved(s Spec, got map[string]Partitions) int {
	n := 0
	for _, m := range s.Members {
		for t, ps := range m.Current {
			for _, p := range ps {
				if !slices.Contains(got[m.ID][t], p) {
					n++
				}
			}
		}
	}
	return n
}

func counts(a map[string]Partitions) []int {
	var out []int
	for _, p := range a {
		out = append(out, p.Count())
	}
	slices.Sort(out)
	return out
}

// Cases of Kafka's OptimizedUniformAssignmentBuilderTest (homogeneous) and
// UniformHeterogeneousAssignmentBuilderTest. Kafka's exact answers there
// depend on the iteration order of Java hash sets of random topic ids, so
// the table holds them as kafka, and the test asserts what they stand for:
// Kafka's validity and balance check, the same number of partitions per
// member, and no more partitions moved than Kafka's answer moves.
func TestUniformKafkaCases(t *testing.T) {
	cases := []struct {
		name    string
		topics  map[string]int
		members []testMember
		kafka   map[string]string
	}{{
		name:    "homogeneous: one member, no topic subscription",
		topics:  map[string]int{"t1": 3},
		members: []testMember{{id: "A"}},
		kafka:   map[string]string{"A": ""},
	}, {
		name:    "homogeneous: one member subscribed to a nonexistent topic",
		topics:  map[string]int{"t1": 3},
		members: []testMember{{id: "A", topics: []string{"t2"}}},
		kafka:   map[string]string{"A": ""},
	}, {
		name:    "homogeneous: first assignment, two members, two topics",
		topics:  map[string]int{"t1": 3, "t3": 2},
		members: []testMember{{id: "A", topics: []string{"t1", "t3"}}, {id: "B", topics: []string{"t1", "t3"}}},
		kafka:   map[string]string{"A": "t1:0 t3:0,1", "B": "t1:1,2"},
	}, {
		name:    "homogeneous: more members than partitions",
		topics:  map[string]int{"t3": 2},
		members: []testMember{{id: "A", topics: []string{"t3"}}, {id: "B", topics: []string{"t3"}}, {id: "C", topics: []string{"t3"}}},
		kafka:   map[string]string{"A": "t3:0", "B": "t3:1", "C": ""},
	}, {
		name:   "homogeneous: reassignment of an unbalanced previous assignment",
		topics: map[string]int{"t1": 3, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0,1 t2:0,1"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:2 t2:2"}},
		kafka: map[string]string{"A": "t1:0,1 t2:0", "B": "t1:2 t2:1,2"},
	}, {
		name:   "homogeneous: partitions added",
		topics: map[string]int{"t1": 6, "t2": 5},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0,2 t2:0"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:1,2"}},
		kafka: map[string]string{"A": "t1:0,2,3 t2:0,3,4", "B": "t1:1,4,5 t2:1,2"},
	}, {
		name:   "homogeneous: one member added",
		topics: map[string]int{"t1": 3, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0,2 t2:0"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:1,2"},
			{id: "C", topics: []string{"t1", "t2"}}},
		kafka: map[string]string{"A": "t1:0,2", "B": "t1:1 t2:1", "C": "t2:0,2"},
	}, {
		name:   "homogeneous: one member removed",
		topics: map[string]int{"t1": 3, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0 t2:0"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:1"}},
		kafka: map[string]string{"A": "t1:0 t2:0,2", "B": "t1:1,2 t2:1"},
	}, {
		name:   "homogeneous: one subscription removed",
		topics: map[string]int{"t1": 2, "t2": 2},
		members: []testMember{
			{id: "A", topics: []string{"t2"}, current: "t1:0 t2:0"},
			{id: "B", topics: []string{"t2"}, current: "t1:1 t2:1"}},
		kafka: map[string]string{"A": "t2:0", "B": "t2:1"},
	}, {
		name:    "heterogeneous: two members, no topic subscription",
		topics:  map[string]int{"t1": 3},
		members: []testMember{{id: "A"}, {id: "B", topics: []string{}}},
		kafka:   map[string]string{"A": "", "B": ""},
	}, {
		name:    "heterogeneous: first assignment, two members, two topics",
		topics:  map[string]int{"t1": 3, "t3": 6},
		members: []testMember{{id: "A", topics: []string{"t1", "t3"}}, {id: "B", topics: []string{"t3"}}},
		kafka:   map[string]string{"A": "t1:0,1,2 t3:4", "B": "t3:0,1,2,3,5"},
	}, {
		name:   "heterogeneous: more members than partitions",
		topics: map[string]int{"t3": 1, "t1": 2},
		members: []testMember{
			{id: "A", topics: []string{"t3"}}, {id: "B", topics: []string{"t3"}}, {id: "C", topics: []string{"t1"}}},
		kafka: map[string]string{"A": "t3:0", "B": "", "C": "t1:0,1"},
	}, {
		name:   "heterogeneous: unbalanced previous assignment, three topics",
		topics: map[string]int{"t1": 6, "t2": 4, "t3": 4},
		members: []testMember{
			{id: "A", topics: []string{"t1"}, current: "t1:0,1,2"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:3 t2:0"},
			{id: "C", topics: []string{"t1", "t2", "t3"}, current: "t1:4,5 t2:1,2,3 t3:0,1,2,3"}},
		kafka: map[string]string{"A": "t1:0,1,2,5", "B": "t1:3 t2:0,1,2,3", "C": "t1:4 t3:0,1,2,3"},
	}, {
		name:   "heterogeneous: partitions added",
		topics: map[string]int{"t1": 6, "t2": 5, "t3": 3, "t4": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t3"}, current: "t1:0,1,2,3 t3:0,1"},
			{id: "B", topics: []string{"t1", "t2", "t3", "t4"}, current: "t2:0,1,2 t4:0,1,2"}},
		kafka: map[string]string{"A": "t1:0,1,2,3,4,5 t3:0,1,2", "B": "t2:0,1,2,3,4 t4:0,1,2"},
	}, {
		name:   "heterogeneous: one member and partitions added",
		topics: map[string]int{"t1": 6, "t2": 7},
		members: []testMember{
			{id: "A", topics: []string{"t1"}, current: "t1:0,2 t2:0"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:1,2"},
			{id: "C", topics: []string{"t1", "t2"}}},
		kafka: map[string]string{"A": "t1:0,2,3,4,5", "B": "t1:1 t2:1,2,6", "C": "t2:0,3,4,5"},
	}, {
		name:   "heterogeneous: one member removed, three topics",
		topics: map[string]int{"t1": 3, "t2": 8, "t3": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t3"}, current: "t1:0,1,2 t3:0,1"},
			{id: "B", topics: []string{"t2"}, current: "t2:3,4,5,6"}},
		kafka: map[string]string{"A": "t1:0,1,2 t3:0,1,2", "B": "t2:0,1,2,3,4,5,6,7"},
	}, {
		name:   "heterogeneous: one subscription removed",
		topics: map[string]int{"t1": 3, "t2": 5},
		members: []testMember{
			{id: "A", topics: []string{"t1"}, current: "t1:0,2 t2:1,3"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:0,2,4"}},
		kafka: map[string]string{"A": "t1:0,1,2", "B": "t2:0,1,2,3,4"},
	}, {
		name:   "heterogeneous: a topic's partitions run out before its subscribers are balanced",
		topics: map[string]int{"t1": 2, "t2": 2, "t3": 2},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2", "t3"}, current: "t1:0,1 t2:0,1 t3:0,1"},
			{id: "B", topics: []string{"t1", "t2", "t3"}}},
		kafka: map[string]string{"A": "t2:0 t3:0,1", "B": "t1:0,1 t2:1"},
	}, {
		name:    "heterogeneous: one of two members without subscriptions",
		topics:  map[string]int{"t1": 3},
		members: []testMember{{id: "A", topics: []string{"t1"}}, {id: "B", topics: []string{}}},
		kafka:   map[string]string{"A": "t1:0,1,2", "B": ""},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(tc.topics, tc.members...)
			got := Uniform{}.Assign(s)
			checkValidityAndBalance(t, s, got)
			kafka := map[string]Partitions{}
			for id, p := range tc.kafka {
				kafka[id] = parts(p)
			}
			require.Equal(t, counts(kafka), counts(got), "partitions per member")
			require.LessOrEqual(t, moved(s, got), moved(s, kafka), "partitions moved: %v", got)
			require.Equal(t, got, Uniform{}.Assign(s), "deterministic")
		})
	}
}

// TestUniformSticky: a member joining a balanced group of three takes only
// its share, from the others' surplus; nothing else moves.
func TestUniformSticky(t *testing.T) {
	topics := map[string]int{"a": 6, "b": 6}
	all := []string{"a", "b"}
	s := spec(topics, testMember{id: "m1", topics: all}, testMember{id: "m2", topics: all}, testMember{id: "m3", topics: all})
	first := Uniform{}.Assign(s)
	checkValidityAndBalance(t, s, first)
	require.Equal(t, []int{4, 4, 4}, counts(first))
	for i := range s.Members {
		s.Members[i].Current = first[s.Members[i].ID]
	}
	s.Members = append(s.Members, Member{ID: "m4", Topics: all})
	second := Uniform{}.Assign(s)
	checkValidityAndBalance(t, s, second)
	require.Equal(t, []int{3, 3, 3, 3}, counts(second))
	require.Equal(t, 3, moved(s, second), "only m4's share moves")
}

// TestUniformRacks: with racks, the free partitions go to a member in one
// of their replicas' racks while the balance allows.
func TestUniformRacks(t *testing.T) {
	s := Spec{Topics: map[string]Topic{"t": {Partitions: 4, Racks: [][]string{{"r2"}, {"r1"}, {"r2"}, {"r1"}}}}}
	s.Members = []Member{{ID: "A", Rack: "r1", Topics: []string{"t"}}, {ID: "B", Rack: "r2", Topics: []string{"t"}}}
	got := Uniform{}.Assign(s)
	require.Equal(t, map[string]Partitions{"A": {"t": {1, 3}}, "B": {"t": {0, 2}}}, got)

	// Heterogeneous: rack decides between equally loaded members.
	s.Topics["u"] = Topic{Partitions: 1}
	s.Members[0].Topics = []string{"t", "u"}
	got = Uniform{}.Assign(s)
	checkValidityAndBalance(t, s, got)
	require.Equal(t, []int{2, 3}, counts(got))
}

// TestUniformRandom checks Kafka's validity and balance on random groups,
// each assigned twice: from scratch and then from a random previous
// assignment. STRATA_SEED is not needed: the seed is logged.
func TestUniformRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for range 300 {
		topics := map[string]int{}
		names := []string{"a", "b", "c", "d", "e"}
		for _, n := range names {
			if r.IntN(5) > 0 {
				topics[n] = r.IntN(10)
			}
		}
		var members []testMember
		homogeneous := r.IntN(2) == 0
		var common []string
		for _, n := range names {
			if r.IntN(2) == 0 {
				common = append(common, n)
			}
		}
		for i := range 1 + r.IntN(6) {
			m := testMember{id: fmt.Sprintf("m%d", i), topics: common}
			if !homogeneous {
				m.topics = nil
				for _, n := range names {
					if r.IntN(2) == 0 {
						m.topics = append(m.topics, n)
					}
				}
			}
			members = append(members, m)
		}
		s := spec(topics, members...)
		got := Uniform{}.Assign(s)
		checkValidityAndBalance(t, s, got)
		// A random previous assignment, possibly overlapping and stale.
		for i := range s.Members {
			cur := Partitions{}
			for _, n := range names {
				for p := range 10 {
					if r.IntN(4) == 0 {
						cur[n] = append(cur[n], p)
					}
				}
			}
			s.Members[i].Current = cur
		}
		got = Uniform{}.Assign(s)
		checkValidityAndBalance(t, s, got)
		if homogeneous {
			c := counts(got)
			require.LessOrEqual(t, c[len(c)-1]-c[0], 1)
		}
		require.ElementsMatch(t, slices.Collect(maps.Keys(got)), func() []string {
			var ids []string
			for _, m := range s.Members {
				ids = append(ids, m.ID)
			}
			return ids
		}())
	}
}

// Cases of Kafka's RangeAssignorTest (server side): exact, since the range
// assignment depends only on the sorted members and the topics.
func TestRangeServerKafkaCases(t *testing.T) {
	cases := []struct {
		name    string
		topics  map[string]int
		members []testMember
		want    map[string]string
	}{{
		name:    "one member, no topic",
		topics:  map[string]int{"t1": 3},
		members: []testMember{{id: "A"}},
		want:    map[string]string{"A": ""},
	}, {
		name:    "one member subscribed to a nonexistent topic",
		topics:  map[string]int{"t1": 3},
		members: []testMember{{id: "A", topics: []string{"t2"}}},
		want:    map[string]string{"A": ""},
	}, {
		name:    "first assignment, two members, two topics, same subscriptions",
		topics:  map[string]int{"t1": 3, "t3": 2},
		members: []testMember{{id: "A", topics: []string{"t1", "t3"}}, {id: "B", topics: []string{"t1", "t3"}}},
		want:    map[string]string{"A": "t1:0,1 t3:0", "B": "t1:2 t3:1"},
	}, {
		name:   "first assignment, three members, three topics, different subscriptions",
		topics: map[string]int{"t1": 3, "t2": 3, "t3": 2},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}}, {id: "B", topics: []string{"t3"}}, {id: "C", topics: []string{"t2", "t3"}}},
		want: map[string]string{"A": "t1:0,1,2 t2:0,1", "B": "t3:0", "C": "t2:2 t3:1"},
	}, {
		name:   "first assignment, more members than partitions",
		topics: map[string]int{"t1": 3, "t3": 2},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t3"}}, {id: "B", topics: []string{"t1", "t3"}}, {id: "C", topics: []string{"t1", "t3"}}},
		want: map[string]string{"A": "t1:0 t3:0", "B": "t1:1 t3:1", "C": "t1:2"},
	}, {
		name:   "reassignment, more members than partitions, one member added",
		topics: map[string]int{"t1": 2, "t2": 2},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0 t2:0"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:1"},
			{id: "C", topics: []string{"t1", "t2"}}},
		want: map[string]string{"A": "t1:0 t2:0", "B": "t1:1 t2:1", "C": ""},
	}, {
		name:   "reassignment, one partition added, two members, two topics",
		topics: map[string]int{"t1": 4, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0,1 t2:0,1"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:2 t2:2"}},
		want: map[string]string{"A": "t1:0,1 t2:0,1", "B": "t1:2,3 t2:2"},
	}, {
		name:   "reassignment, one member added, two topics",
		topics: map[string]int{"t1": 3, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0,1 t2:0,1"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:2 t2:2"},
			{id: "C", topics: []string{"t1", "t2"}}},
		want: map[string]string{"A": "t1:0 t2:0", "B": "t1:1 t2:1", "C": "t1:2 t2:2"},
	}, {
		name:   "reassignment, one member removed",
		topics: map[string]int{"t1": 3, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t1", "t2"}, current: "t1:0 t2:0"},
			{id: "B", topics: []string{"t1", "t2"}, current: "t1:1 t2:1"}},
		want: map[string]string{"A": "t1:0,1 t2:0,1", "B": "t1:2 t2:2"},
	}, {
		name:   "reassignment, subscriptions removed, three members",
		topics: map[string]int{"t1": 3, "t2": 3},
		members: []testMember{
			{id: "A", topics: []string{"t2"}, current: "t1:0 t2:0"},
			{id: "B", topics: []string{"t2"}, current: "t1:1 t2:1"},
			{id: "C", topics: []string{"t2"}, current: "t1:2 t2:2"}},
		want: map[string]string{"A": "t2:0", "B": "t2:1", "C": "t2:2"},
	}, {
		name:   "static members sort first, by instance id",
		topics: map[string]int{"t1": 5},
		members: []testMember{
			{id: "A", instance: "instanceC", topics: []string{"t1"}},
			{id: "B", topics: []string{"t1"}},
			{id: "C", instance: "instanceA", topics: []string{"t1"}}},
		want: map[string]string{"C": "t1:0,1", "A": "t1:2,3", "B": "t1:4"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]Partitions{}
			for id, p := range tc.want {
				want[id] = parts(p)
			}
			require.Equal(t, want, RangeServer{}.Assign(spec(tc.topics, tc.members...)))
		})
	}
}

// TestRangeServerStaticMembership is Kafka's testStaticMembership and
// testMixedStaticMembership: a static member that comes back under a new
// member id gets the same partitions, and so do the others.
func TestRangeServerStaticMembership(t *testing.T) {
	topics := map[string]int{"t1": 5}
	before := RangeServer{}.Assign(spec(topics,
		testMember{id: "A", instance: "iA", topics: []string{"t1"}},
		testMember{id: "B", topics: []string{"t1"}},
		testMember{id: "C", instance: "iC", topics: []string{"t1"}}))
	after := RangeServer{}.Assign(spec(topics,
		testMember{id: "A1", instance: "iA", topics: []string{"t1"}},
		testMember{id: "B", topics: []string{"t1"}},
		testMember{id: "C", instance: "iC", topics: []string{"t1"}}))
	require.Equal(t, before["A"], after["A1"])
	require.Equal(t, before["B"], after["B"])
	require.Equal(t, before["C"], after["C"])
}

func TestServerAssignor(t *testing.T) {
	a, ok := ServerAssignor("uniform")
	require.True(t, ok)
	require.Equal(t, "uniform", a.Name())
	require.Equal(t, "uniform", ServerAssignors()[0].Name(), "the default")
	a, ok = ServerAssignor("range")
	require.True(t, ok)
	require.Equal(t, "range", a.Name())
	_, ok = ServerAssignor("sticky")
	require.False(t, ok)
}
