package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/assign"
)

// join joins the group in Kafka's classic protocol, as a Kafka consumer
// does: a JoinGroup with the protocol "range" and the subscription as
// ConsumerProtocol metadata; if the coordinator makes it the leader, it
// computes the range assignment of every member (assignRange); then a
// SyncGroup gives it its partitions. Their positions start from the group's
// committed offsets, else from Reset. A rejoin that finds the same
// generation (nothing changed) keeps them.
func (c *Consumer) join(ctx context.Context) error {
	c.mu.Lock()
	member, gen := c.memberID, c.generation
	c.mu.Unlock()
	setMember := func(id string) {
		member = id
		c.mu.Lock()
		c.memberID = id // now, so that Close leaves even if what follows fails
		c.mu.Unlock()
	}
	var (
		resp group.JoinResponse
		tps  []TopicPartition
		err  error
	)
	// A new member id costs one of the retries; a rebalance beginning
	// between the join and the sync does not (each such round waits for the
	// group to form a generation): ctx bounds those.
	for retries := consumerJoinRetries; retries > 0; {
		joinedAs := member
		resp, err = c.client.JoinGroup(ctx, group.JoinRequest{
			Group:            c.cfg.Group,
			MemberID:         member,
			ClientID:         c.cfg.ClientID,
			ProtocolType:     assign.ProtocolType,
			Protocols:        []group.Protocol{{Name: assign.RangeProtocol, Metadata: assign.EncodeSubscription(c.cfg.Topics)}},
			SessionTimeout:   c.cfg.SessionTimeout,
			RebalanceTimeout: c.cfg.RebalanceTimeout,
		})
		switch {
		case errors.Is(err, ErrMemberIDRequired) && resp.MemberID != "":
			setMember(resp.MemberID) // KIP-394: join again with the id given
			retries--
			continue
		case errors.Is(err, ErrUnknownMember) && member != "":
			setMember("") // removed meanwhile: join as a new member
			retries--
			continue
		case errors.Is(err, ErrRebalanceInProgress) && ctx.Err() == nil:
			retries--
			continue // superseded by a newer join of ours: ask again
		case err != nil:
			return fmt.Errorf("log: consumer: join group %q: %w", c.cfg.Group, err)
		}
		setMember(resp.MemberID)
		if joinedAs != "" && resp.MemberID == joinedAs && resp.Generation == gen {
			c.mu.Lock()
			c.rejoin = false // the same generation: nothing changed
			c.mu.Unlock()
			return nil
		}
		tps, err = c.sync(ctx, resp)
		switch {
		case errors.Is(err, ErrUnknownMember):
			setMember("")
			retries--
			continue
		case (errors.Is(err, ErrRebalanceInProgress) || errors.Is(err, ErrIllegalGeneration)) && ctx.Err() == nil:
			continue // a new rebalance began before the assignment came: join it
		}
		break
	}
	if err != nil {
		return fmt.Errorf("log: consumer: join group %q: %w", c.cfg.Group, err)
	}
	committed, err := c.client.FetchOffsets(ctx, c.cfg.Group, tps)
	if err != nil {
		return fmt.Errorf("log: consumer: fetch committed offsets of group %q: %w", c.cfg.Group, err)
	}
	parts, err := c.positions(ctx, tps, committed)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.generation = resp.Generation
	c.assign(parts)
	c.rejoin = false
	return nil
}

// sync is the SyncGroup of a join: the leader's with the range assignment
// of every member, the others' with none. It returns the member's
// partitions.
func (c *Consumer) sync(ctx context.Context, resp group.JoinResponse) ([]TopicPartition, error) {
	if resp.Protocol != assign.RangeProtocol {
		return nil, fmt.Errorf("%w: the group chose protocol %q; a Strata consumer speaks %q",
			ErrInconsistentGroupProtocol, resp.Protocol, assign.RangeProtocol)
	}
	var assignments map[string][]byte
	if resp.Leader == resp.MemberID {
		var err error
		if assignments, err = c.assignRange(ctx, resp.MemberMetadata); err != nil {
			return nil, err
		}
	}
	s, err := c.client.SyncGroup(ctx, group.SyncRequest{
		Group:        c.cfg.Group,
		MemberID:     resp.MemberID,
		Generation:   resp.Generation,
		ProtocolType: resp.ProtocolType,
		Protocol:     resp.Protocol,
		Assignments:  assignments,
	})
	if err != nil {
		return nil, err
	}
	tps, err := assign.DecodeAssignment(s.Assignment)
	if err != nil {
		return nil, fmt.Errorf("log: consumer: the assignment of generation %d: %w", resp.Generation, err)
	}
	return tps, nil
}

