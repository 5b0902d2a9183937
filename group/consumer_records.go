package group

import (
	"maps"
	"slices"
	"time"

	"github.com/strata-log/strata/group/assign"
)

// The records of a consumer-protocol group in __consumer_offsets, as
// Kafka 4 writes them; each record's key version is its type.
type recKind uint8

const (
	recGroupEpoch    recKind = 3  // ConsumerGroupMetadata: the group epoch
	recPartitionMeta recKind = 4  // ConsumerGroupPartitionMetadata: the subscribed topics
	recMember        recKind = 5  // ConsumerGroupMemberMetadata: a member's subscription
	recTargetMeta    recKind = 6  // ConsumerGroupTargetAssignmentMetadata: the assignment epoch
	recTargetMember  recKind = 7  // ConsumerGroupTargetAssignmentMember: a member's target
	recCurrent       recKind = 8  // ConsumerGroupCurrentMemberAssignment: a member's reconciliation
	recRegex         recKind = 16 // ConsumerGroupRegularExpression: a resolved regex
)

// cgRec is one record of a consumer group: kind and, by kind, its key
// (member or regex) and value; tombstone for a null value.
type cgRec struct {
	kind      recKind
	member    string // recMember, recTargetMember, recCurrent
	regex     string // recRegex
	tombstone bool

	epoch       int32                   // recGroupEpoch, recTargetMeta
	topics      map[string]assign.Topic // recPartitionMeta
	ids         map[[16]byte]string     // recPartitionMeta, decoded: the topics' ids
	sub         *subscription           // recMember
	partitions  assign.Partitions       // recTargetMember
	current     *currentAssignment      // recCurrent
	regexTopics []string                // recRegex
	version     int64                   // recRegex
	at          time.Time               // recRegex
}

// apply changes the group as the record says (Kafka's replay). A group
// epoch tombstone is the group's deletion: the driver drops the group.
func (g *consumerGroup) apply(r cgRec) {
	switch r.kind {
	case recGroupEpoch:
		if !r.tombstone {
			g.epoch = r.epoch
		}
	case recPartitionMeta:
		g.topics = map[string]assign.Topic{}
		if !r.tombstone {
			for t, md := range r.topics {
				g.topics[t] = md
			}
		}
	case recTargetMeta:
		if !r.tombstone {
			g.assignmentEpoch = r.epoch
		}
	case recTargetMember:
		if r.tombstone {
			delete(g.target, r.member)
		} else {
			g.target[r.member] = r.partitions.Clone()
		}
	case recRegex:
		if r.tombstone {
			delete(g.regexes, r.regex)
		} else {
			g.regexes[r.regex] = resolvedRegex{topics: slices.Clone(r.regexTopics), version: r.version, at: r.at}
		}
	case recMember:
		m := g.members[r.member]
		if r.tombstone {
			if m != nil {
				g.release(m)
				if g.static[m.instanceID] == m.id {
					delete(g.static, m.instanceID)
				}
				delete(g.members, r.member)
			}
			return
		}
		m = g.getOrCreate(r.member)
		if m.instanceID != "" && g.static[m.instanceID] == m.id {
			delete(g.static, m.instanceID)
		}
		m.subscription = *r.sub
		m.topics = slices.Clone(r.sub.topics)
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	case recCurrent:
		m := g.members[r.member]
		if r.tombstone {
			if m != nil {
				g.release(m)
				m.currentAssignment = currentAssignment{}
			}
			return
		}
		m = g.getOrCreate(r.member)
		g.release(m)
		m.currentAssignment = *r.current
		m.assigned, m.revoking = m.assigned.Clone(), m.revoking.Clone()
		for t, ps := range m.assigned {
			for _, p := range ps {
				g.owners[tpID{t, p}] = owner{m.id, m.epoch}
			}
		}
		for t, ps := range m.revoking {
			for _, p := range ps {
				g.owners[tpID{t, p}] = owner{m.id, m.epoch}
			}
		}
	}
}

func (g *consumerGroup) getOrCreate(id string) *consumerMember {
	m := g.members[id]
	if m == nil {
		m = &consumerMember{id: id, subscription: subscription{rebalanceTimeout: -1}}
		g.members[id] = m
	}
	return m
}

// release forgets the partitions m holds.
func (g *consumerGroup) release(m *consumerMember) {
	for _, ps := range []assign.Partitions{m.assigned, m.revoking} {
		for t, parts := range ps {
			for _, p := range parts {
				if o, ok := g.owners[tpID{t, p}]; ok && o.member == m.id {
					delete(g.owners, tpID{t, p})
				}
			}
		}
	}
}

// consumerReplay rebuilds consumer groups from the records of
// __consumer_offsets, in offset order.
type consumerReplay struct {
	cfg    consumerConfig
	ids    topicIDs
	groups map[string]*consumerGroup
	// learned maps the topic ids of the partition metadata records read
	// so far to their names, for the topics ids no longer knows (deleted
	// since).
	learned map[[16]byte]string
}

func newConsumerReplay(cfg consumerConfig, ids topicIDs) *consumerReplay {
	return &consumerReplay{cfg: cfg, ids: ids, groups: map[string]*consumerGroup{}, learned: map[[16]byte]string{}}
}

func (r *consumerReplay) name(id [16]byte) (string, bool) {
	if n, ok := r.learned[id]; ok {
		return n, true
	}
	return r.ids.Name(id)
}

// add applies one record: errNotConsumerRecord if it is not a consumer
// group's, ErrCorruptOffsetRecord if it does not decode.
func (r *consumerReplay) add(key, value []byte) error {
	group, rec, err := decodeConsumerRecord(key, value, r.name)
	if err != nil {
		return err
	}
	maps.Copy(r.learned, rec.ids)
	g := r.groups[group]
	if rec.kind == recGroupEpoch && rec.tombstone {
		delete(r.groups, group) // the group was deleted
		return nil
	}
	if g == nil && rec.tombstone {
		return nil // of a group deleted already
	}
	if g == nil {
		g = newConsumerGroup(group, r.cfg)
		r.groups[group] = g
	}
	g.apply(rec)
	return nil
}
