package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The decisions: pure functions of (image, event) → records. They never
// modify the image; the driver applies the records they return (first to its
// working image, then, once committed, every member to its own).

// BrokerRegistration is what a broker sends when it starts.
type BrokerRegistration struct {
	ID   int    // > 0, unique in the cluster
	Addr string // the broker's data-plane address, recorded for other brokers
	// Listeners are the broker's client listeners (Kafka's
	// BrokerRegistration endpoints), by name, each with the address
	// clients are given; none: clients use Addr. Names are unique.
	Listeners []Endpoint `json:",omitempty"`
}

// Endpoint is one named listener of a broker and the host:port it
// advertises (Kafka's BrokerEndpoint).
type Endpoint struct {
	Name string
	Addr string
}

// HeartbeatRequest is what a registered broker sends every HeartbeatInterval.
type HeartbeatRequest struct {
	BrokerID    int
	BrokerEpoch int64 // from RegisterBroker
	// WantFence asks to be (or stay) fenced: a broker that is shutting down, or
	// that has not caught up with the metadata since it registered, sets it.
	// A heartbeat without it unfences a fenced broker.
	WantFence bool
}

// HeartbeatResponse tells the broker whether it is fenced.
type HeartbeatResponse struct {
	Fenced bool
}

// TopicSpec is what CreateTopic needs. Its zero value is the defaults.
type TopicSpec struct {
	Partitions            int  // 0 → 1
	ReplicationFactor     int  // 0 → 1; at most the number of live brokers
	MinInSyncReplicas     int  // 0 → 1; at most ReplicationFactor
	UncleanLeaderElection bool // elect a leader outside the ISR rather than go offline
	Configs               map[string]string
}

// AlterPartitionRequest is a partition leader's proposal of a new ISR
// (Kafka's AlterPartition). It is accepted only from the current leader with
// the current leader epoch and partition epoch.
type AlterPartitionRequest struct {
	BrokerID       int
	BrokerEpoch    int64
	Topic          string
	Partition      int
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int
}

const (
	maxTopicNameLen = 249     // Kafka's limit
	maxPartitions   = 1 << 16 // per topic; guards the controller against absurd requests
)

// validTopicName applies Kafka's rules: 1..249 characters of [a-zA-Z0-9._-],
// not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has illegal character %q", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

// decideRegisterBroker registers a broker with a new epoch, fenced. A broker
// that registers again while unfenced (it restarted before its session
// expired) is fenced first, so it leaves every ISR: its log may have lost
// what it had acknowledged.
func decideRegisterBroker(img *Image, reg BrokerRegistration) ([]record, error) {
	if reg.ID <= 0 || reg.Addr == "" {
		return nil, fmt.Errorf("%w: broker registration needs an ID > 0 and an address (got %d, %q)", ErrInvalidRequest, reg.ID, reg.Addr)
	}
	for i, l := range reg.Listeners {
		if l.Name == "" || l.Addr == "" {
			return nil, fmt.Errorf("%w: broker %d listener %d needs a name and an address (got %q, %q)", ErrInvalidRequest, reg.ID, i, l.Name, l.Addr)
		}
		for _, o := range reg.Listeners[:i] {
			if o.Name == l.Name {
				return nil, fmt.Errorf("%w: broker %d has two listeners named %q", ErrInvalidRequest, reg.ID, l.Name)
			}
		}
	}
	var listeners []Endpoint // nil when none: the record keeps its old layout
	if len(reg.Listeners) > 0 {
		listeners = slices.Clone(reg.Listeners)
	}
	var recs []record
	if img.live(reg.ID) {
		recs = fenceBroker(img, reg.ID)
	}
	return append(recs, registerBrokerRecord{ID: reg.ID, Epoch: img.lastBrokerEpoch + 1, Addr: reg.Addr, Listeners: listeners}), nil
}