// Commit commits to the group the position of every assigned partition:
// the offset after the last record Poll returned (or where Seek or Reset
// put it), for the consumer's current generation. It returns once the
// broker has made the commit durable. Positions the group already holds are
// not sent again.
//
// The group refuses a commit from a member that a rebalance left behind
// (ErrIllegalGeneration, ErrUnknownMember, ErrRebalanceInProgress): then the
// next Poll rejoins, and the records polled since the last commit will be
// delivered again to the partitions' new owners. Without a Group, Commit
// returns ErrNoGroup; after Close, ErrClosed.
func (c *Consumer) Commit(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("log: commit: %w", errConsumerClosed)
	}
	if c.cfg.Group == "" {
		c.mu.Unlock()
		return ErrNoGroup
	}
	member, gen := c.memberID, c.generation
	offsets := map[TopicPartition]int64{}
	for _, p := range c.parts {
		if p.pos != p.committed {
			offsets[p.tp] = p.pos
		}
	}
	c.mu.Unlock()
	if member == "" {
		if len(offsets) == 0 {
			return nil // not joined yet: nothing to commit
		}
		return fmt.Errorf("log: commit to group %q: %w: the consumer left the group or was removed from it; "+
			"the next Poll rejoins, and records polled since the last commit will be delivered again", c.cfg.Group, ErrUnknownMember)
	}
	err := c.client.CommitOffsets(ctx, c.cfg.Group, member, gen, offsets)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.memberID == member && c.generation == gen && c.lostMembership(err) {
			return fmt.Errorf("log: commit to group %q refused for generation %d: %w; the next Poll rejoins, "+
				"and records polled since the last commit will be delivered again to the partitions' next owners", c.cfg.Group, gen, err)
		}
		return fmt.Errorf("log: commit to group %q: %w", c.cfg.Group, err)
	}
	for tp, off := range offsets {
		if p := c.byTP[tp]; p != nil && c.memberID == member && c.generation == gen {
			p.committed = off
		}
	}
	return nil
}

// lostMembership reacts to a group error: a rebalance (or a newer
// generation) means rejoin; an unknown member means rejoin as a new member.
// It ends a parked fetch so that Poll rejoins at once, and reports whether
// err was such an error. mu is held.
func (c *Consumer) lostMembership(err error) bool {
	switch {
	case errors.Is(err, ErrUnknownMember):
		c.memberID = ""
	case errors.Is(err, ErrRebalanceInProgress), errors.Is(err, ErrIllegalGeneration):
	default:
		return false
	}
	c.rejoin = true
	if c.fetching && c.cancelPoll != nil {
		c.cancelPoll(errRejoin)
	}
	return true
}

// heartbeats is the consumer's goroutine in a group: a heartbeat every
// HeartbeatInterval, until Close.
func (c *Consumer) heartbeats() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.heartbeat()
	}
}

// heartbeat sends one heartbeat, or leaves the group when the application
// has not polled for RebalanceTimeout (Kafka's max.poll.interval.ms): a
// stuck consumer must not hold its partitions.
func (c *Consumer) heartbeat() {
	c.mu.Lock()
	member, gen := c.memberID, c.generation
	if member == "" || c.joining {
		c.mu.Unlock()
		return // not a member, or joining (a pending join keeps the member alive)
	}
	if !c.polling && time.Since(c.lastPoll) > c.cfg.RebalanceTimeout {
		c.memberID, c.rejoin = "", true
		c.mu.Unlock()
		c.logger.Warn("log: consumer: no Poll within the rebalance timeout, leaving the group",
			"group", c.cfg.Group, "member", member, "timeout", c.cfg.RebalanceTimeout)
		if err := c.leave(c.hbCtx, member); err != nil && !errors.Is(err, ErrUnknownMember) {
			c.logger.Warn("log: consumer: leave group", "group", c.cfg.Group, "member", member, "err", err)
		}
		return
	}
	c.mu.Unlock()
	if c.groupClient != nil {
		c.heartbeat848(member, gen)
		return
	}
	err := c.client.Heartbeat(c.hbCtx, c.cfg.Group, member, gen)
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memberID != member || c.generation != gen {
		return // rejoined meanwhile
	}
	if !c.lostMembership(err) && c.hbCtx.Err() == nil {
		c.logger.Warn("log: consumer: heartbeat failed", "group", c.cfg.Group, "member", member, "err", err)
	}
}
