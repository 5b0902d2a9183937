package controller

import (
	"fmt"
	"maps"
	"slices"
)

// The metadata records: the only things the Raft log holds. A record says
// what happened, with every value it sets, so applying it needs no decision
// (Kafka's KRaft records, trimmed to what Strata uses).
type record interface {
	recordType() recordType
}

type recordType uint8

const (
	typeRegisterBroker  recordType = 1
	typeFenceBroker     recordType = 2
	typeUnfenceBroker   recordType = 3
	typeTopic           recordType = 4
	typePartition       recordType = 5
	typePartitionChange recordType = 6
	typeRemoveTopic     recordType = 7
	typeProducerIDs     recordType = 8
	// typeRegisterBrokerListeners is a registerBrokerRecord with client
	// listeners; one without keeps typeRegisterBroker's layout, so the
	// records of a cluster without listeners are what they always were.
	typeRegisterBrokerListeners recordType = 9
	typeUnregisterBroker        recordType = 10
	// typeConfig (11) is a configRecord (configs.go).
	// Reassignments (reassign.go): typePartitionMoving is a partitionRecord
	// of a partition with a reassignment in progress (snapshots); one
	// without keeps typePartition's layout.
	typePartitionReassign recordType = 20
	typePartitionMoving   recordType = 21
)

// registerBrokerRecord: broker ID (re)registered with a new epoch. The broker
// starts fenced; a heartbeat unfences it.
type registerBrokerRecord struct {
	ID        int
	Epoch     int64
	Addr      string
	Listeners []Endpoint // nil: none (and the record has the old layout)
}

// fenceBrokerRecord: the broker with this epoch is fenced.
type fenceBrokerRecord struct {
	ID    int
	Epoch int64
}

// unfenceBrokerRecord: the broker with this epoch is unfenced (alive).
type unfenceBrokerRecord struct {
	ID    int
	Epoch int64
}

// topicRecord: a topic is created, with no partitions yet; partitionRecords
// follow in the same entry.
type topicRecord struct {
	Name    string
	ID      TopicID
	MinISR  int
	Unclean bool
	Configs map[string]string
}

// partitionRecord: a new partition of a topic, with its whole state. Its
// number must be the topic's current partition count.
type partitionRecord struct {
	TopicID TopicID
	State   PartitionState
}

// partitionChangeRecord: a partition's leader and/or ISR change. It carries
// the resulting state: PartitionEpoch is the current one + 1, LeaderEpoch the
// current one (+ 1 when Leader changes).
type partitionChangeRecord struct {
	TopicID        TopicID
	Partition      int
	Leader         int
	ISR            []int
	LeaderEpoch    int32
	PartitionEpoch int32
}

// removeTopicRecord: the topic and all its partitions are deleted.
type removeTopicRecord struct {
	TopicID TopicID
}

// producerIDsRecord: broker BrokerID (at BrokerEpoch) was given the block
// of producer ids that ends just below NextProducerID (Kafka's
// ProducerIdsRecord, KIP-730). NextProducerID only grows, so no id is in two
// blocks, across controller failovers and restarts included.
type producerIDsRecord struct {
	BrokerID       int
	BrokerEpoch    int64
	NextProducerID int64
}

func (r registerBrokerRecord) recordType() recordType {
	if len(r.Listeners) > 0 {
		return typeRegisterBrokerListeners
	}
	return typeRegisterBroker
}
func (fenceBrokerRecord) recordType() recordType      { return typeFenceBroker }
func (unfenceBrokerRecord) recordType() recordType    { return typeUnfenceBroker }
func (topicRecord) recordType() recordType            { return typeTopic }
func (partitionChangeRecord) recordType() recordType  { return typePartitionChange }
func (removeTopicRecord) recordType() recordType      { return typeRemoveTopic }
func (producerIDsRecord) recordType() recordType      { return typeProducerIDs }
func (unregisterBrokerRecord) recordType() recordType { return typeUnregisterBroker }

func (r partitionRecord) recordType() recordType {
	if r.State.moving() {
		return typePartitionMoving
	}
	return typePartition
}

