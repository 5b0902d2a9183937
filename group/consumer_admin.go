package group

import (
	"fmt"
	"maps"
	"slices"
)

// Group types, as Kafka's ListGroups v5 names them (KIP-1043).
const (
	// TypeClassic is a group of the classic protocol (Join, Sync,
	// Heartbeat), or one with only committed offsets.
	TypeClassic = "classic"
	// TypeConsumer is a group of the consumer protocol (KIP-848,
	// ConsumerHeartbeat).
	TypeConsumer = "consumer"
)

// Type returns the type of the group of that id (TypeClassic or
// TypeConsumer), and false if the coordinator knows nothing of it.
func (c *Coordinator) Type(group string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.consumer.groups[group] != nil:
		return TypeConsumer, true
	case c.groups[group] != nil:
		return TypeClassic, true
	}
	return "", false
}

// CheckOffsetFetch checks the member of an offset fetch (OffsetFetch v9+,
// KIP-848) as Kafka's ConsumerGroup.validateOffsetFetch does: of a
// consumer-protocol group, a fetch from a member at its current epoch
// passes, as does one with no member id and a negative epoch (an admin
// client's); a member the group does not have is ErrUnknownMember, one at
// another epoch ErrStaleMemberEpoch. A fetch of any other group passes.
func (c *Coordinator) CheckOffsetFetch(group, member string, epoch int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce := c.consumer.groups[group]
	if ce == nil || member == "" && epoch < 0 {
		return nil
	}
	m := ce.g.members[member]
	switch {
	case m == nil:
		return fmt.Errorf("%w: %q is not a member of consumer group %q", ErrUnknownMember, member, group)
	case epoch != m.epoch:
		return fmt.Errorf("%w: offset fetch at epoch %d, member %q of consumer group %q is at %d", ErrStaleMemberEpoch, epoch, member, group, m.epoch)
	}
	return nil
}

// groupIDs returns the ids of every group, classic and consumer, sorted.
// mu is held.
func (c *Coordinator) groupIDs() []string {
	ids := slices.Collect(maps.Keys(c.groups))
	for id := range c.consumer.groups {
		if c.groups[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
