package log

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/tp"
)

// GroupProtocol is the group protocol a Consumer speaks (Kafka's
// group.protocol).
type GroupProtocol int

const (
	// GroupProtocolClassic: Kafka's classic protocol (JoinGroup,
	// SyncGroup), the range assignment computed by the leader member, every
	// member stopping at each rebalance.
	GroupProtocolClassic GroupProtocol = iota
	// GroupProtocolConsumer: the consumer protocol (KIP-848): the
	// coordinator computes the assignment and moves partitions one member
	// at a time, the others reading on. The Client must be a
	// ConsumerGroupClient.
	GroupProtocolConsumer
)

// ConsumerGroupClient is what a Client needs to serve a Consumer of the
// consumer group protocol (KIP-848): Kafka's ConsumerGroupHeartbeat, with
// the semantics of group.Coordinator.ConsumerHeartbeat. A Broker is one.
type ConsumerGroupClient interface {
	ConsumerHeartbeat(ctx context.Context, req group.ConsumerHeartbeatRequest) (group.ConsumerHeartbeatResponse, error)
}

// ConsumerHeartbeat joins, keeps in or leaves a consumer-protocol group
// (see ConsumerGroupClient and group.Coordinator.ConsumerHeartbeat).
func (b *Broker) ConsumerHeartbeat(ctx context.Context, req group.ConsumerHeartbeatRequest) (group.ConsumerHeartbeatResponse, error) {
	return b.groups.ConsumerHeartbeat(ctx, req)
}

// Errors of the consumer group protocol, as the coordinator returns them.
var (
	ErrFencedMemberEpoch = group.ErrFencedMemberEpoch
	ErrStaleMemberEpoch  = group.ErrStaleMemberEpoch
)

// join848 is Poll's join in the consumer protocol: a first heartbeat
// (epoch 0) when the consumer is not a member, then the assignment the
// coordinator gave (at the join or in a heartbeat since) made the
// consumer's: partitions it no longer has are dropped (revoked: the next
// heartbeat says so), those it keeps keep their positions, new ones start
// from the group's committed offsets, else from Reset.
func (c *Consumer) join848(ctx context.Context) error {
	c.mu.Lock()
	member, target, ver := c.memberID, c.target, c.targetVer
	c.mu.Unlock()
	if member == "" {
		resp, err := c.groupClient.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
			Group: c.cfg.Group, MemberEpoch: 0, RebalanceTimeout: c.cfg.RebalanceTimeout,
			SubscribedTopics: c.cfg.Topics, Owned: []TopicPartition{}, ClientID: c.cfg.ClientID,
		})
		if err != nil {
			return fmt.Errorf("log: consumer: join group %q: %w", c.cfg.Group, err)
		}
		member, target = resp.MemberID, resp.Assignment
		if target == nil {
			target = []TopicPartition{}
		}
		c.mu.Lock()
		// Now, so that Close leaves even if what follows fails; the
		// partitions held before (a fenced member's) are given up.
		c.memberID, c.generation = member, resp.MemberEpoch
		c.targetVer++
		c.target, ver = target, c.targetVer
		c.assign(nil)
		c.mu.Unlock()
	}
	c.mu.Lock()
	var added []TopicPartition
	for _, t := range target {
		if c.byTP[t] == nil {
			added = append(added, t)
		}
	}
	c.mu.Unlock()
	committed, err := c.client.FetchOffsets(ctx, c.cfg.Group, added)
	if err != nil {
		return fmt.Errorf("log: consumer: fetch committed offsets of group %q: %w", c.cfg.Group, err)
	}
	parts, err := c.positions(ctx, added, committed)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memberID != member {
		return nil // fenced meanwhile: rejoin stays set
	}
	for _, p := range c.parts {
		if slices.ContainsFunc(target, func(t TopicPartition) bool { return tp.Compare(t, p.tp) == 0 }) {
			parts = append(parts, p)
		}
	}
	c.assign(parts)
	if c.targetVer == ver {
		c.rejoin = false // else a newer assignment came meanwhile: apply it too
	}
	return nil
}

// heartbeat848 is a heartbeat of the consumer protocol: it reports the
// partitions held and takes the epoch and, when it changed, the
// assignment, which the next Poll applies (it ends a parked one). A member
// fenced or unknown to the group gives up its partitions and rejoins.
func (c *Consumer) heartbeat848(member string, epoch int32) {
	c.mu.Lock()
	owned := make([]TopicPartition, len(c.parts))
	for i, p := range c.parts {
		owned[i] = p.tp
	}
	c.mu.Unlock()
	resp, err := c.groupClient.ConsumerHeartbeat(c.hbCtx, group.ConsumerHeartbeatRequest{
		Group: c.cfg.Group, MemberID: member, MemberEpoch: epoch, RebalanceTimeout: -1, Owned: owned,
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memberID != member {
		return // rejoined meanwhile
	}
	switch {
	case err == nil:
		c.generation = resp.MemberEpoch
		if resp.Assignment != nil {
			c.targetVer++
			c.target = resp.Assignment
			if !slices.Equal(resp.Assignment, owned) {
				c.wakeToRejoin()
			}
		}
	case errors.Is(err, ErrFencedMemberEpoch), errors.Is(err, ErrUnknownMember):
		c.memberID = ""
		c.wakeToRejoin()
	case c.hbCtx.Err() == nil:
		c.logger.Warn("log: consumer: heartbeat failed", "group", c.cfg.Group, "member", member, "err", err)
	}
}

// wakeToRejoin has the next Poll join (apply the assignment) and ends a
// parked one. mu is held.
func (c *Consumer) wakeToRejoin() {
	c.rejoin = true
	if c.fetching && c.cancelPoll != nil {
		c.cancelPoll(errRejoin)
	}
}

// leave848 leaves a consumer-protocol group (epoch -1).
func (c *Consumer) leave848(ctx context.Context, member string) error {
	_, err := c.groupClient.ConsumerHeartbeat(ctx, group.ConsumerHeartbeatRequest{
		Group: c.cfg.Group, MemberID: member, MemberEpoch: -1, RebalanceTimeout: -1,
	})
	return err
}