// decideHeartbeat checks the broker's epoch and fences or unfences it as it
// asks.
func decideHeartbeat(img *Image, hb HeartbeatRequest) ([]record, HeartbeatResponse, error) {
	b, ok := img.brokers[hb.BrokerID]
	if !ok {
		return nil, HeartbeatResponse{}, fmt.Errorf("%w: %d", ErrUnknownBroker, hb.BrokerID)
	}
	if b.Epoch != hb.BrokerEpoch {
		return nil, HeartbeatResponse{}, fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleBrokerEpoch, hb.BrokerID, hb.BrokerEpoch, b.Epoch)
	}
	switch {
	case b.Fenced && !hb.WantFence:
		return unfenceBroker(img, b.ID), HeartbeatResponse{Fenced: false}, nil
	case !b.Fenced && hb.WantFence:
		return fenceBroker(img, b.ID), HeartbeatResponse{Fenced: true}, nil
	}
	return nil, HeartbeatResponse{Fenced: b.Fenced}, nil
}

// decideFenceExpired fences every unfenced broker whose session deadline is
// not after now. deadlines is the active controller's soft state: the time
// each broker's session expires, renewed by its heartbeats.
func decideFenceExpired(img *Image, deadlines map[int]time.Time, now time.Time) []record {
	var recs []record
	for _, id := range img.liveBrokers() {
		if d, ok := deadlines[id]; ok && !d.After(now) {
			recs = append(recs, fenceBroker(img.withFenced(recs), id)...)
		}
	}
	return recs
}

// withFenced returns img itself when recs is empty, otherwise a copy with
// recs applied, so that one decision can build on the records of another in
// the same batch.
func (img *Image) withFenced(recs []record) *Image {
	if len(recs) == 0 {
		return img
	}
	c := img.cloneShared()
	for _, r := range recs {
		_ = c.apply(r)
	}
	return c
}

// cloneShared is clone for a short-lived private copy: it leaves img's owner
// alone, so it is safe on an image others read, and the copy never writes to
// a topicState it shares with img (it has its own owner).
func (img *Image) cloneShared() *Image {
	return &Image{
		version:         img.version,
		lastBrokerEpoch: img.lastBrokerEpoch,
		nextProducerID:  img.nextProducerID,
		brokers:         maps.Clone(img.brokers),
		topics:          maps.Clone(img.topics),
		topicNames:      maps.Clone(img.topicNames),
		sec:             img.sec, // copied on write (security.go)
		brokerConfigs:   maps.Clone(img.brokerConfigs),
		owner:           new(ownerToken),
	}
}

// fenceBroker fences broker id (registered, unfenced): it leaves every ISR
// (except where it is the last member: an ISR never becomes empty), each
// partition it led gets a new leader (electLeader), and then it is marked
// fenced.
func fenceBroker(img *Image, id int) []record {
	acceptable := func(r int) bool { return r != id && img.live(r) }
	fence := fenceBrokerRecord{ID: id, Epoch: img.brokers[id].Epoch}
	fenced := img.withFenced([]record{fence}) // moves complete as of after the fence
	var recs []record
	for _, t := range img.sortedTopics() {
		for _, p := range t.parts {
			if !slices.Contains(p.ISR, id) {
				continue
			}
			if r, ok := partitionChange(t, p, id, acceptable); ok {
				recs = append(recs, finishMove(fenced, r))
			}
		}
	}
	return append(recs, fence)
}

// unfenceBroker unfences broker id (registered, fenced) and elects leaders
// for the leaderless partitions it can now lead.
func unfenceBroker(img *Image, id int) []record {
	recs := []record{unfenceBrokerRecord{ID: id, Epoch: img.brokers[id].Epoch}}
	acceptable := func(r int) bool { return r == id || img.live(r) }
	unfenced := img.withFenced(recs)
	for _, t := range img.sortedTopics() {
		for _, p := range t.parts {
			if !slices.Contains(p.Replicas, id) {
				continue
			}
			if p.Leader == NoLeader {
				if r, ok := partitionChange(t, p, 0, acceptable); ok {
					recs = append(recs, finishMove(unfenced, r))
				}
				continue
			}
			// A move waiting for a live target replica may complete now
			// (reassign.go).
			if p.moving() {
				r := partitionChangeRecord{TopicID: t.id, Partition: p.Partition, Leader: p.Leader, ISR: p.ISR,
					LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1}
				if m, ok := finishMove(unfenced, r).(partitionReassignRecord); ok {
					recs = append(recs, m)
				}
			}
		}
	}
	return recs
}