// apply applies one record to img in place. A record that does not fit the
// image (wrong epoch, unknown topic, ...) is rejected with errInapplicable
// and changes nothing.
func (img *Image) apply(r record) error {
	switch r := r.(type) {
	case registerBrokerRecord:
		if r.ID <= 0 || r.Epoch <= img.lastBrokerEpoch {
			return fmt.Errorf("%w: register broker %d epoch %d (last epoch %d)", errInapplicable, r.ID, r.Epoch, img.lastBrokerEpoch)
		}
		img.brokers[r.ID] = BrokerInfo{ID: r.ID, Addr: r.Addr, Listeners: slices.Clone(r.Listeners), Epoch: r.Epoch, Fenced: true}
		img.lastBrokerEpoch = r.Epoch
	case fenceBrokerRecord:
		b, ok := img.brokers[r.ID]
		if !ok || b.Epoch != r.Epoch {
			return fmt.Errorf("%w: fence broker %d epoch %d", errInapplicable, r.ID, r.Epoch)
		}
		b.Fenced = true
		img.brokers[r.ID] = b
	case unfenceBrokerRecord:
		b, ok := img.brokers[r.ID]
		if !ok || b.Epoch != r.Epoch {
			return fmt.Errorf("%w: unfence broker %d epoch %d", errInapplicable, r.ID, r.Epoch)
		}
		b.Fenced = false
		img.brokers[r.ID] = b
	case topicRecord:
		if _, ok := img.topics[r.Name]; ok || r.ID.IsZero() || r.Name == "" {
			return fmt.Errorf("%w: create topic %q", errInapplicable, r.Name)
		}
		if _, ok := img.topicNames[r.ID]; ok {
			return fmt.Errorf("%w: topic id %s reused", errInapplicable, r.ID)
		}
		img.topics[r.Name] = &topicState{
			owner: img.owner, name: r.Name, id: r.ID, minISR: r.MinISR, unclean: r.Unclean,
			configs: maps.Clone(r.Configs),
		}
		img.topicNames[r.ID] = r.Name
	case partitionRecord:
		name, ok := img.topicNames[r.TopicID]
		if !ok {
			return fmt.Errorf("%w: partition of unknown topic %s", errInapplicable, r.TopicID)
		}
		t := img.topics[name]
		s := r.State
		if s.Partition != len(t.parts) || !validState(s.Replicas, s.ISR, s.Leader) || !validMoving(s.Replicas, s.AddingReplicas, s.RemovingReplicas) {
			return fmt.Errorf("%w: new partition %s-%d", errInapplicable, name, s.Partition)
		}
		t = img.mutTopic(name)
		t.parts = append(t.parts, s.clone())
	case partitionChangeRecord:
		name, ok := img.topicNames[r.TopicID]
		if !ok {
			return fmt.Errorf("%w: change of unknown topic %s", errInapplicable, r.TopicID)
		}
		t := img.topics[name]
		if r.Partition < 0 || r.Partition >= len(t.parts) {
			return fmt.Errorf("%w: change of unknown partition %s-%d", errInapplicable, name, r.Partition)
		}
		cur := t.parts[r.Partition]
		wantLE := cur.LeaderEpoch
		if r.Leader != cur.Leader {
			wantLE++
		}
		if r.PartitionEpoch != cur.PartitionEpoch+1 || r.LeaderEpoch != wantLE || !validState(cur.Replicas, r.ISR, r.Leader) {
			return fmt.Errorf("%w: change of %s-%d at partition epoch %d", errInapplicable, name, r.Partition, cur.PartitionEpoch)
		}
		t = img.mutTopic(name)
		t.parts[r.Partition] = PartitionState{
			Partition:      r.Partition,
			Replicas:       cur.Replicas,
			ISR:            slices.Clone(r.ISR),
			Leader:         r.Leader,
			LeaderEpoch:    r.LeaderEpoch,
			PartitionEpoch: r.PartitionEpoch,
			// A reassignment in progress goes on (reassign.go).
			AddingReplicas: cur.AddingReplicas, RemovingReplicas: cur.RemovingReplicas,
		}
	case partitionReassignRecord:
		return img.applyReassign(r)
	case removeTopicRecord:
		name, ok := img.topicNames[r.TopicID]
		if !ok {
			return fmt.Errorf("%w: remove unknown topic %s", errInapplicable, r.TopicID)
		}
		delete(img.topics, name)
		delete(img.topicNames, r.TopicID)
	case producerIDsRecord:
		if r.NextProducerID <= img.nextProducerID {
			return fmt.Errorf("%w: producer ids up to %d, already given up to %d", errInapplicable, r.NextProducerID, img.nextProducerID)
		}
		img.nextProducerID = r.NextProducerID
	case unregisterBrokerRecord:
		b, ok := img.brokers[r.ID]
		if !ok || b.Epoch != r.Epoch {
			return fmt.Errorf("%w: unregister broker %d epoch %d", errInapplicable, r.ID, r.Epoch)
		}
		delete(img.brokers, r.ID)
	case aclRecord, removeACLRecord, scramRecord, removeSCRAMRecord, quotaRecord:
		return img.applySecurity(r) // security.go
	case configRecord:
		return img.applyConfig(r) // configs.go
	default:
		return fmt.Errorf("%w: record type %T", errInapplicable, r)
	}
	return nil
}

// validState: replicas distinct and non-empty, isr a non-empty subset of
// replicas without duplicates, leader in isr or NoLeader.
func validState(replicas, isr []int, leader int) bool {
	if len(replicas) == 0 || len(isr) == 0 {
		return false
	}
	seen := make(map[int]bool, len(replicas))
	for _, r := range replicas {
		if r <= 0 || seen[r] {
			return false
		}
		seen[r] = true
	}
	inISR := make(map[int]bool, len(isr))
	for _, r := range isr {
		if !seen[r] || inISR[r] {
			return false
		}
		inISR[r] = true
	}
	return leader == NoLeader || inISR[leader]
}
