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

// CreateTopicContext creates a topic, as CreateTopic does; a standalone
// broker creates it at once, so ctx is only checked before.
func (b *Broker) CreateTopicContext(ctx context.Context, name string, cfg TopicConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.CreateTopic(name, cfg)
	return err
}
