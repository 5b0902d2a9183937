package share

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// The membership cases, after the share group cases of Kafka's
// GroupMetadataManagerTest, in virtual time.

func fmtAssignment(a Assignment) string {
	if a == nil {
		return "-"
	}
	var b []string
	for _, t := range slices.Sorted(maps.Keys(a)) {
		for _, p := range a[t] {
			b = append(b, fmt.Sprintf("%s%d", t, p))
		}
	}
	return "[" + strings.Join(b, " ") + "]"
}

func TestGroupHeartbeatCases(t *testing.T) {
	lim := membership{sessionTimeout: 45 * time.Second, maxSize: 3}
	type hb struct {
		after  time.Duration
		member string
		epoch  int32
		topics string // "-": nil (unchanged)
		parts  map[string]int
		want   string // "epoch assignment"
		err    error
		expire string // instead of a heartbeat: expire this member
	}
	two := map[string]int{"foo": 2}
	cases := []struct {
		name  string
		steps []hb
	}{
		{"testShareGroupMemberJoinsEmptyGroupWithAssignments", []hb{
			{member: "m1", epoch: 0, topics: "foo bar", parts: map[string]int{"foo": 2, "bar": 1}, want: "1 [bar0 foo0 foo1]"},
			{member: "m1", epoch: 1, topics: "-", parts: map[string]int{"foo": 2, "bar": 1}, want: "1 -"},
		}},
		{"testShareGroupJoinWithoutTopicsIsInvalid", []hb{
			{member: "m1", epoch: 0, topics: "", parts: two, err: ErrInvalidRequest},
		}},
		{"testShareGroupUnknownMemberIdJoins", []hb{
			{member: "m1", epoch: 4, topics: "foo", parts: two, err: ErrUnknownMember},
			{member: "m1", epoch: -1, topics: "-", parts: two, err: ErrUnknownMember},
		}},
		{"testShareGroupSecondMemberTakesHalf", []hb{
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "1 [foo0 foo1]"},
			{member: "m2", epoch: 0, topics: "foo", parts: two, want: "2 [foo1]"},
			{member: "m1", epoch: 1, topics: "-", parts: two, want: "2 [foo0]"},
			{member: "m1", epoch: 2, topics: "-", parts: two, want: "2 -"},
		}},
		{"testShareGroupFencedMemberEpoch", []hb{
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "1 [foo0 foo1]"},
			{member: "m2", epoch: 0, topics: "foo", parts: two, want: "2 [foo1]"},
			{member: "m1", epoch: 1, topics: "-", parts: two, want: "2 [foo0]"},
			{member: "m1", epoch: 1, topics: "-", parts: two, want: "2 -"}, // its previous epoch passes
			{member: "m1", epoch: 6, topics: "-", parts: two, err: ErrFencedMemberEpoch},
		}},
		{"testShareGroupHeartbeatFullResponse", []hb{
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "1 [foo0 foo1]"},
			{member: "m1", epoch: 1, topics: "foo", parts: two, want: "1 [foo0 foo1]"}, // topics sent: the whole answer
		}},
		{"testShareGroupLeavingMemberBumpsGroupEpoch", []hb{
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "1 [foo0 foo1]"},
			{member: "m2", epoch: 0, topics: "foo", parts: two, want: "2 [foo1]"},
			{member: "m2", epoch: 2, topics: "-", parts: two, want: "2 -"},
			{member: "m2", epoch: -1, topics: "-", parts: two, want: "-1 -"},
			{member: "m1", epoch: 1, topics: "-", parts: two, want: "3 [foo0 foo1]"},
		}},
		{"testShareGroupNewTopicAndPartitions", []hb{
			{member: "m1", epoch: 0, topics: "foo bar", parts: two, want: "1 [foo0 foo1]"},
			{member: "m1", epoch: 1, topics: "-", parts: map[string]int{"foo": 3, "bar": 1}, want: "2 [bar0 foo0 foo1 foo2]"},
		}},
		{"testShareGroupMemberSessionTimeout", []hb{
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "1 [foo0 foo1]"},
			{member: "m2", epoch: 0, topics: "foo", parts: two, want: "2 [foo1]"},
			{after: 44 * time.Second, expire: "m1", want: "false"},
			{after: time.Second, expire: "m1", want: "true"},
			{after: 0, expire: "m2", want: "true"},
			{member: "m1", epoch: 2, topics: "-", parts: two, err: ErrUnknownMember},
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "5 [foo0 foo1]"},
		}},
		{"testShareGroupNewMemberIsRejectedWithMaximumMembersIsReached", []hb{
			{member: "m1", epoch: 0, topics: "foo", parts: two, want: "1 [foo0 foo1]"},
			{member: "m2", epoch: 0, topics: "foo", parts: two, want: "2 [foo1]"},
			{member: "m3", epoch: 0, topics: "foo", parts: two, want: "3 [foo0]"},
			{member: "m4", epoch: 0, topics: "foo", parts: two, err: ErrGroupMaxSizeReached},
			{member: "m3", epoch: 0, topics: "foo", parts: two, want: "3 [foo0]"}, // a member's rejoin passes
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroup("g")
			now := t0
			for i, s := range tc.steps {
				now = now.Add(s.after)
				if s.expire != "" {
					if got := fmt.Sprint(g.expire(now, s.expire)); got != s.want {
						t.Fatalf("step %d: expire %s = %s, want %s", i, s.expire, got, s.want)
					}
					continue
				}
				req := heartbeat{member: s.member, epoch: s.epoch}
				if s.topics != "-" {
					req.topics = strings.Fields(s.topics)
					if req.topics == nil {
						req.topics = []string{}
					}
				}
				ans, err := g.heartbeat(now, lim, req, func(t string) int { return s.parts[t] })
				if !errors.Is(err, s.err) || (err != nil) != (s.err != nil) {
					t.Fatalf("step %d: err %v, want %v", i, err, s.err)
				}
				if err != nil {
					continue
				}
				if got := fmt.Sprintf("%d %s", ans.epoch, fmtAssignment(ans.assignment)); got != s.want {
					t.Fatalf("step %d: %s, want %s", i, got, s.want)
				}
			}
		})
	}
}
