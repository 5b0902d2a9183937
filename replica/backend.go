package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

// CreateTopic creates a topic through the controller and returns once its
// metadata is committed and applied on this member and every partition
// has a leader.
func (b *Broker) CreateTopic(ctx context.Context, name string, cfg log.TopicConfig) error {
	if err := log.ValidTopicName(name); err != nil {
		return err
	}
	if err := cfg.WithDefaults().Validate(); err != nil { // Kafka's bounds, as a standalone broker's
		return err
	}
	t, err := b.ctl.CreateTopic(ctx, name, controller.TopicSpec{
		Partitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor,
		MinInSyncReplicas: cfg.MinInSyncReplicas, Configs: encodeTopicConfig(cfg),
	})
	if err != nil {
		return controllerErr(err)
	}
	for {
		ch := b.metaWatch()
		if got, ok := b.img.Load().TopicByID(t.ID); ok && allLed(got) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("replica: topic %s created, but not every partition has a leader yet: %w", name, ctx.Err())
		case <-b.ctx.Done():
			return log.ErrClosed
		}
	}
}

func allLed(t controller.TopicInfo) bool {
	for _, p := range t.Partitions {
		if p.Leader == controller.NoLeader {
			return false
		}
	}
	return true
}

// controllerErr maps the controller's sentinels to log's.
func controllerErr(err error) error {
	switch {
	case errors.Is(err, controller.ErrTopicExists):
		return fmt.Errorf("%w: %w", log.ErrTopicExists, err)
	case errors.Is(err, controller.ErrUnknownTopic):
		return fmt.Errorf("%w: %w", log.ErrUnknownTopic, err)
	case errors.Is(err, controller.ErrInvalidTopic):
		return fmt.Errorf("%w: %w", log.ErrInvalidTopic, err)
	case errors.Is(err, controller.ErrInvalidReplicationFactor), errors.Is(err, controller.ErrInvalidPartitions),
		errors.Is(err, controller.ErrInvalidRequest), errors.Is(err, controller.ErrInvalidConfig):
		return fmt.Errorf("%w: %w", log.ErrInvalidConfig, err)
	}
	return err
}

// CreateTopicContext is CreateTopic (kafka.Backend).
func (b *Broker) CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error {
	return b.CreateTopic(ctx, name, cfg)
}

// DeleteTopic deletes a topic through the controller; every member
// removes its replicas as it applies the change.
func (b *Broker) DeleteTopic(name string) error {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.ProduceTimeout)
	defer cancel()
	return controllerErr(b.ctl.DeleteTopic(ctx, name))
}

// Topics returns the names of the topics, sorted.
func (b *Broker) Topics() []string { return b.img.Load().Topics() }

// TopicConfig returns a topic's configuration as created.
func (b *Broker) TopicConfig(topic string) (log.TopicConfig, error) {
	t, ok := b.img.Load().Topic(topic)
	if !ok {
		return log.TopicConfig{}, fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
	}
	return topicConfigOf(t).WithDefaults(), nil
}

// GroupCoordinator returns nil: a member has no one coordinator for every
// group but one per __consumer_offsets partition it leads, which its
// kafka.Server finds per group through CoordinatorFor (kafka.GroupRouter,
// groups.go).
func (b *Broker) GroupCoordinator() *group.Coordinator { return nil }
