package share

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// HeartbeatRequest is Kafka's ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group string
	// MemberID is the member's id, which the member makes (a UUID); never
	// empty.
	MemberID string
	// MemberEpoch: 0 to join (or rejoin), -1 to leave, else the member's
	// epoch.
	MemberEpoch int32
	RackID      *string // nil: unchanged
	// SubscribedTopics: nil when unchanged since the last heartbeat;
	// required (non-empty) on a join.
	SubscribedTopics []string
	ClientID         string
	ClientHost       string
}

// HeartbeatResponse answers a HeartbeatRequest.
type HeartbeatResponse struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is the member's partitions, sorted; nil when unchanged
	// since the last answer (and the request was no join and named no
	// topics).
	Assignment []TopicPartition
}

// Heartbeat joins, keeps in and leaves a share group, and answers the
// member's epoch and assignment. A member that leaves, or whose session
// times out (SessionTimeout without a heartbeat), gives back the records
// it holds: they are Available again to the others (or Archived at the
// delivery count limit).
//
// Errors: ErrInvalidRequest, ErrInvalidGroup, ErrGroupNotFound (the id of
// another group type), ErrUnknownMember, ErrFencedMemberEpoch,
// ErrGroupMaxSizeReached, ErrClosed, ctx's error.
func (c *Coordinator) Heartbeat(ctx context.Context, req HeartbeatRequest) (HeartbeatResponse, error) {
	if err := ctx.Err(); err != nil {
		return HeartbeatResponse{}, err
	}
	switch {
	case req.MemberID == "":
		return HeartbeatResponse{}, fmt.Errorf("%w: empty member id", ErrInvalidRequest)
	case req.MemberEpoch < leaveEpoch:
		return HeartbeatResponse{}, fmt.Errorf("%w: member epoch %d", ErrInvalidRequest, req.MemberEpoch)
	case req.Group != "" && c.cfg.OtherGroup(req.Group):
		return HeartbeatResponse{}, fmt.Errorf("%w: %q is not a share group", ErrGroupNotFound, req.Group)
	}
	if err := c.coordinates(req.Group); err != nil {
		return HeartbeatResponse{}, err
	}
	ge, err := c.lookup(req.Group, req.MemberEpoch == joinEpoch)
	if err != nil {
		if req.MemberEpoch != joinEpoch && req.Group != "" && !c.isClosed() {
			return HeartbeatResponse{}, fmt.Errorf("%w: %q in share group %q", ErrUnknownMember, req.MemberID, req.Group)
		}
		return HeartbeatResponse{}, err
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	now := c.clock.Now()
	ans, err := ge.g.heartbeat(now, membership{sessionTimeout: c.cfg.SessionTimeout, maxSize: c.cfg.MaxSize},
		heartbeat{member: req.MemberID, epoch: req.MemberEpoch, rack: req.RackID, topics: req.SubscribedTopics, clientID: req.ClientID, clientHost: req.ClientHost},
		c.partitionCount)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	resp := HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: ans.epoch, HeartbeatInterval: c.cfg.HeartbeatInterval}
	if ans.left {
		c.memberGone(ge, req.MemberID)
		return resp, nil
	}
	if ge.sessions[req.MemberID] == nil {
		c.armSession(ge, req.MemberID, now.Add(c.cfg.SessionTimeout))
	}
	if ans.assignment != nil {
		resp.Assignment = []TopicPartition{}
		for _, t := range slices.Sorted(maps.Keys(ans.assignment)) {
			for _, p := range ans.assignment[t] {
				tp := TopicPartition{Topic: t, Partition: p}
				resp.Assignment = append(resp.Assignment, tp)
				if c.leads(tp) != nil {
					continue // its leader initializes it, at its first fetch
				}
				// Kafka initializes a share-partition's state when it is
				// first assigned: with share.auto.offset.reset=latest, the
				// records produced from then on are the group's.
				if _, err := c.part(ge, tp); err != nil {
					c.cfg.Logger.Warn("share: initialize share-partition", "group", ge.id, "partition", tp, "err", err)
				}
			}
		}
	}
	return resp, nil
}

func (c *Coordinator) partitionCount(topic string) int {
	n, err := c.cfg.Partitions(topic)
	if err != nil {
		return 0
	}
	return n
}

// armSession arms member's session timer. ge.mu is held.
func (c *Coordinator) armSession(ge *groupEntry, member string, at time.Time) {
	if a := c.afterFunc(at, func(a *armed) { c.sessionFired(ge, member, a) }); a != nil {
		ge.sessions[member] = a
	}
}

// sessionFired is the session timer a of member: it removes the member
// if its session ended, else arms the timer at its new deadline.
func (c *Coordinator) sessionFired(ge *groupEntry, member string, a *armed) {
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if ge.sessions[member] != a {
		return
	}
	delete(ge.sessions, member)
	if c.isClosed() {
		return
	}
	now := c.clock.Now()
	if ge.g.expire(now, member) {
		c.cfg.Logger.Info("share: member's session timed out", "group", ge.id, "member", member)
		c.memberGone(ge, member)
		return
	}
	if m := ge.g.members[member]; m != nil {
		c.armSession(ge, member, m.deadline)
	}
}

// memberGone stops a departed member's session timer and releases its
// records. ge.mu is held.
func (c *Coordinator) memberGone(ge *groupEntry, member string) {
	if a := ge.sessions[member]; a != nil {
		delete(ge.sessions, member)
		if a.stop.Stop() {
			c.callbacks.Done()
		}
	}
	c.releaseMember(ge, member)
}

// releaseMember releases member's records in every share-partition of
// the group. ge.mu is held.
func (c *Coordinator) releaseMember(ge *groupEntry, member string) {
	released := false
	for t, pe := range ge.parts {
		pe.mu.Lock()
		if pe.p.releaseMember(member) > 0 {
			released = true
			if err := c.flush(pe, false); err != nil {
				c.cfg.Logger.Warn("share: store released records", "group", ge.id, "partition", t, "err", err)
			}
		}
		pe.mu.Unlock()
	}
	if released {
		c.signal()
	}
}

// ReleaseMember gives back the records member holds in group, as when
// it leaves (Kafka does so when a member's share session ends). It is no
// error if the group or the member is unknown.
func (c *Coordinator) ReleaseMember(group, member string) {
	ge, err := c.lookup(group, false)
	if err != nil {
		return
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	c.releaseMember(ge, member)
}