// partitionChange removes broker remove (0: none) from p's ISR, re-elects
// the leader if needed, and returns the record, or false if nothing changes.
func partitionChange(t *topicState, p PartitionState, remove int, acceptable func(int) bool) (partitionChangeRecord, bool) {
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int) bool { return r == remove })
	leader, isr := electLeader(p.Replicas, isr, p.Leader, acceptable, t.unclean)
	if len(isr) == 0 {
		isr = p.ISR // never shrink the ISR to nothing: its last member is the best candidate
	}
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return partitionChangeRecord{}, false
	}
	le := p.LeaderEpoch
	if leader != p.Leader {
		le++
	}
	return partitionChangeRecord{
		TopicID: t.id, Partition: p.Partition, Leader: leader, ISR: isr,
		LeaderEpoch: le, PartitionEpoch: p.PartitionEpoch + 1,
	}, true
}

// electLeader picks a partition's leader given its (new) ISR: the current
// leader if it is still in the ISR and acceptable; otherwise the first
// replica in assignment order that is in the ISR and acceptable; otherwise,
// if unclean election is allowed, the first acceptable replica, with the ISR
// reset to just it; otherwise NoLeader. It returns the leader and the ISR.
func electLeader(replicas, isr []int, current int, acceptable func(int) bool, unclean bool) (int, []int) {
	if current != NoLeader && slices.Contains(isr, current) && acceptable(current) {
		return current, isr
	}
	for _, r := range replicas {
		if slices.Contains(isr, r) && acceptable(r) {
			return r, isr
		}
	}
	if unclean {
		for _, r := range replicas {
			if acceptable(r) {
				return r, []int{r}
			}
		}
	}
	return NoLeader, isr
}

// withDefaults fills the zero fields of a TopicSpec and validates it.
func (s TopicSpec) withDefaults() (TopicSpec, error) {
	if s.Partitions == 0 {
		s.Partitions = 1
	}
	if s.ReplicationFactor == 0 {
		s.ReplicationFactor = 1
	}
	if s.MinInSyncReplicas == 0 {
		s.MinInSyncReplicas = 1
	}
	switch {
	case s.Partitions < 0 || s.Partitions > maxPartitions:
		return s, fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidPartitions, s.Partitions, maxPartitions)
	case s.ReplicationFactor < 0:
		return s, fmt.Errorf("%w: %d", ErrInvalidReplicationFactor, s.ReplicationFactor)
	case s.MinInSyncReplicas < 0 || s.MinInSyncReplicas > s.ReplicationFactor:
		return s, fmt.Errorf("%w: min in-sync replicas %d with replication factor %d", ErrInvalidConfig, s.MinInSyncReplicas, s.ReplicationFactor)
	}
	for k := range s.Configs {
		if k == "" {
			return s, fmt.Errorf("%w: empty topic config key", ErrInvalidConfig)
		}
	}
	return s, nil
}

