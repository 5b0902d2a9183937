package group

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group metadata: what Kafka writes to __consumer_offsets so that a new
// coordinator of a group (after a failover or a restart) knows its
// generation and members, and they need not rejoin.

// Versions of the group metadata records Strata writes: Kafka's
// GroupMetadataKey v2 and GroupMetadataValue v3 (the last one that is not
// flexible; it has the members' group instance ids).
const (
	groupKeyVersion   = 2
	groupValueVersion = 3
)

// GroupMetadataStore is an OffsetStore that also makes groups' metadata
// durable. If the Config's Store is one, the Coordinator calls StoreGroup
// when a generation completes (the leader's assignment, which makes the
// group Stable once stored: its Syncs are answered then), with the value of the group's metadata record
// (EncodeGroupMetadataKey is its key), and when the group becomes Empty,
// with a nil value: write a tombstone. The broker gives the values it read
// back to New in Config.InitialGroups.
//
// StoreGroup is called with no lock of the Coordinator held, one call at a
// time, in the order the group changed; it must not call back into the
// Coordinator nor retain value. An error is logged; a generation whose
// record failed does not stand (its Syncs fail, the group rebalances).
type GroupMetadataStore interface {
	StoreGroup(group string, value []byte) error
}

// EncodeGroupMetadataKey returns the key of a group's metadata record in
// __consumer_offsets: Kafka's GroupMetadataKey version 2 (int16 version,
// string group).
func EncodeGroupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

// DecodeGroupMetadataKey decodes the key of a group metadata record (key
// version 2). Another key is ErrCorruptOffsetRecord.
func DecodeGroupMetadataKey(key []byte) (string, error) {
	if len(key) < 2 || binary.BigEndian.Uint16(key) != groupKeyVersion {
		return "", fmt.Errorf("%w: not a group metadata key", ErrCorruptOffsetRecord)
	}
	var k kmsg.GroupMetadataKey
	if err := k.ReadFrom(key); err != nil || len(k.AppendTo(nil)) != len(key) || validGroup(k.Group) != nil {
		return "", fmt.Errorf("%w: group metadata key of %d bytes", ErrCorruptOffsetRecord, len(key))
	}
	return k.Group, nil
}

