package assign

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/tp"
)

// tps parses "t0/0 t0/1 t1/2" into partitions.
func tps(s string) []tp.TopicPartition {
	out := []tp.TopicPartition{}
	for _, f := range strings.Fields(s) {
		var p tp.TopicPartition
		i := strings.LastIndexByte(f, '/')
		p.Topic = f[:i]
		fmt.Sscan(f[i+1:], &p.Partition)
		out = append(out, p)
	}
	return out
}

func TestRange(t *testing.T) {
	cases := []struct {
		name       string
		subs       map[string][]string
		partitions map[string]int
		want       map[string]string
	}{{
		name:       "two members, one topic of three partitions",
		subs:       map[string][]string{"C0": {"t0"}, "C1": {"t0"}},
		partitions: map[string]int{"t0": 3},
		want:       map[string]string{"C0": "t0/0 t0/1", "C1": "t0/2"},
	}, {
		// The example of Kafka's RangeAssignor javadoc: the first member gets
		// the extra partition of every topic.
		name:       "two members, two topics of three partitions",
		subs:       map[string][]string{"C0": {"t0", "t1"}, "C1": {"t0", "t1"}},
		partitions: map[string]int{"t0": 3, "t1": 3},
		want:       map[string]string{"C0": "t0/0 t0/1 t1/0 t1/1", "C1": "t0/2 t1/2"},
	}, {
		name:       "members sorted by id, not by insertion or name length",
		subs:       map[string][]string{"b": {"t"}, "a-2": {"t"}, "a-10": {"t"}},
		partitions: map[string]int{"t": 4},
		want:       map[string]string{"a-10": "t/0 t/1", "a-2": "t/2", "b": "t/3"},
	}, {
		name:       "ten partitions, three members: 4, 3, 3",
		subs:       map[string][]string{"m1": {"t"}, "m2": {"t"}, "m3": {"t"}},
		partitions: map[string]int{"t": 10},
		want:       map[string]string{"m1": "t/0 t/1 t/2 t/3", "m2": "t/4 t/5 t/6", "m3": "t/7 t/8 t/9"},
	}, {
		name:       "even split",
		subs:       map[string][]string{"m1": {"t"}, "m2": {"t"}},
		partitions: map[string]int{"t": 4},
		want:       map[string]string{"m1": "t/0 t/1", "m2": "t/2 t/3"},
	}, {
		name:       "more members than partitions",
		subs:       map[string][]string{"m1": {"t"}, "m2": {"t"}, "m3": {"t"}},
		partitions: map[string]int{"t": 2},
		want:       map[string]string{"m1": "t/0", "m2": "t/1", "m3": ""},
	}, {
		name: "different subscriptions: each topic split among its own subscribers",
		subs: map[string][]string{
			"C0": {"t0"},
			"C1": {"t0", "t1", "t2"},
			"C2": {"t1", "t2"},
		},
		partitions: map[string]int{"t0": 3, "t1": 2, "t2": 3},
		want: map[string]string{
			"C0": "t0/0 t0/1",
			"C1": "t0/2 t1/0 t2/0 t2/1",
			"C2": "t1/1 t2/2",
		},
	}, {
		name:       "unknown topic and topic without partitions assign nothing",
		subs:       map[string][]string{"m1": {"t", "nope", "empty"}, "m2": {"t"}},
		partitions: map[string]int{"t": 1, "empty": 0},
		want:       map[string]string{"m1": "t/0", "m2": ""},
	}, {
		name:       "a member subscribed to nothing",
		subs:       map[string][]string{"m1": nil, "m2": {"t"}},
		partitions: map[string]int{"t": 2},
		want:       map[string]string{"m1": "", "m2": "t/0 t/1"},
	}, {
		name:       "a topic listed twice counts once",
		subs:       map[string][]string{"m1": {"t", "t"}, "m2": {"t"}},
		partitions: map[string]int{"t": 2},
		want:       map[string]string{"m1": "t/0", "m2": "t/1"},
	}, {
		name:       "no members",
		subs:       map[string][]string{},
		partitions: map[string]int{"t": 2},
		want:       map[string]string{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := make(map[string][]tp.TopicPartition)
			for id, s := range tc.want {
				want[id] = tps(s)
			}
			require.Equal(t, want, Range(tc.subs, tc.partitions))
		})
	}
}

// TestRangeRandom checks, on random groups, what any range assignment
// must satisfy: every partition of a subscribed, known topic goes to exactly
// one of its subscribers; per topic, the members' shares differ by at most
// one and are contiguous, in member id order.
func TestRangeRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for range 500 {
		topics := []string{"a", "b", "c", "d"}
		partitions := map[string]int{}
		for _, topic := range topics {
			if r.IntN(5) > 0 {
				partitions[topic] = r.IntN(12)
			}
		}
		subs := map[string][]string{}
		for i := range r.IntN(6) {
			var s []string
			for _, topic := range topics {
				if r.IntN(2) == 0 {
					s = append(s, topic)
				}
			}
			subs[fmt.Sprintf("m%02d", r.IntN(100)*10+i)] = s
		}
		got := Range(subs, partitions)
		require.ElementsMatch(t, slices.Collect(maps.Keys(subs)), slices.Collect(maps.Keys(got)))
		owner := map[tp.TopicPartition]string{}
		for id, as := range got {
			require.True(t, slices.IsSortedFunc(as, tp.Compare))
			for _, p := range as {
				require.Contains(t, subs[id], p.Topic)
				require.Empty(t, owner[p], "%v assigned twice", p)
				owner[p] = id
			}
		}
		for _, topic := range topics {
			var members []string
			for id, s := range subs {
				if slices.Contains(s, topic) {
					members = append(members, id)
				}
			}
			slices.Sort(members)
			n := partitions[topic]
			if len(members) == 0 {
				n = 0
			}
			next := 0 // partitions go to members in id order, contiguously
			for i, id := range members {
				var share []int
				for _, p := range got[id] {
					if p.Topic == topic {
						share = append(share, p.Partition)
					}
				}
				wantLen := n / len(members)
				if i < n%len(members) {
					wantLen++
				}
				require.Len(t, share, wantLen)
				for _, p := range share {
					require.Equal(t, next, p)
					next++
				}
			}
			require.Equal(t, n, next, "topic %s", topic)
		}
	}
}
