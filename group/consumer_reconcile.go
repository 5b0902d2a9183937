package group

import (
	"maps"
	"slices"

	"github.com/strata-log/strata/group/assign"
)

// The reconciliation of one member of a consumer-protocol group (Kafka's
// CurrentAssignmentBuilder): from the member's current assignment towards
// the group's target assignment for it, revoking before assigning. A
// partition the target takes from a member is first "pending revocation":
// the member keeps its epoch until it reports (in the owned partitions of
// a heartbeat) that it no longer holds it. A partition the target gives a
// member is assigned only once no member holds it (or is revoking it);
// until then it is "unreleased".

// memberState is Kafka's MemberState, with its byte values (stored in
// ConsumerGroupCurrentMemberAssignmentValue).
type memberState int8

const (
	memberStable     memberState = 0 // reconciled to its epoch's target
	memberUnrevoked  memberState = 1 // waiting for the member to revoke partitions
	memberUnreleased memberState = 2 // waiting for other members to release partitions
	memberUnknown    memberState = 127
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "STABLE"
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// currentAssignment is a member's reconciliation state.
type currentAssignment struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         assign.Partitions // what the member may hold
	revoking         assign.Partitions // what it must give up
}

func (c currentAssignment) equal(d currentAssignment) bool {
	return c.epoch == d.epoch && c.prevEpoch == d.prevEpoch && c.state == d.state &&
		c.assigned.Equal(d.assigned) && c.revoking.Equal(d.revoking)
}

// withEpoch is Kafka's updateMemberEpoch: the new epoch, the current one
// becoming the previous.
func (c currentAssignment) withEpoch(e int32) currentAssignment {
	c.prevEpoch, c.epoch = c.epoch, e
	return c
}

// reconciledTo reports whether nothing is left to do at target epoch e.
func (c currentAssignment) reconciledTo(e int32) bool {
	return c.state == memberStable && c.epoch == e
}

// reconcile returns the member's next state towards target at
// targetEpoch. owned is what the member reports holding (nil: it did not
// say); held reports whether some member holds a partition (assigned or
// revoking), this one included.
func reconcile(c currentAssignment, targetEpoch int32, target, owned assign.Partitions, held func(topic string, p int) bool) (currentAssignment, error) {
	switch c.state {
	case memberStable:
		if c.epoch == targetEpoch {
			return c, nil
		}
		return nextAssignment(c, c.epoch, targetEpoch, target, owned, held), nil
	case memberUnrevoked:
		if ownsAny(owned, c.revoking) {
			return c, nil
		}
		return nextAssignment(c, c.epoch+1, targetEpoch, target, owned, held), nil
	case memberUnreleased:
		return nextAssignment(c, c.epoch, targetEpoch, target, owned, held), nil
	}
	if owned == nil || owned.Count() > 0 {
		return c, errUnknownMemberState
	}
	return nextAssignment(c, targetEpoch, targetEpoch, target, owned, held), nil
}

// ownsAny reports whether the member may still hold any of ps: it does
// unless it reported its partitions (owned not nil) without them.
func ownsAny(owned, ps assign.Partitions) bool {
	if owned == nil {
		return true
	}
	for t, os := range owned {
		for _, p := range os {
			if slices.Contains(ps[t], p) {
				return true
			}
		}
	}
	return false
}

func nextAssignment(c currentAssignment, memberEpoch, targetEpoch int32, target, owned assign.Partitions, held func(string, int) bool) currentAssignment {
	assigned, revoking, pending := assign.Partitions{}, assign.Partitions{}, assign.Partitions{}
	unreleased := false
	topics := map[string]bool{}
	for t := range target {
		topics[t] = true
	}
	for t := range c.assigned {
		topics[t] = true
	}
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		cur, tgt := c.assigned[t], target[t]
		for _, p := range cur {
			if slices.Contains(tgt, p) {
				assigned[t] = append(assigned[t], p)
			} else {
				revoking[t] = append(revoking[t], p)
			}
		}
		for _, p := range tgt {
			switch {
			case slices.Contains(cur, p):
			case held(t, p):
				unreleased = true
			default:
				pending[t] = append(pending[t], p)
			}
		}
	}
	switch {
	case len(revoking) > 0 && ownsAny(owned, revoking):
		n := c.withEpoch(memberEpoch)
		n.state, n.assigned, n.revoking = memberUnrevoked, assigned, revoking
		return n
	case len(pending) > 0:
		for t, ps := range pending {
			assigned[t] = append(assigned[t], ps...)
			slices.Sort(assigned[t])
		}
	}
	n := c.withEpoch(targetEpoch)
	n.state, n.assigned, n.revoking = memberStable, assigned, assign.Partitions{}
	if unreleased {
		n.state = memberUnreleased
	}
	return n
}
