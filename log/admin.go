package log

import "context"

// Admin is the topic administration that *Broker and *kafka.Client (any
// Kafka-protocol cluster: a Strata broker or cluster, Apache Kafka, over
// the network) share, so a program's admin code runs unchanged against
// either. Errors are log's sentinels, testable
// with errors.Is (ErrTopicExists, ErrUnknownTopic, ErrInvalidConfig,
// ErrInvalidPartitions, ErrOffsetOutOfRange), whichever side answered.
type Admin interface {
	// Partitions returns the number of partitions of a topic.
	Partitions(ctx context.Context, topic string) (int, error)
	// TopicConfig returns a topic's configuration, defaults applied.
	TopicConfig(topic string) (TopicConfig, error)
	// CreateTopicContext creates a topic with cfg (zero fields: the
	// defaults).
	CreateTopicContext(ctx context.Context, name string, cfg TopicConfig) error
	// DeleteTopicContext deletes a topic and its data.
	DeleteTopicContext(ctx context.Context, name string) error
	// CreatePartitions grows topic to count partitions in all.
	CreatePartitions(ctx context.Context, topic string, count int) error
	// TopicOverrides returns the configuration set on the topic itself.
	TopicOverrides(topic string) (TopicConfig, error)
	// AlterTopicConfig replaces the configuration set on the topic (zero
	// fields: back to the default).
	AlterTopicConfig(topic string, overrides TopicConfig) error
	// DeleteRecords makes the records of tp below offset (-1: the high
	// watermark) unreadable and returns the new log start offset.
	DeleteRecords(ctx context.Context, tp TopicPartition, offset int64) (lowWatermark int64, err error)
}

var _ Admin = (*Broker)(nil)
