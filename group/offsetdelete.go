package group

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/strata-log/strata/group/assign"
)

// ErrGroupSubscribedToTopic is the error of a partition whose committed
// offset DeleteOffsets keeps: the group is active and consumes its topic
// (Kafka's GROUP_SUBSCRIBED_TO_TOPIC).
var ErrGroupSubscribedToTopic = errors.New("group: the group is subscribed to the topic")

// DeleteOffsets deletes the group's committed offsets of tps (Kafka's
// OffsetDelete), durably: Store is given -1 for each that has one, which
// the broker writes as tombstones, before the coordinator forgets them.
//
// As Kafka's coordinator decides it: an empty group (no members) loses
// every one asked for; an active group of the consumer protocol type (a
// classic group of Kafka consumers, or a consumer-protocol group, KIP-848)
// keeps those of the topics its members subscribe to, each answered
// ErrGroupSubscribedToTopic, and loses the others (subscriptions it cannot
// read count as every topic); an active group of any other protocol type
// is ErrNonEmptyGroup and loses nothing. A partition with no commit is
// answered nil, as deleted. A group the coordinator knows nothing of is
// ErrGroupNotFound; ErrInvalidGroup, ErrClosed, a Store error (wrapped:
// nothing is deleted). ctx bounds the wait behind a commit of the group.
// The map has an entry for every partition of tps.
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, tps []TopicPartition) (map[TopicPartition]error, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	e := c.groups[group]
	if e == nil {
		known := c.consumer.groups[group] != nil
		c.mu.Unlock()
		if !known {
			return nil, fmt.Errorf("%w: %q", ErrGroupNotFound, group)
		}
		// A consumer-protocol group without commits: nothing to delete.
		out := make(map[TopicPartition]error, len(tps))
		for _, tp := range tps {
			out[tp] = nil
		}
		return out, nil
	}
	unlock, err := c.lockCommits(ctx, e)
	if err != nil {
		return nil, err
	}
	defer unlock()

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	subscribed, err := c.activeSubscriptions(e)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	out := make(map[TopicPartition]error, len(tps))
	tombstones := make(map[TopicPartition]int64)
	for _, tp := range tps {
		if subscribed != nil && subscribed(tp.Topic) {
			out[tp] = fmt.Errorf("%w: %q consumes %s", ErrGroupSubscribedToTopic, group, tp.Topic)
			continue
		}
		out[tp] = nil
		if _, ok := e.st.offsets[tp]; ok {
			tombstones[tp] = -1
		}
	}
	c.mu.Unlock()
	if len(tombstones) > 0 && c.cfg.Store != nil {
		if err := c.cfg.Store.Store(group, maps.Clone(tombstones)); err != nil {
			return nil, fmt.Errorf("group: store deletion of offsets of group %q: %w", group, err)
		}
	}
	c.mu.Lock()
	e.st.forget(tombstones)
	c.mu.Unlock()
	return out, nil
}

// activeSubscriptions reports which topics group e's active members
// consume: nil when it has none (every commit may go), ErrNonEmptyGroup
// when it is active and not of the consumer protocol type. mu is held.
func (c *Coordinator) activeSubscriptions(e *entry) (func(topic string) bool, error) {
	if ce := c.consumer.groups[e.st.id]; ce != nil && len(ce.g.members) > 0 {
		topics := ce.g.subscribedTopics()
		return func(t string) bool { return topics[t] }, nil
	}
	g := e.st
	if g.phase == phaseEmpty && len(g.members) == 0 {
		return nil, nil
	}
	if g.protocolType != assign.ProtocolType {
		return nil, fmt.Errorf("%w: %q has %d members of protocol type %q", ErrNonEmptyGroup, g.id, len(g.members), g.protocolType)
	}
	// The topics of the current generation's subscriptions, as Kafka
	// computes them when a generation forms; unknown (no generation yet, or
	// a subscription it cannot read): every topic, to be safe.
	topics := map[string]bool{}
	for _, m := range g.members {
		if !m.inGeneration {
			continue
		}
		md := m.metadataRef(g.protocol)
		ts, err := assign.DecodeSubscription(md)
		if g.protocol == "" || md == nil || err != nil {
			return func(string) bool { return true }, nil
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	if g.protocol == "" {
		return func(string) bool { return true }, nil
	}
	return func(t string) bool { return topics[t] }, nil
}
