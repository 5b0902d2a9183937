package log

import "context"

// The methods a Kafka-protocol server (package kafka) needs beyond Client,
// in the shape a cluster member can implement too.

// TopicConfig returns a topic's configuration, defaults applied.
func (b *Broker) TopicConfig(name string) (TopicConfig, error) {
	t, err := b.Topic(name)
	if err != nil {
		return TopicConfig{}, err
	}
	return t.Config(), nil
}

// CreateTopicContext creates a topic, as CreateTopic does, for a caller
// that holds a context (kafka.Backend: a cluster member's creation waits on
// its quorum); a standalone broker creates it at once, so ctx is only
// checked before. CreateTopic is the verb to call on a *Broker.
func (b *Broker) CreateTopicContext(ctx context.Context, name string, cfg TopicConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.CreateTopic(name, cfg)
	return err
}

// DeleteTopicContext deletes a topic, as DeleteTopic does, for a caller
// that holds a context (kafka.Backend); a standalone broker deletes it at
// once, so ctx is only checked before.
func (b *Broker) DeleteTopicContext(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.DeleteTopic(name)
}

// BorrowsBatches reports that Produce and ProduceBatch keep no part of the
// batch they are given once they return (kafka.BatchBorrower): it is
// validated and written to the partition's segment, not kept. (The
// in-process Producer's batches, which a broker may keep for its readers,
// take another path.)
func (b *Broker) BorrowsBatches() bool { return true }
