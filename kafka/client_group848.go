package kafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/tp"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer group protocol (KIP-848) of the Client: ConsumerHeartbeat
// sends Kafka's ConsumerGroupHeartbeat to the group's coordinator, so that
// a log.Consumer with GroupProtocolConsumer runs over kafka.Dial against
// Strata or any Kafka 4. The wire names topics by id: the Client learns
// the ids from Metadata (v10+), as Kafka's consumer does, and asks again
// when it meets one it does not know.

// clientConsumerGroupHeartbeatMax: v1 (Kafka 4, KIP-1082) has the member
// make its own id.
const clientConsumerGroupHeartbeatMax = 1

var _ log.ConsumerGroupClient = (*Client)(nil)

// topicIDs is what the Client knows of the cluster's topic ids.
type topicIDs struct {
	mu     sync.Mutex
	byName map[string][16]byte
	byID   map[[16]byte]string
}

// ConsumerHeartbeat joins (MemberEpoch 0), keeps in, or leaves (-1, -2
// for a static member) a consumer-protocol group, with Kafka's
// ConsumerGroupHeartbeat at the group's coordinator, with the semantics of
// group.Coordinator.ConsumerHeartbeat. A join without a MemberID is given
// one made here (a Kafka 4 client makes its own, base64 of 16 random
// bytes). A RebalanceTimeout below 0 (or 0 after the join) says
// "unchanged", as -1 does on the wire; SubscribedTopics and Owned nil say
// the same. Assigned partitions of a topic whose id the cluster's metadata
// does not name (yet) are left out of the response until it does: the
// coordinator sends the whole assignment again on the next heartbeat that
// reports what the member owns. The request's ClientID and ClientHost are
// not sent: the coordinator knows them from the connection.
func (c *Client) ConsumerHeartbeat(ctx context.Context, req group.ConsumerHeartbeatRequest) (group.ConsumerHeartbeatResponse, error) {
	kr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	kr.Group, kr.MemberID, kr.MemberEpoch = req.Group, req.MemberID, req.MemberEpoch
	if kr.MemberID == "" && req.MemberEpoch == 0 {
		kr.MemberID = newMemberID()
	}
	if req.InstanceID != "" {
		kr.InstanceID = kmsg.StringPtr(req.InstanceID)
	}
	if req.RackID != "" {
		kr.RackID = kmsg.StringPtr(req.RackID)
	}
	switch {
	case req.RebalanceTimeout > 0:
		kr.RebalanceTimeoutMillis = int32(min(req.RebalanceTimeout.Milliseconds(), 1<<31-1))
	case req.RebalanceTimeout == 0 && req.MemberEpoch == 0:
		kr.RebalanceTimeoutMillis = int32(group.DefaultRebalanceTimeout / time.Millisecond)
	default:
		kr.RebalanceTimeoutMillis = -1
	}
	kr.SubscribedTopicNames = slices.Clone(req.SubscribedTopics)
	kr.SubscribedTopicRegex = req.SubscribedTopicRegex
	if req.ServerAssignor != "" {
		kr.ServerAssignor = kmsg.StringPtr(req.ServerAssignor)
	}
	if req.Owned != nil {
		topics, err := c.ownedByID(ctx, req.Owned)
		if err != nil {
			return group.ConsumerHeartbeatResponse{}, fmt.Errorf("kafka: consumer group heartbeat to %q: %w", req.Group, err)
		}
		kr.Topics = topics
	}
	resp, err := c.groupDo(ctx, req.Group, false, kr, clientConsumerGroupHeartbeatMax, func(r kmsg.Response) int16 {
		return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	})
	if err != nil {
		return group.ConsumerHeartbeatResponse{}, fmt.Errorf("kafka: consumer group heartbeat to %q: %w", req.Group, err)
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	if err := codeError(r.ErrorCode); err != nil {
		if r.ErrorMessage != nil && *r.ErrorMessage != "" {
			return group.ConsumerHeartbeatResponse{}, fmt.Errorf("kafka: consumer group heartbeat to %q: %w (%s)", req.Group, err, *r.ErrorMessage)
		}
		return group.ConsumerHeartbeatResponse{}, fmt.Errorf("kafka: consumer group heartbeat to %q: %w", req.Group, err)
	}
	out := group.ConsumerHeartbeatResponse{
		MemberID:          kr.MemberID,
		MemberEpoch:       r.MemberEpoch,
		HeartbeatInterval: time.Duration(r.HeartbeatIntervalMillis) * time.Millisecond,
	}
	if r.MemberID != nil && *r.MemberID != "" {
		out.MemberID = *r.MemberID
	}
	if r.Assignment != nil {
		if out.Assignment, err = c.assignmentByName(ctx, r.Assignment.Topics); err != nil {
			return group.ConsumerHeartbeatResponse{}, fmt.Errorf("kafka: consumer group heartbeat to %q: %w", req.Group, err)
		}
	}
	return out, nil
}

// newMemberID makes a member id as a Kafka 4 client does: 16 random bytes,
// base64 (URL alphabet, no padding), as Kafka's Uuid prints.
func newMemberID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ownedByID turns the partitions a member owns into the request's topics
// by id; a topic the metadata does not name (deleted) is left out, as
// nothing of it can be held any more.
func (c *Client) ownedByID(ctx context.Context, owned []log.TopicPartition) ([]kmsg.ConsumerGroupHeartbeatRequestTopic, error) {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if len(owned) == 0 {
		return out, nil
	}
	names := make([]string, 0, len(owned))
	for _, p := range owned {
		names = append(names, p.Topic)
	}
	ids, _, err := c.topicIDsFor(ctx, names, nil)
	if err != nil {
		return nil, err
	}
	sorted := slices.Clone(owned)
	slices.SortFunc(sorted, tp.Compare)
	for _, p := range sorted {
		id, ok := ids[p.Topic]
		if !ok {
			continue
		}
		if n := len(out); n == 0 || out[n-1].TopicID != id {
			out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: []int32{}})
		}
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, int32(p.Partition))
	}
	return out, nil
}

