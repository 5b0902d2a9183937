package log

import "sort"

// CreateOffsetsTopic creates OffsetsTopic if it does not exist yet, as
// Kafka creates __consumer_offsets when a client first looks for a group
// coordinator (FindCoordinator), rather than at the first commit. A Kafka
// server over the broker calls it from FindCoordinator, so that Kafka
// clients see the internal topic in Metadata once they have looked for a
// coordinator.
func (b *Broker) CreateOffsetsTopic() error {
	_, err := b.offsetsPartition()
	return err
}

// groupTopicNames are the topics a consumer group's regular expression
// (KIP-848) is resolved against: every topic, internal ones included, as
// Kafka's coordinator resolves them against its whole metadata image.
func (b *Broker) groupTopicNames() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.topics))
	for name := range b.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
