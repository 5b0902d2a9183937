// Package tp names one partition of a topic: the key that producers,
// consumers, groups, the Kafka protocol and the cluster all share. It is
// small on purpose so that every layer can import it.
package tp

import (
	"cmp"
	"strconv"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int
}

// String is "topic-partition", the name of the partition's directory.
func (p TopicPartition) String() string { return p.Topic + "-" + strconv.Itoa(p.Partition) }

// Compare orders by topic, then partition number (for slices.SortFunc).
func Compare(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}
