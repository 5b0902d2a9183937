package share

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/tp"
)

// Share groups in a cluster (package replica), as Kafka places them: a
// group's membership at its group coordinator, a share-partition at the
// leader of its partition. A member runs one Coordinator for both roles,
// told by Config.Placement which groups it coordinates and which
// partitions it leads now; it loads the share-partitions of a partition
// when it becomes its leader (Load) and forgets them when it stops (Drop),
// and forgets the members of the groups it no longer coordinates
// (DropMembers).

// Placement says what a Coordinator in a cluster serves now.
type Placement interface {
	// Coordinates returns nil if this broker coordinates group's
	// membership now, else the error a heartbeat gets (the client then
	// finds the coordinator again: kafka.ErrNotCoordinator).
	Coordinates(group string) error
	// Leads returns nil if this broker holds the share-partitions of t
	// (it leads t and has loaded them), else the error an acquisition or
	// acknowledgement of t gets (log.ErrNotLeader).
	Leads(t TopicPartition) error
}

// StateKeyPartition returns the partition a key of __share_group_state
// names, as its topic id (tp.TopicID) and partition: what a cluster
// places the record by. ErrCorrupt if the key is not one.
func StateKeyPartition(key []byte) (topicID [16]byte, partition int32, err error) {
	if len(key) < 2+2+16+4 || int(binary.BigEndian.Uint16(key[2:]))+2+2+16+4 != len(key) {
		return topicID, 0, fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(key))
	}
	copy(topicID[:], key[len(key)-20:])
	return topicID, int32(binary.BigEndian.Uint32(key[len(key)-4:])), nil
}

// Load replays log for the share-partitions of t, of every group, and
// holds them from then on in place of any it held: the state the
// previous leader of t wrote, with the records it had acquired Available
// again (their locks do not outlive it). Records of other partitions are
// skipped.
func (c *Coordinator) Load(ctx context.Context, t TopicPartition, log StateLog) error {
	id, part := tp.TopicID(t.Topic), int32(t.Partition)
	loaded := map[string]*partEntry{}
	err := log.Replay(ctx, func(offset int64, key, value []byte) error {
		if kid, kp, err := StateKeyPartition(key); err != nil || kid != id || kp != part {
			return nil
		}
		kind, k, err := decodeKey(key)
		if errors.Is(err, errNotShareRecord) {
			return nil
		}
		if err != nil {
			c.cfg.Logger.Warn("share: skip a record of __share_group_state", "err", err)
			return nil
		}
		if value == nil {
			delete(loaded, k.group)
			return nil
		}
		v, err := decodeValue(kind, value)
		if err != nil {
			c.cfg.Logger.Warn("share: skip a record of __share_group_state", "group", k.group, "partition", t, "err", err)
			return nil
		}
		pe := loaded[k.group]
		if pe == nil {
			if kind != recSnapshot {
				return nil
			}
			c.mu.Lock()
			pc := c.partitionConfig(k.group)
			c.mu.Unlock()
			pe = &partEntry{key: k, p: newPartition(pc, v.start), created: time.UnixMilli(v.createMs)}
			loaded[k.group] = pe
		}
		if kind == recSnapshot {
			pe.p.resetTo(v.start)
			pe.epoch, pe.updates = v.snapshotEpoch, 0
		} else {
			pe.updates++
		}
		pe.p.apply(v.start, v.batches)
		return nil
	})
	if err != nil {
		return fmt.Errorf("share: load %s from __share_group_state: %w", t, err)
	}
	c.Drop(t)
	for g, pe := range loaded {
		pe.p.takeChanges()
		ge, err := c.lookup(g, true)
		if err != nil {
			return err
		}
		ge.mu.Lock()
		ge.parts[t] = pe
		ge.mu.Unlock()
	}
	if len(loaded) > 0 {
		c.signal()
	}
	return nil
}

