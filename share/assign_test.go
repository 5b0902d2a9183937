package share

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestAssignSimple(t *testing.T) {
	parts := map[string]int{"a": 3, "b": 1, "c": 6}
	cases := []struct {
		name string
		subs map[string][]string
		want string
	}{
		{"one member takes all", map[string][]string{"m1": {"a", "b"}}, "m1: a0 a1 a2 b0"},
		{"fewer members than partitions: each partition once",
			map[string][]string{"m1": {"c"}, "m2": {"c"}, "m3": {"c"}, "m4": {"c"}},
			"m1: c0 c4; m2: c1 c5; m3: c2; m4: c3"},
		{"more members than partitions: shared",
			map[string][]string{"m1": {"a"}, "m2": {"a"}, "m3": {"a"}, "m4": {"a"}, "m5": {"a"}},
			"m1: a0; m2: a1; m3: a2; m4: a0; m5: a1"},
		{"heterogeneous", map[string][]string{"m1": {"a", "b"}, "m2": {"b"}, "m3": {"a"}},
			"m1: a0 a2 b0; m2: b0; m3: a1"},
		{"unknown topic and no subscription", map[string][]string{"m1": {"x"}, "m2": nil}, "m1:; m2:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := assignSimple(tc.subs, func(t string) int { return parts[t] })
			var b []string
			for _, m := range slices.Sorted(maps.Keys(got)) {
				s := m + ":"
				for _, tp := range slices.Sorted(maps.Keys(got[m])) {
					for _, p := range got[m][tp] {
						s += fmt.Sprintf(" %s%d", tp, p)
					}
				}
				b = append(b, s)
			}
			if s := strings.Join(b, "; "); s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
		})
	}
}
