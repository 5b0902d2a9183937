package assign

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/tp"
)

// Names of Kafka's consumer protocol.
const (
	// ProtocolType is the protocol type of Kafka consumers' groups.
	ProtocolType = "consumer"
	// RangeProtocol is the protocol name of Kafka's RangeAssignor.
	RangeProtocol = "range"
)

// ErrMalformed: bytes that are not a ConsumerProtocol metadata or
// assignment.
var ErrMalformed = errors.New("assign: malformed consumer protocol bytes")

// EncodeSubscription returns the ConsumerProtocol metadata (version 0) of a
// member subscribed to topics, with no user data.
func EncodeSubscription(topics []string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = slices.Clone(topics)
	return m.AppendTo(nil)
}

// DecodeSubscription returns the topics of a member's ConsumerProtocol
// metadata, of any version (later versions carry owned partitions, a
// generation and a rack, which the range assignor does not use).
func DecodeSubscription(metadata []byte) ([]string, error) {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrMalformed, err)
	}
	return m.Topics, nil
}

// EncodeAssignment returns the ConsumerProtocol assignment (version 0) of
// the partitions tps, grouped by topic in the order topics first appear.
func EncodeAssignment(tps []tp.TopicPartition) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 0
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{}
	for _, p := range tps {
		i := slices.IndexFunc(a.Topics, func(t kmsg.ConsumerMemberAssignmentTopic) bool { return t.Topic == p.Topic })
		if i < 0 {
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: p.Topic})
			i = len(a.Topics) - 1
		}
		a.Topics[i].Partitions = append(a.Topics[i].Partitions, int32(p.Partition))
	}
	return a.AppendTo(nil)
}

// DecodeAssignment returns the partitions of a ConsumerProtocol assignment,
// sorted. Empty bytes are an empty assignment (what a coordinator answers a
// member the leader gave nothing).
func DecodeAssignment(assignment []byte) ([]tp.TopicPartition, error) {
	out := []tp.TopicPartition{}
	if len(assignment) == 0 {
		return out, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("%w: assignment: %v", ErrMalformed, err)
	}
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			if p < 0 {
				return nil, fmt.Errorf("%w: assignment: partition %d of %q", ErrMalformed, p, t.Topic)
			}
			out = append(out, tp.TopicPartition{Topic: t.Topic, Partition: int(p)})
		}
	}
	slices.SortFunc(out, tp.Compare)
	return slices.CompactFunc(out, func(a, b tp.TopicPartition) bool { return a == b }), nil
}