// Drop forgets the share-partitions of t of every group (their state
// stays in the StateLog for the next leader) and stops their lock timers.
func (c *Coordinator) Drop(t TopicPartition) {
	c.mu.Lock()
	groups := make([]*groupEntry, 0, len(c.groups))
	for _, ge := range c.groups {
		groups = append(groups, ge)
	}
	c.mu.Unlock()
	for _, ge := range groups {
		ge.mu.Lock()
		if pe := ge.parts[t]; pe != nil {
			pe.mu.Lock()
			pe.gone = true
			if pe.timer != nil && pe.timer.stop.Stop() {
				c.callbacks.Done()
			}
			pe.timer = nil
			pe.mu.Unlock()
			delete(ge.parts, t)
		}
		ge.mu.Unlock()
	}
}

// DropMembers forgets the members of each group keep rejects (its
// coordinator moved to another broker) and stops their session timers,
// without giving back their records: they may be heartbeating at the new
// coordinator.
func (c *Coordinator) DropMembers(keep func(group string) bool) {
	c.mu.Lock()
	groups := make([]*groupEntry, 0, len(c.groups))
	for _, ge := range c.groups {
		groups = append(groups, ge)
	}
	c.mu.Unlock()
	for _, ge := range groups {
		if keep(ge.id) {
			continue
		}
		ge.mu.Lock()
		if len(ge.g.members) > 0 {
			for m, a := range ge.sessions {
				if a.stop.Stop() {
					c.callbacks.Done()
				}
				delete(ge.sessions, m)
			}
			ge.g = newGroup(ge.id)
		}
		ge.mu.Unlock()
	}
}

// Coordinates reports whether this broker coordinates group's membership
// now (Config.Placement; always without one): nil, or the placement's
// error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).
func (c *Coordinator) Coordinates(group string) error { return c.coordinates(group) }

// coordinates is the check of Config.Placement on a group's membership.
func (c *Coordinator) coordinates(group string) error {
	if c.cfg.Placement == nil || group == "" {
		return nil
	}
	return c.cfg.Placement.Coordinates(group)
}

// leads is the check of Config.Placement on a share-partition.
func (c *Coordinator) leads(t TopicPartition) error {
	if c.cfg.Placement == nil {
		return nil
	}
	return c.cfg.Placement.Leads(t)
}

// RemotePlacement is a Placement that reaches the share-partitions the
// other brokers hold: a group's coordinator answers the offsets admin
// (Offsets, AlterOffsets, DeleteOffsets, DeleteGroup) of every partition
// through it, each partition's part at its leader. Only the coordinator
// of the group calls it.
type RemotePlacement interface {
	Placement
	// RemoteOffsets returns the state of group's share-partitions that
	// the other brokers hold, by partition.
	RemoteOffsets(group string) map[TopicPartition]PartitionState
	// AlterRemote sets the start offsets of share-partitions of group
	// that other brokers hold, each at its leader (AlterOffsets there).
	AlterRemote(ctx context.Context, group string, offsets map[TopicPartition]int64) error
	// DeleteRemote deletes the state of group's share-partitions of
	// topics (nil: of all, and the group) that the other brokers hold.
	DeleteRemote(ctx context.Context, group string, topics []string) error
}

// remote returns the RemotePlacement if this broker coordinates group,
// else nil.
func (c *Coordinator) remote(group string) RemotePlacement {
	rp, ok := c.cfg.Placement.(RemotePlacement)
	if !ok || group == "" || c.coordinates(group) != nil {
		return nil
	}
	return rp
}

// withRemote adds to out the state of group's share-partitions held
// elsewhere, when this broker coordinates group.
func (c *Coordinator) withRemote(group string, out map[TopicPartition]PartitionState) map[TopicPartition]PartitionState {
	rp := c.remote(group)
	if rp == nil {
		return out
	}
	for t, ps := range rp.RemoteOffsets(group) {
		if _, ok := out[t]; ok {
			continue
		}
		if out == nil {
			out = map[TopicPartition]PartitionState{}
		}
		out[t] = ps
	}
	return out
}
