package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
)

// join joins the group and takes the assignment it gets: the positions of
// its partitions start from the group's committed offsets, else from Reset.
// A rejoin that finds the same generation (nothing changed) keeps them.
func (c *Consumer) join(ctx context.Context) error {
	c.mu.Lock()
	member, gen := c.memberID, c.generation
	c.mu.Unlock()
	var resp group.JoinResponse
	var err error
	for range consumerJoinRetries {
		resp, err = c.client.JoinGroup(ctx, group.JoinRequest{
			Group:            c.cfg.Group,
			MemberID:         member,
			ClientID:         c.cfg.ClientID,
			Topics:           c.cfg.Topics,
			SessionTimeout:   c.cfg.SessionTimeout,
			RebalanceTimeout: c.cfg.RebalanceTimeout,
		})
		if errors.Is(err, ErrUnknownMember) && member != "" {
			member = "" // removed meanwhile: join as a new member
			c.mu.Lock()
			c.memberID = ""
			c.mu.Unlock()
			continue
		}
		if errors.Is(err, ErrRebalanceInProgress) && ctx.Err() == nil {
			continue // superseded by a newer join of ours: ask again
		}
		break
	}
	if err != nil {
		return fmt.Errorf("log: consumer: join group %q: %w", c.cfg.Group, err)
	}
	// The member id now, so that Close leaves even if what follows fails;
	// the generation with the assignment, below.
	c.mu.Lock()
	c.memberID = resp.MemberID
	c.mu.Unlock()
	if resp.MemberID == member && member != "" && resp.Generation == gen {
		c.mu.Lock()
		c.rejoin = false // the same generation: nothing changed
		c.mu.Unlock()
		return nil
	}
	committed, err := c.client.FetchOffsets(ctx, c.cfg.Group, resp.Assignment)
	if err != nil {
		return fmt.Errorf("log: consumer: fetch committed offsets of group %q: %w", c.cfg.Group, err)
	}
	parts, err := c.positions(resp.Assignment, committed)
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
		c.log.Warn("log: consumer: no Poll within the rebalance timeout, leaving the group",
			"group", c.cfg.Group, "member", member, "timeout", c.cfg.RebalanceTimeout)
		if err := c.client.LeaveGroup(c.hbCtx, c.cfg.Group, member); err != nil && !errors.Is(err, ErrUnknownMember) {
			c.log.Warn("log: consumer: leave group", "group", c.cfg.Group, "member", member, "err", err)
		}
		return
	}
	c.mu.Unlock()
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
		c.log.Warn("log: consumer: heartbeat failed", "group", c.cfg.Group, "member", member, "err", err)
	}
}