// decideCreateTopic creates a topic: a new ID, replicas assigned over the
// live brokers by Kafka's rack-unaware rule from a random start, each
// partition led by its first replica with all replicas in the ISR.
func decideCreateTopic(img *Image, name string, spec TopicSpec, rnd Rand) ([]record, error) {
	if err := validTopicName(name); err != nil {
		return nil, err
	}
	if _, ok := img.topics[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	live := img.liveBrokers()
	if spec.ReplicationFactor > len(live) {
		return nil, fmt.Errorf("%w: %d larger than the %d live brokers", ErrInvalidReplicationFactor, spec.ReplicationFactor, len(live))
	}
	id := newTopicID(img, rnd)
	recs := []record{topicRecord{Name: name, ID: id, MinISR: spec.MinInSyncReplicas, Unclean: spec.UncleanLeaderElection, Configs: spec.Configs}}
	for p, replicas := range assignReplicas(live, spec.Partitions, spec.ReplicationFactor, -1, 0, rnd) {
		recs = append(recs, newPartitionRecord(id, p, replicas))
	}
	return recs, nil
}

func newPartitionRecord(id TopicID, p int, replicas []int) partitionRecord {
	return partitionRecord{TopicID: id, State: PartitionState{
		Partition: p, Replicas: replicas, ISR: slices.Clone(replicas), Leader: replicas[0],
	}}
}

// newTopicID draws a topic ID that is not zero and not in use.
func newTopicID(img *Image, rnd Rand) TopicID {
	for {
		var id TopicID
		for i := 0; i < len(id); i += 8 {
			v := rnd.Uint64()
			for j := 0; j < 8; j++ {
				id[i+j] = byte(v >> (8 * j))
			}
		}
		if _, used := img.topicNames[id]; !used && !id.IsZero() {
			return id
		}
	}
}

// decideCreatePartitions grows a topic to total partitions. As Kafka's
// AdminUtils.addPartitions does, the new partitions continue the assignment
// with a fixed start index: the position, among the live brokers, of the
// first one whose ID is >= partition 0's first replica. Their replication
// factor is partition 0's.
func decideCreatePartitions(img *Image, name string, total int) ([]record, error) {
	t, ok := img.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	cur := len(t.parts)
	if total <= cur || total > maxPartitions {
		return nil, fmt.Errorf("%w: topic %q has %d partitions, asked for %d (want %d..%d)", ErrInvalidPartitions, name, cur, total, cur+1, maxPartitions)
	}
	live := img.liveBrokers()
	rf := len(t.parts[0].Replicas)
	if rf > len(live) {
		return nil, fmt.Errorf("%w: %d larger than the %d live brokers", ErrInvalidReplicationFactor, rf, len(live))
	}
	start := 0
	for i, b := range live {
		if b >= t.parts[0].Replicas[0] {
			start = i
			break
		}
	}
	var recs []record
	for i, replicas := range assignReplicas(live, total-cur, rf, start, cur, nil) {
		recs = append(recs, newPartitionRecord(t.id, cur+i, replicas))
	}
	return recs, nil
}

// decideDeleteTopic deletes a topic.
func decideDeleteTopic(img *Image, name string) ([]record, error) {
	t, ok := img.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return []record{removeTopicRecord{TopicID: t.id}}, nil
}

// decideAlterPartition validates a leader's ISR proposal as Kafka's
// controller does (broker epoch, leadership, leader epoch, partition epoch,
// then the ISR itself) and, if it changes the ISR, records it with the
// partition epoch + 1. The ISR is stored in assignment order.
func decideAlterPartition(img *Image, req AlterPartitionRequest) ([]record, error) {
	b, ok := img.brokers[req.BrokerID]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownBroker, req.BrokerID)
	}
	if b.Epoch != req.BrokerEpoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d, current %d", ErrStaleBrokerEpoch, req.BrokerID, req.BrokerEpoch, b.Epoch)
	}
	t, ok := img.topics[req.Topic]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, req.Topic)
	}
	if req.Partition < 0 || req.Partition >= len(t.parts) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, req.Topic, req.Partition)
	}
	p := t.parts[req.Partition]
	switch {
	case p.Leader != req.BrokerID:
		return nil, fmt.Errorf("%w: %s-%d is led by %d, not %d", ErrNotPartitionLeader, req.Topic, req.Partition, p.Leader, req.BrokerID)
	case req.LeaderEpoch != p.LeaderEpoch:
		return nil, fmt.Errorf("%w: %s-%d leader epoch %d, current %d", ErrFencedLeaderEpoch, req.Topic, req.Partition, req.LeaderEpoch, p.LeaderEpoch)
	case req.PartitionEpoch != p.PartitionEpoch:
		return nil, fmt.Errorf("%w: %s-%d partition epoch %d, current %d", ErrStalePartitionEpoch, req.Topic, req.Partition, req.PartitionEpoch, p.PartitionEpoch)
	}
	if !validState(p.Replicas, req.ISR, p.Leader) {
		return nil, fmt.Errorf("%w: %v for %s-%d with replicas %v and leader %d", ErrInvalidISR, req.ISR, req.Topic, req.Partition, p.Replicas, p.Leader)
	}
	for _, r := range req.ISR {
		if !img.live(r) {
			return nil, fmt.Errorf("%w: broker %d in %v", ErrIneligibleReplica, r, req.ISR)
		}
	}
	isr := make([]int, 0, len(req.ISR))
	for _, r := range p.Replicas {
		if slices.Contains(req.ISR, r) {
			isr = append(isr, r)
		}
	}
	if slices.Equal(isr, p.ISR) {
		return nil, nil
	}
	return []record{finishMove(img, partitionChangeRecord{ // reassign.go
		TopicID: t.id, Partition: p.Partition, Leader: p.Leader, ISR: isr,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
	})}, nil
}
