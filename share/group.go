package share

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The membership of one share group (Kafka's ShareGroup and the share
// paths of its GroupMetadataManager), as a value without IO: heartbeat
// and expire take the time and the topics' partition counts and return
// the answer; the driver arms the session timers and releases the records
// of a member that is gone.
//
// The group has an epoch, bumped whenever what the assignment depends on
// changes: a member joins or leaves, a subscription changes, a subscribed
// topic appears or grows. The next heartbeat then computes the target
// assignment of every member (assignSimple) at that epoch. A share group
// revokes nothing — records, not partitions, are what members hold — so a
// member moves to the target at once: its epoch becomes the assignment
// epoch with its next heartbeat, which carries its new partitions.

// Kafka's defaults for share group membership.
const (
	// DefaultSessionTimeout is group.share.session.timeout.ms.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultHeartbeatInterval is group.share.heartbeat.interval.ms.
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultMaxSize is group.share.max.size.
	DefaultMaxSize = 200
)

// Member epochs with a meaning of their own in a heartbeat.
const (
	joinEpoch  = 0
	leaveEpoch = -1
)

type member struct {
	id                   string
	epoch, prevEpoch     int32
	rack                 string
	clientID, clientHost string
	topics               []string // sorted
	assignment           Assignment
	deadline             time.Time // of its session
}

type group struct {
	id              string
	epoch           int32
	assignmentEpoch int32
	members         map[string]*member
	target          map[string]Assignment
	sizes           map[string]int // partition counts of the subscribed topics, as last seen
}

func newGroup(id string) *group {
	return &group{id: id, members: map[string]*member{}, target: map[string]Assignment{}, sizes: map[string]int{}}
}

// heartbeat is a ShareGroupHeartbeat.
type heartbeat struct {
	member     string
	epoch      int32
	rack       *string
	topics     []string // nil: unchanged
	clientID   string
	clientHost string
}

// hbAnswer answers a heartbeat.
type hbAnswer struct {
	epoch      int32
	assignment Assignment // nil: unchanged since the last answer
	left       bool       // the member left: release its records
}

// membership limits.
type membership struct {
	sessionTimeout time.Duration
	maxSize        int
}

// heartbeat steps the group; partitions gives a topic's partition count
// (0: none).
func (g *group) heartbeat(now time.Time, lim membership, hb heartbeat, partitions func(string) int) (hbAnswer, error) {
	m := g.members[hb.member]
	bump := false // one epoch per heartbeat, whatever changed
	switch {
	case hb.epoch == leaveEpoch:
		if m == nil {
			return hbAnswer{}, fmt.Errorf("%w: %q leaves share group %q", ErrUnknownMember, hb.member, g.id)
		}
		g.remove(hb.member)
		return hbAnswer{epoch: leaveEpoch, left: true}, nil
	case hb.epoch == joinEpoch:
		if len(hb.topics) == 0 {
			return hbAnswer{}, fmt.Errorf("%w: a join to share group %q subscribes to no topic", ErrInvalidRequest, g.id)
		}
		if m == nil {
			if len(g.members) >= lim.maxSize {
				return hbAnswer{}, fmt.Errorf("%w: share group %q has %d members", ErrGroupMaxSizeReached, g.id, len(g.members))
			}
			m = &member{id: hb.member}
			g.members[hb.member] = m
			bump = true
		}
	case m == nil:
		return hbAnswer{}, fmt.Errorf("%w: %q in share group %q", ErrUnknownMember, hb.member, g.id)
	case hb.epoch != m.epoch && hb.epoch != m.prevEpoch:
		return hbAnswer{}, fmt.Errorf("%w: heartbeat at epoch %d, member %q of share group %q is at %d", ErrFencedMemberEpoch, hb.epoch, hb.member, g.id, m.epoch)
	}
	m.clientID, m.clientHost = hb.clientID, hb.clientHost
	if hb.rack != nil {
		m.rack = *hb.rack
	}
	m.deadline = now.Add(lim.sessionTimeout)
	if hb.topics != nil {
		topics := slices.Compact(slices.Sorted(slices.Values(hb.topics)))
		if !slices.Equal(topics, m.topics) {
			m.topics = topics
			bump = true
		}
	}
	if sizes := g.subscribedSizes(partitions); !maps.Equal(sizes, g.sizes) {
		g.sizes = sizes
		bump = true
	}
	if bump {
		g.epoch++
	}
	if g.assignmentEpoch != g.epoch {
		subs := make(map[string][]string, len(g.members))
		for id, mm := range g.members {
			subs[id] = mm.topics
		}
		g.target = assignSimple(subs, func(t string) int { return g.sizes[t] })
		g.assignmentEpoch = g.epoch
	}
	var ans hbAnswer
	if m.epoch != g.assignmentEpoch || hb.epoch == joinEpoch || hb.topics != nil {
		if m.epoch != g.assignmentEpoch {
			m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
		}
		m.assignment = g.target[m.id]
		ans.assignment = m.assignment
	}
	ans.epoch = m.epoch
	return ans, nil
}

// subscribedSizes returns the partition counts of the topics the members
// subscribe to that exist.
func (g *group) subscribedSizes(partitions func(string) int) map[string]int {
	sizes := map[string]int{}
	for _, m := range g.members {
		for _, t := range m.topics {
			if _, ok := sizes[t]; ok {
				continue
			}
			if n := partitions(t); n > 0 {
				sizes[t] = n
			}
		}
	}
	return sizes
}

// expire removes member if its session ended at or before now, and
// reports whether it did.
func (g *group) expire(now time.Time, id string) bool {
	m := g.members[id]
	if m == nil || now.Before(m.deadline) {
		return false
	}
	g.remove(id)
	return true
}

func (g *group) remove(id string) {
	delete(g.members, id)
	delete(g.target, id)
	g.epoch++
}

// state is the group's state as Kafka names a share group's.
func (g *group) state() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}
