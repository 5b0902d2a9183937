package controller

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// NoLeader is PartitionState.Leader of a partition that has no leader
// (offline: no live replica in its ISR and unclean election not allowed).
const NoLeader = -1

// TopicID identifies a topic for all time, as Kafka's topic UUID does: a topic
// deleted and created again under the same name gets a new ID.
type TopicID [16]byte

// String formats the ID as Kafka prints topic IDs: URL-safe base64, no padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether id is the zero ID, which no topic has.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// MarshalText implements encoding.TextMarshaler.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *TopicID) UnmarshalText(b []byte) error {
	var out TopicID
	n, err := base64.RawURLEncoding.Decode(out[:], b)
	if err != nil || n != len(out) || base64.RawURLEncoding.EncodedLen(len(out)) != len(b) {
		return fmt.Errorf("%w: topic id %q", ErrInvalidRequest, b)
	}
	*id = out
	return nil
}

// BrokerInfo is a registered broker as the metadata knows it.
type BrokerInfo struct {
	ID     int
	Addr   string // the broker's data-plane address, as it registered it
	Epoch  int64  // broker epoch: new on every registration, > every earlier one
	Fenced bool   // fenced brokers lead nothing and are in no ISR they could leave
	// Listeners are its client listeners as it registered them (none for
	// a broker whose clients use Addr, or registered before listeners
	// existed). Do not modify.
	Listeners []Endpoint
}

// Listener returns the address the broker advertises on its listener
// called name; false when it has none of that name.
func (b BrokerInfo) Listener(name string) (string, bool) {
	for _, l := range b.Listeners {
		if l.Name == name {
			return l.Addr, true
		}
	}
	return "", false
}

// PartitionState is one partition's replication state (Kafka's
// PartitionRegistration).
type PartitionState struct {
	Partition int
	Replicas  []int // the assignment; Replicas[0] is the preferred leader
	ISR       []int // in-sync replicas, in assignment order; never empty
	Leader    int   // a member of ISR, or NoLeader
	// LeaderEpoch grows by one every time the leader changes.
	LeaderEpoch int32
	// PartitionEpoch grows by one on every change of the partition's state;
	// an AlterPartition must carry the current one.
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas are what a reassignment in
	// progress adds and removes (Kafka's PartitionRegistration, KIP-455):
	// Replicas holds the target replicas, in the target's order, followed
	// by the removing ones. Both empty when no reassignment is in progress.
	AddingReplicas   []int `json:",omitempty"`
	RemovingReplicas []int `json:",omitempty"`
}

// TopicInfo is a topic as the metadata knows it.
type TopicInfo struct {
	Name                  string
	ID                    TopicID
	MinInSyncReplicas     int
	UncleanLeaderElection bool
	Configs               map[string]string // opaque to the controller
	Partitions            []PartitionState
}

// ReplicationFactor is the number of replicas of partition 0.
func (t TopicInfo) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// Image is the cluster metadata at one version: the state every member
// reaches by applying the committed records in order. An *Image returned by a
// Controller is immutable and safe to share; its accessors return copies.
type Image struct {
	version         uint64 // Raft index of the last entry applied
	lastBrokerEpoch int64
	// nextProducerID is the first producer id of the next block to give
	// (everything below it has been given to some broker).
	nextProducerID int64
	brokers        map[int]BrokerInfo
	topics         map[string]*topicState
	topicNames     map[TopicID]string
	// sec is the ACLs, SCRAM credentials and client quotas (security.go);
	// nil: none.
	sec *securityState
	// brokerConfigs are the dynamic broker configs by resource name (""
	// the cluster's defaults, else a broker id; configs.go). The inner
	// maps are replaced, never modified, so images share them.
	brokerConfigs map[string]map[string]string
	// owner marks the topicStates this image may modify in place; clone gives
	// both images new owners so that shared topicStates are copied on write.
	owner *ownerToken
}

type ownerToken struct{ _ byte }

type topicState struct {
	owner   *ownerToken
	name    string
	id      TopicID
	minISR  int
	unclean bool
	configs map[string]string // replaced by a change (configs.go), never modified
	// parts' Replicas and ISR slices are never modified in place: a change
	// replaces them, so copies of parts may share them.
	parts []PartitionState
}

