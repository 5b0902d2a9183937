package share

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// GroupDescription describes a share group (Kafka's ShareGroupDescribe).
type GroupDescription struct {
	Group           string
	State           string // Empty, Stable (Dead: no such group)
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string              // "simple"
	Members         []MemberDescription // sorted by MemberID
}

// MemberDescription is one member of a GroupDescription.
type MemberDescription struct {
	MemberID         string
	RackID           string
	ClientID         string
	ClientHost       string
	MemberEpoch      int32
	SubscribedTopics []string
	Assignment       []TopicPartition
}

// Describe describes group, false if the coordinator has no share group
// of that id.
func (c *Coordinator) Describe(group string) (GroupDescription, bool) {
	ge, err := c.lookup(group, false)
	if err != nil {
		return GroupDescription{Group: group, State: "Dead"}, false
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	g := ge.g
	d := GroupDescription{Group: group, State: g.state(), Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Assignor: "simple"}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		md := MemberDescription{MemberID: id, RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost, MemberEpoch: m.epoch,
			SubscribedTopics: slices.Clone(m.topics), Assignment: []TopicPartition{}}
		for _, t := range slices.Sorted(maps.Keys(m.assignment)) {
			for _, p := range m.assignment[t] {
				md.Assignment = append(md.Assignment, TopicPartition{Topic: t, Partition: p})
			}
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}

// Listing is a share group in List.
type Listing struct {
	Group string
	State string
}

// List lists the share groups, sorted by id: those with members or with
// share-partition state.
func (c *Coordinator) List() []Listing {
	c.mu.Lock()
	groups := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	var out []Listing
	for _, ge := range groups {
		if c.coordinates(ge.id) != nil {
			continue // listed by its coordinator
		}
		ge.mu.Lock()
		if len(ge.g.members) > 0 || len(ge.parts) > 0 {
			out = append(out, Listing{Group: ge.id, State: ge.g.state()})
		}
		ge.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Listing) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// Is reports whether group is a share group this coordinator knows.
func (c *Coordinator) Is(group string) bool {
	for _, l := range c.List() {
		if l.Group == group {
			return true
		}
	}
	return false
}

// PartitionState is a share-partition's state, for
// DescribeShareGroupOffsets and tools.
type PartitionState struct {
	StartOffset int64
	// InFlight counts the in-flight records by state.
	Available, Acquired, Acknowledged, Archived int
	// Batches are the in-flight records as runs of one state and
	// delivery count (an acquired record as Acquired).
	Batches []StateBatch
}

// Exists reports whether group is a share group of the coordinator (one
// joined, or with state): an id a classic or consumer group cannot take
// (KIP-932).
func (c *Coordinator) Exists(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[group] != nil
}

// Offsets returns the share-partitions of group that have state, by
// partition.
func (c *Coordinator) Offsets(group string) map[TopicPartition]PartitionState {
	ge, err := c.lookup(group, false)
	if err != nil {
		return c.withRemote(group, nil) // in a cluster: held by the leaders
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	out := make(map[TopicPartition]PartitionState, len(ge.parts))
	for t, pe := range ge.parts {
		pe.mu.Lock()
		ps := PartitionState{StartOffset: pe.p.start}
		for i, r := range pe.p.recs {
			switch r.state {
			case Available:
				ps.Available++
			case Acquired:
				ps.Acquired++
			case Acknowledged:
				ps.Acknowledged++
			case Archived:
				ps.Archived++
			}
			off := pe.p.start + int64(i)
			if k := len(ps.Batches) - 1; k >= 0 && ps.Batches[k].Last == off-1 && ps.Batches[k].State == r.state && ps.Batches[k].DeliveryCount == r.count {
				ps.Batches[k].Last = off
				continue
			}
			ps.Batches = append(ps.Batches, StateBatch{First: off, Last: off, State: r.state, DeliveryCount: r.count})
		}
		pe.mu.Unlock()
		out[t] = ps
	}
	return c.withRemote(group, out)
}

// AlterOffsets sets the start offsets of share-partitions of group
// (Kafka's AlterShareGroupOffsets): each starts anew there, nothing in
// flight. The group must have no members (ErrNonEmptyGroup). An offset
// past the log's end is the end; before its start, the start.
func (c *Coordinator) AlterOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ge, err := c.lookup(group, true)
	if err != nil {
		return err
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if n := len(ge.g.members); n > 0 {
		return fmt.Errorf("%w: share group %q has %d members", ErrNonEmptyGroup, group, n)
	}
	var remote map[TopicPartition]int64 // in a cluster: of partitions led elsewhere
	for _, t := range slices.SortedFunc(maps.Keys(offsets), cmpTP) {
		if err := c.leads(t); err != nil {
			if c.remote(group) == nil {
				return err
			}
			if remote == nil {
				remote = map[TopicPartition]int64{}
			}
			remote[t] = offsets[t]
			continue
		}
		pe, err := c.part(ge, t)
		if err != nil {
			return err
		}
		logStart, logEnd, err := c.cfg.Offsets(t)
		if err != nil {
			return fmt.Errorf("share: offsets of %s: %w", t, err)
		}
		pe.mu.Lock()
		pe.p.resetTo(min(max(offsets[t], logStart), logEnd))
		pe.p.takeChanges()
		err = c.flush(pe, true)
		pe.mu.Unlock()
		if err != nil {
			return fmt.Errorf("share: store offsets of group %q: %w", group, err)
		}
	}
	if len(remote) > 0 {
		return c.remote(group).AlterRemote(ctx, group, remote)
	}
	return nil
}

func cmpTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return a.Partition - b.Partition
}

// DeleteOffsets deletes the state of group's share-partitions of topics
// (Kafka's DeleteShareGroupOffsets): a later fetch starts them anew from
// share.auto.offset.reset. The group must have no members
// (ErrNonEmptyGroup).
func (c *Coordinator) DeleteOffsets(ctx context.Context, group string, topics []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ge, err := c.lookup(group, false)
	if err != nil {
		return err
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if n := len(ge.g.members); n > 0 {
		return fmt.Errorf("%w: share group %q has %d members", ErrNonEmptyGroup, group, n)
	}
	if err := c.deleteParts(ge, func(t TopicPartition) bool { return slices.Contains(topics, t.Topic) }); err != nil {
		return err
	}
	if rp := c.remote(group); rp != nil {
		return rp.DeleteRemote(ctx, group, topics)
	}
	return nil
}

// DeleteGroup deletes group and its share-partitions' state. The group
// must have no members (ErrNonEmptyGroup); ErrGroupNotFound if there is
// none.
func (c *Coordinator) DeleteGroup(ctx context.Context, group string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ge, err := c.lookup(group, false)
	if err != nil {
		return err
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if n := len(ge.g.members); n > 0 {
		return fmt.Errorf("%w: share group %q has %d members", ErrNonEmptyGroup, group, n)
	}
	if err := c.deleteParts(ge, func(TopicPartition) bool { return true }); err != nil {
		return err
	}
	if rp := c.remote(group); rp != nil {
		if err := rp.DeleteRemote(ctx, group, nil); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if c.groups[group] == ge {
		delete(c.groups, group)
	}
	c.mu.Unlock()
	return nil
}

// deleteParts writes tombstones of the share-partitions del picks and
// forgets them. ge.mu is held.
func (c *Coordinator) deleteParts(ge *groupEntry, del func(TopicPartition) bool) error {
	for _, t := range slices.SortedFunc(maps.Keys(ge.parts), cmpTP) {
		if !del(t) {
			continue
		}
		pe := ge.parts[t]
		pe.mu.Lock()
		var err error
		if c.log != nil {
			_, err = c.log.Append([]Record{{Key: encodeKey(recSnapshot, pe.key)}, {Key: encodeKey(recUpdate, pe.key)}})
		}
		if err == nil {
			c.forgetSnapshot(pe.key)
			pe.gone = true
			if pe.timer != nil && pe.timer.stop.Stop() {
				c.callbacks.Done()
			}
			pe.timer = nil
			delete(ge.parts, t)
		}
		pe.mu.Unlock()
		if err != nil {
			return fmt.Errorf("share: delete state of group %q, %s: %w", ge.id, t, err)
		}
	}
	return nil
}

// SetGroupConfig sets group's configuration (Kafka's group configs
// share.auto.offset.reset, share.record.lock.duration.ms and
// share.delivery.count.limit; a zero GroupConfig: the broker's), stored
// with Config.StoreGroupConfigs first: the offset reset applies to the
// share-partitions initialized from then on, the others at once.
// ErrInvalidConfig for values out of range; nothing changes then, nor
// when the store fails.
func (c *Coordinator) SetGroupConfig(group string, gc GroupConfig) error {
	if group == "" {
		return fmt.Errorf("%w: empty", ErrInvalidGroup)
	}
	if err := gc.validate(); err != nil {
		return err
	}
	c.configMu.Lock()
	defer c.configMu.Unlock()
	c.mu.Lock()
	next := maps.Clone(c.configs)
	c.mu.Unlock()
	if gc == (GroupConfig{}) {
		delete(next, group)
	} else {
		next[group] = gc
	}
	if c.cfg.StoreGroupConfigs != nil {
		if err := c.cfg.StoreGroupConfigs(next); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.configs = next
	ge := c.groups[group]
	pc := c.partitionConfig(group)
	c.mu.Unlock()
	if ge == nil {
		return nil
	}
	ge.mu.Lock()
	defer ge.mu.Unlock()
	for _, pe := range ge.parts {
		pe.mu.Lock()
		pe.p.cfg.LockDuration, pe.p.cfg.DeliveryCountLimit = pc.LockDuration, pc.DeliveryCountLimit
		pe.mu.Unlock()
	}
	return nil
}

// GroupConfig returns group's configuration as set with SetGroupConfig
// (zero: the broker's).
func (c *Coordinator) GroupConfig(group string) GroupConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.configs[group]
}

// GroupConfigs returns the groups' configurations set with
// SetGroupConfig.
func (c *Coordinator) GroupConfigs() map[string]GroupConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.configs)
}
