package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

// CreateTopic creates a topic through the controller. It returns once the
// topic is committed, every partition has a leader and every live member
// has applied it — its replicas exist, its leaders lead — so that a
// Producer on any member can send to it at once.
//
// In a cluster that is forming, a replication factor no larger than the
// number of voters waits, within ctx, for enough members to register (as
// a Kafka client retries INVALID_REPLICATION_FACTOR while brokers start);
// past ctx the error says how many of how many are registered. A factor
// larger than the voters is log.ErrInvalidConfig at once.
func (b *Broker) CreateTopic(ctx context.Context, name string, cfg log.TopicConfig) error {
	if err := log.ValidTopicName(name); err != nil {
		return err
	}
	if err := cfg.WithDefaults().Validate(); err != nil { // Kafka's bounds, as a standalone broker's
		return err
	}
	spec := controller.TopicSpec{
		Partitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor,
		MinInSyncReplicas: cfg.MinInSyncReplicas, Configs: encodeTopicConfig(cfg),
	}
	var t controller.TopicInfo
	backoff := 10 * time.Millisecond
	for {
		ch := b.metaWatch()
		var err error
		t, err = b.ctl.CreateTopic(ctx, name, spec)
		if err == nil {
			break
		}
		if !errors.Is(err, controller.ErrInvalidReplicationFactor) || cfg.ReplicationFactor > max(len(b.cfg.Peers), len(b.img.Load().Brokers())) {
			return controllerErr(err)
		}
		// Not enough live brokers yet: wait for the next registration.
		timer := time.NewTimer(backoff)
		select {
		case <-ch:
		case <-timer.C:
			backoff = min(2*backoff, 250*time.Millisecond)
		case <-ctx.Done():
			timer.Stop()
			live, registered := b.brokerCounts()
			return fmt.Errorf("%w: topic %s: replication factor %d: %d of the %d voters registered, %d live: %w",
				log.ErrInvalidReplicationFactor, name, cfg.ReplicationFactor, registered, len(b.cfg.Peers), live, ctx.Err())
		case <-b.ctx.Done():
			timer.Stop()
			return log.ErrClosed
		}
		timer.Stop()
	}
	return b.awaitTopic(ctx, t, "topic "+name+" created")
}

// brokerCounts returns how many brokers are live (registered and
// unfenced) and registered, as this member knows.
func (b *Broker) brokerCounts() (live, registered int) {
	for _, bi := range b.img.Load().Brokers() {
		registered++
		if !bi.Fenced {
			live++
		}
	}
	return live, registered
}

// awaitTopic waits until t (as committed) has a leader for every
// partition in this member's metadata and every live member has applied
// it; what says what was done, for the error when ctx ends first.
func (b *Broker) awaitTopic(ctx context.Context, t controller.TopicInfo, what string) error {
	for {
		ch := b.metaWatch()
		img := b.img.Load()
		if got, ok := img.TopicByID(t.ID); ok && len(got.Partitions) >= len(t.Partitions) && allLed(got) {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("replica: %s, but not every partition has a leader yet: %w", what, ctx.Err())
		case <-b.ctx.Done():
			return log.ErrClosed
		}
	}
	pending := b.liveOthers()
	backoff := 2 * time.Millisecond
	for {
		pending = b.notYetApplied(ctx, t, pending)
		if len(pending) == 0 {
			return nil
		}
		timer := time.NewTimer(backoff)
		select {
		case <-timer.C:
			backoff = min(2*backoff, 100*time.Millisecond)
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("replica: %s, but members %v have not applied it yet: %w", what, pending, ctx.Err())
		case <-b.ctx.Done():
			timer.Stop()
			return log.ErrClosed
		}
	}
}

// liveOthers returns the live members other than this one.
func (b *Broker) liveOthers() []int {
	var ids []int
	for _, bi := range b.img.Load().Brokers() {
		if !bi.Fenced && bi.ID != b.cfg.ID {
			ids = append(ids, bi.ID)
		}
	}
	return ids
}

// notYetApplied returns the members of ids that do not know t's partition
// count yet. A member applies a topic's every partition in one image, and
// answers for the topic only after it has opened its replicas, so one
// ListOffset tells: any answer but "unknown topic" (an offset, "not the
// leader") means it has. A member that cannot be reached is not waited
// for (it is down, or cut off: it fetches the metadata when back).
func (b *Broker) notYetApplied(ctx context.Context, t controller.TopicInfo, ids []int) []int {
	var pending []int
	tp := log.TopicPartition{Topic: t.Name, Partition: len(t.Partitions) - 1}
	for _, id := range ids {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := b.tr.ListOffset(pctx, id, tp, log.LatestOffset)
		cancel()
		if errors.Is(err, log.ErrUnknownTopic) || errors.Is(err, log.ErrUnknownPartition) {
			pending = append(pending, id)
		}
	}
	return pending
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
	case errors.Is(err, controller.ErrInvalidReplicationFactor):
		return fmt.Errorf("%w: %w", log.ErrInvalidReplicationFactor, err)
	case errors.Is(err, controller.ErrInvalidPartitions):
		return fmt.Errorf("%w: %w", log.ErrInvalidPartitions, err)
	case errors.Is(err, controller.ErrInvalidRequest), errors.Is(err, controller.ErrInvalidConfig):
		return fmt.Errorf("%w: %w", log.ErrInvalidConfig, err)
	}
	return err
}

// CreateTopicContext is CreateTopic.
//
// Deprecated: use CreateTopic, which takes the context. Kept so that code
// written against the older Broker compiles.
func (b *Broker) CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error {
	return b.CreateTopic(ctx, name, cfg)
}

// CreateTopicContext is CreateTopic (kafka.Backend).
func (b kafkaBackend) CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error {
	return b.CreateTopic(ctx, name, cfg)
}

// DeleteTopic deletes a topic through the controller, within ctx and until
// the member closes; every member removes its replicas as it applies the
// change. An unknown topic is log.ErrUnknownTopic.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)()
	return controllerErr(b.ctl.DeleteTopic(ctx, name))
}

// DeleteTopicContext is the member's DeleteTopic (kafka.Backend), within
// ctx (the request's timeout) and at most Config.ProduceTimeout.
func (b kafkaBackend) DeleteTopicContext(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProduceTimeout)
	defer cancel()
	return b.Broker.DeleteTopic(ctx, name)
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
func (kafkaBackend) GroupCoordinator() *group.Coordinator { return nil }