// encodeMetadata is the value of the group's metadata record now: its
// generation with its members, or nil (a tombstone) when it has none. A
// member that joined a rebalance in progress and was in no generation yet
// is left out: restored as a member of this generation it would get no
// assignment and keep none.
func (g *groupState) encodeMetadata(now time.Time) []byte {
	n := 0
	for _, m := range g.members {
		if m.inGeneration {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	v := kmsg.GroupMetadataValue{
		Version: groupValueVersion, ProtocolType: g.protocolType, Generation: g.generation,
		Protocol: kmsg.StringPtr(g.protocol), Leader: kmsg.StringPtr(g.leader),
		CurrentStateTimestamp: now.UnixMilli(),
	}
	if g.phase != phaseStable && !g.storing { // (storing: the generation's record, to make it Stable)
		// A rebalance is in progress (a member was removed, so the
		// members' assignments may no longer cover every partition): no
		// leader, which Kafka never writes for a group with members, tells
		// the next coordinator to restore it rebalancing.
		v.Leader = nil
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if !m.inGeneration {
			continue
		}
		var instanceID *string
		if m.instanceID != "" {
			instanceID = kmsg.StringPtr(m.instanceID)
		}
		v.Members = append(v.Members, kmsg.GroupMetadataValueMember{
			MemberID: id, InstanceID: instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMillis: int32(min(m.rebalanceTimeout.Milliseconds(), 1<<31-1)),
			SessionTimeoutMillis:   int32(min(m.sessionTimeout.Milliseconds(), 1<<31-1)),
			Subscription:           m.metadataRef(g.protocol), Assignment: m.assignment, // AppendTo copies them
		})
	}
	return v.AppendTo(make([]byte, 0, groupMetadataSize(&v)))
}

// groupMetadataSize is the size of v encoded (version 3, not flexible), so
// that the value is allocated once: a group's members' subscriptions make
// it as large as their JoinGroups together.
func groupMetadataSize(v *kmsg.GroupMetadataValue) int {
	str := func(s string) int { return 2 + len(s) }
	n := 2 + str(v.ProtocolType) + 4 + 2 + 2 + 8 + 4 // version, type, generation, protocol and leader lengths, timestamp, member count
	if v.Protocol != nil {
		n += len(*v.Protocol)
	}
	if v.Leader != nil {
		n += len(*v.Leader)
	}
	for _, m := range v.Members {
		n += str(m.MemberID) + 2 + str(m.ClientID) + str(m.ClientHost) + 4 + 4 + 4 + len(m.Subscription) + 4 + len(m.Assignment)
		if m.InstanceID != nil {
			n += len(*m.InstanceID)
		}
	}
	return n
}

// decodeGroupMetadata decodes a group metadata value (versions 0 to 4).
func decodeGroupMetadata(value []byte) (*kmsg.GroupMetadataValue, error) {
	if len(value) < 2 {
		return nil, fmt.Errorf("%w: group metadata value of %d bytes", ErrCorruptOffsetRecord, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > 4 {
		return nil, fmt.Errorf("%w: group metadata value version %d", ErrCorruptOffsetRecord, v)
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("%w: group metadata value: %v", ErrCorruptOffsetRecord, err)
	}
	for _, m := range v.Members {
		if m.MemberID == "" || m.SessionTimeoutMillis <= 0 {
			return nil, fmt.Errorf("%w: group metadata member %q with session timeout %d ms", ErrCorruptOffsetRecord, m.MemberID, m.SessionTimeoutMillis)
		}
	}
	return &v, nil
}

// restore makes g, a group with no members, the generation of v: Stable,
// with v's members, each one's session restarted at now (as Kafka does at
// load) — or, for a v without a leader (stored during a rebalance),
// preparing the next rebalance with them, each one's session counted from
// when v was stored (its CurrentStateTimestamp), though never ending
// sooner than grace (at most its session) after now. Every member must
// join that rebalance again, and one that does is alive whatever its
// session; restarted at each load, the session of a member that stopped
// without leaving (a static member shutting down) would never end while
// coordinators move faster than it, and the rebalance, which waits for it,
// would never complete: kgo's TestGroupETL (cooperative-sticky/static,
// three members, coordinators moving every 8 s) failed its JoinGroup
// after retrying for a session timeout. A v without members or without a
// protocol leaves g as it is. The effects arm the members' session timers.
func (g *groupState) restore(now time.Time, v *kmsg.GroupMetadataValue, grace time.Duration, out []effect) []effect {
	if len(v.Members) == 0 || v.Protocol == nil || *v.Protocol == "" {
		return out
	}
	since := now // when the members' sessions start
	if v.Leader == nil && v.CurrentStateTimestamp > 0 {
		if ts := time.UnixMilli(v.CurrentStateTimestamp); ts.Before(now) {
			since = ts
		}
	}
	g.phase, g.generation, g.stableGeneration = phaseStable, v.Generation, v.Generation
	g.restored = v.Generation
	g.protocolType, g.protocol = v.ProtocolType, *v.Protocol
	for _, vm := range v.Members {
		m := &member{
			id: vm.MemberID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			protocolType:     v.ProtocolType,
			protocols:        []Protocol{{Name: g.protocol, Metadata: slices.Clone(vm.Subscription)}},
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			synced:           true, inGeneration: true, assignment: slices.Clone(vm.Assignment),
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = DefaultRebalanceTimeout
		}
		if vm.InstanceID != nil && *vm.InstanceID != "" {
			m.instanceID = *vm.InstanceID
			g.static[m.instanceID] = m.id
		}
		m.deadline = since.Add(m.sessionTimeout)
		if least := now.Add(min(m.sessionTimeout, grace)); m.deadline.Before(least) {
			m.deadline = least
		}
		g.members[m.id] = m
		out = append(out, effect{kind: effArm, timer: m.id, at: m.deadline})
	}
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	} else {
		g.leader = slices.Sorted(maps.Keys(g.members))[0]
	}
	out = append(out, effect{kind: effLog, msg: "group restored", member: g.leader,
		reason: fmt.Sprintf("generation %d with %d members", g.generation, len(g.members))})
	if v.Leader == nil {
		// Stored while a rebalance was in progress (encodeMetadata): the
		// members must join again, as the last coordinator told those it
		// reached; a member that left may have owned partitions that the
		// others' assignments do not cover.
		out = g.startRebalance(now, "restored during a rebalance", false, out)
	}
	return out
}