// assignmentByName turns an assignment by topic id into partitions by
// name, sorted; never nil.
func (c *Client) assignmentByName(ctx context.Context, topics []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic) ([]log.TopicPartition, error) {
	out := []log.TopicPartition{}
	if len(topics) == 0 {
		return out, nil
	}
	ids := make([][16]byte, 0, len(topics))
	for _, t := range topics {
		ids = append(ids, t.TopicID)
	}
	_, names, err := c.topicIDsFor(ctx, nil, ids)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		name, ok := names[t.TopicID]
		if !ok {
			continue // not in the metadata yet: sent again later
		}
		for _, p := range t.Partitions {
			out = append(out, log.TopicPartition{Topic: name, Partition: int(p)})
		}
	}
	slices.SortFunc(out, tp.Compare)
	return out, nil
}

// topicIDsFor returns the ids of the named topics and the names of the
// ids, from what the Client knows, asking the cluster's metadata again
// once if any is missing. What the metadata does not name is left out.
func (c *Client) topicIDsFor(ctx context.Context, names []string, ids [][16]byte) (map[string][16]byte, map[[16]byte]string, error) {
	lookup := func() (map[string][16]byte, map[[16]byte]string, bool) {
		c.ids.mu.Lock()
		defer c.ids.mu.Unlock()
		byName, byID, all := map[string][16]byte{}, map[[16]byte]string{}, true
		for _, n := range names {
			id, ok := c.ids.byName[n]
			if ok {
				byName[n] = id
			}
			all = all && ok
		}
		for _, id := range ids {
			n, ok := c.ids.byID[id]
			if ok {
				byID[id] = n
			}
			all = all && ok
		}
		return byName, byID, all
	}
	byName, byID, all := lookup()
	if all {
		return byName, byID, nil
	}
	if err := c.loadTopicIDs(ctx); err != nil {
		return nil, nil, err
	}
	byName, byID, _ = lookup()
	return byName, byID, nil
}

// loadTopicIDs asks any broker for every topic's id (Metadata v10+).
func (c *Client) loadTopicIDs(ctx context.Context) error {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
	resp, err := bc.doWithin(ctx, req, clientMetadataMax, min(metadataTimeout, c.requestTimeout()))
	if err != nil {
		return fmt.Errorf("kafka: metadata (topic ids): %w", err)
	}
	m := resp.(*kmsg.MetadataResponse)
	if m.Version < 10 {
		return fmt.Errorf("kafka: %s answers Metadata v%d, without topic ids (v10+)", bc.addr, m.Version)
	}
	byName, byID := map[string][16]byte{}, map[[16]byte]string{}
	for _, t := range m.Topics {
		if t.Topic == nil || t.ErrorCode != errNone || t.TopicID == ([16]byte{}) {
			continue
		}
		byName[*t.Topic], byID[t.TopicID] = t.TopicID, *t.Topic
	}
	c.ids.mu.Lock()
	c.ids.byName, c.ids.byID = byName, byID
	c.ids.mu.Unlock()
	return nil
}