func newImage() *Image {
	return &Image{
		brokers:    make(map[int]BrokerInfo),
		topics:     make(map[string]*topicState),
		topicNames: make(map[TopicID]string),
		owner:      new(ownerToken),
	}
}

// clone returns a copy of img that can be modified independently. It costs
// O(brokers + topics); partitions are copied lazily, per topic, on the first
// write. The caller must have exclusive access to img (clone re-marks it).
func (img *Image) clone() *Image {
	img.owner = new(ownerToken)
	return img.cloneShared()
}

// mutTopic returns the topic named name, copied first if img does not own it.
func (img *Image) mutTopic(name string) *topicState {
	t := img.topics[name]
	if t == nil || t.owner == img.owner {
		return t
	}
	c := *t
	c.owner = img.owner
	c.parts = slices.Clone(t.parts)
	img.topics[name] = &c
	return &c
}

// Version is the Raft log index of the last metadata entry in the image;
// every change makes it larger.
func (img *Image) Version() uint64 { return img.version }

// NextProducerID is the first producer id not yet given to any broker:
// every block of producer ids allocated so far lies below it.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// Broker returns the broker with the given ID.
func (img *Image) Broker(id int) (BrokerInfo, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Brokers returns every registered broker, by ID.
func (img *Image) Brokers() []BrokerInfo {
	out := make([]BrokerInfo, 0, len(img.brokers))
	for _, b := range img.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Topics returns the names of all topics, sorted.
func (img *Image) Topics() []string {
	out := make([]string, 0, len(img.topics))
	for name := range img.topics {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Topic returns the topic named name.
func (img *Image) Topic(name string) (TopicInfo, bool) {
	t, ok := img.topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return t.info(), true
}

// TopicByID returns the topic with the given ID.
func (img *Image) TopicByID(id TopicID) (TopicInfo, bool) {
	name, ok := img.topicNames[id]
	if !ok {
		return TopicInfo{}, false
	}
	return img.Topic(name)
}

// PartitionCount returns the number of partitions of topic (false: no such
// topic) without copying the topic's state, as Topic does: what a member
// routing each request asks.
func (img *Image) PartitionCount(topic string) (int, bool) {
	t, ok := img.topics[topic]
	if !ok {
		return 0, false
	}
	return len(t.parts), true
}

// Leader returns the leader of one partition, NoLeader while it has none,
// without copying any state (false: no such topic or partition).
func (img *Image) Leader(topic string, partition int) (int, bool) {
	p := img.partition(topic, partition)
	if p == nil {
		return NoLeader, false
	}
	return p.Leader, true
}

// Partition returns the state of one partition.
func (img *Image) Partition(topic string, partition int) (PartitionState, bool) {
	p := img.partition(topic, partition)
	if p == nil {
		return PartitionState{}, false
	}
	return p.clone(), true
}

// partition returns the image's own state of one partition, not to be
// changed; nil if there is no such topic or partition.
func (img *Image) partition(topic string, partition int) *PartitionState {
	t, ok := img.topics[topic]
	if !ok || partition < 0 || partition >= len(t.parts) {
		return nil
	}
	return &t.parts[partition]
}

func (t *topicState) info() TopicInfo {
	parts := make([]PartitionState, len(t.parts))
	for i, p := range t.parts {
		parts[i] = p.clone()
	}
	return TopicInfo{
		Name:                  t.name,
		ID:                    t.id,
		MinInSyncReplicas:     t.minISR,
		UncleanLeaderElection: t.unclean,
		Configs:               maps.Clone(t.configs),
		Partitions:            parts,
	}
}

func (p PartitionState) clone() PartitionState {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	return p
}

// live reports whether broker id is registered and not fenced.
func (img *Image) live(id int) bool {
	b, ok := img.brokers[id]
	return ok && !b.Fenced
}

// liveBrokers returns the IDs of the unfenced brokers, ascending.
func (img *Image) liveBrokers() []int {
	var out []int
	for id, b := range img.brokers {
		if !b.Fenced {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// sortedTopics returns the topics in name order, for deterministic decisions.
func (img *Image) sortedTopics() []*topicState {
	out := make([]*topicState, 0, len(img.topics))
	for _, t := range img.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
