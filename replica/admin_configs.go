package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// A member's topic configs after creation and DeleteRecords (log.Admin,
// and the Kafka server's IncrementalAlterConfigs, AlterConfigs and
// DeleteRecords): a topic's configuration is metadata (its
// topicConfigKey), changed through the controller so every member applies
// the same one (apply sets it on the replicas it holds); DeleteRecords
// moves the log start at the partition's leader, and the followers follow
// it as they fetch.

var (
	_ log.Admin                = (*Broker)(nil)
	_ kafka.TopicConfigAlterer = kafkaBackend{}
	_ kafka.RecordsDeleter     = kafkaBackend{}
)

// TopicOverrides returns the configuration set on a topic itself, at its
// creation or since (log.ErrUnknownTopic). Partitions and
// ReplicationFactor are not configs and are zero.
func (b *Broker) TopicOverrides(topic string) (log.TopicConfig, error) {
	t, ok := b.img.Load().Topic(topic)
	if !ok {
		return log.TopicConfig{}, fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
	}
	return overridesOf(t), nil
}

func overridesOf(t controller.TopicInfo) log.TopicConfig {
	var o log.TopicConfig
	if raw, ok := t.Configs[topicConfigKey]; ok {
		_ = json.Unmarshal([]byte(raw), &o)
	}
	o.Partitions, o.ReplicationFactor = 0, 0
	return o
}

// alteredTopicConfig checks overrides against topic t and returns the
// metadata value that holds them.
func alteredTopicConfig(t controller.TopicInfo, overrides log.TopicConfig) (string, error) {
	if overrides.Partitions != 0 || overrides.ReplicationFactor != 0 {
		return "", fmt.Errorf("%w: partitions and replication factor are not topic configs", log.ErrInvalidConfig)
	}
	if strings.HasPrefix(t.Name, "__") {
		return "", fmt.Errorf("%w: %s is internal", log.ErrInvalidTopic, t.Name)
	}
	// min.insync.replicas is the controller's (its ISR decisions): set at
	// creation, not changed here; left out, it stays.
	if m := overrides.MinInSyncReplicas; m != 0 && m != t.MinInSyncReplicas {
		return "", fmt.Errorf("%w: min.insync.replicas of a cluster's topic is set when it is created (%d for %s)", log.ErrInvalidConfig, t.MinInSyncReplicas, t.Name)
	}
	overrides.MinInSyncReplicas = overridesOf(t).MinInSyncReplicas
	cfg := overrides.WithDefaults()
	cfg.Partitions, cfg.ReplicationFactor, cfg.MinInSyncReplicas = len(t.Partitions), t.ReplicationFactor(), t.MinInSyncReplicas
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	raw, err := json.Marshal(overrides)
	return string(raw), err
}

// ValidateTopicConfig reports what AlterTopicConfig would, changing
// nothing.
func (b *Broker) ValidateTopicConfig(topic string, overrides log.TopicConfig) error {
	t, ok := b.img.Load().Topic(topic)
	if !ok {
		return fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
	}
	_, err := alteredTopicConfig(t, overrides)
	return err
}

// AlterTopicConfig replaces the configuration set on a topic (zero
// fields: back to the default) through the controller, as a standalone
// Broker's AlterTopicConfig does: every member applies it to the replicas
// it holds. It returns once this member has. An invalid configuration is
// log.ErrInvalidConfig (min.insync.replicas included: a cluster's topic
// keeps the one it was created with), an unknown topic
// log.ErrUnknownTopic; neither changes anything. It waits at most
// Config.ProduceTimeout.
func (b *Broker) AlterTopicConfig(topic string, overrides log.TopicConfig) error {
	t, ok := b.img.Load().Topic(topic)
	if !ok {
		return fmt.Errorf("%w: %s", log.ErrUnknownTopic, topic)
	}
	raw, err := alteredTopicConfig(t, overrides)
	if err != nil {
		return err
	}
	ctx, cancel := kafkaBackend{b}.securityContext(context.Background())
	defer cancel()
	errs, v, err := b.ctl.AlterConfigs(ctx, []controller.ConfigAlteration{{
		Type: controller.TopicConfigs, Name: topic, Set: map[string]string{topicConfigKey: raw},
	}})
	if err != nil {
		return controllerErr(err)
	}
	if errs[0] != nil {
		return controllerErr(errs[0])
	}
	return kafkaBackend{b}.applied(ctx, v)
}

// DeleteRecords makes the records of tp below offset (-1: the high
// watermark) unreadable at the partition's leader and returns the new log
// start offset (log.Admin); the followers move theirs as they fetch.
// Past the high watermark it is an *log.OffsetOutOfRangeError; an
// internal topic is log.ErrInvalidTopic.
func (b *Broker) DeleteRecords(ctx context.Context, tp log.TopicPartition, offset int64) (int64, error) {
	if strings.HasPrefix(tp.Topic, "__") {
		return 0, fmt.Errorf("%w: %s is internal", log.ErrInvalidTopic, tp.Topic)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ProduceTimeout)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)()
	var low int64
	err := b.route(ctx, tp, func(leader int) (err error) {
		if leader == b.cfg.ID {
			low, err = b.deleteRecordsLocal(ctx, tp, offset)
		} else {
			low, err = b.tr.DeleteRecords(ctx, leader, tp, offset)
		}
		return err
	})
	return low, err
}

// deleteRecordsLocal moves the log start of tp, which this member leads.
func (b *Broker) deleteRecordsLocal(ctx context.Context, tp log.TopicPartition, offset int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if strings.HasPrefix(tp.Topic, "__") {
		return 0, fmt.Errorf("%w: %s is internal", log.ErrInvalidTopic, tp.Topic)
	}
	ps := b.part(tp)
	if ps == nil || !ps.leading.Load() {
		return 0, b.notHereErr(tp)
	}
	return ps.p.DeleteRecordsBefore(offset)
}

// DeleteRecords answers the Kafka server's DeleteRecords where this member
// leads the partition (NOT_LEADER_OR_FOLLOWER elsewhere: the client asks
// the leader).
func (b kafkaBackend) DeleteRecords(ctx context.Context, tp log.TopicPartition, offset int64) (int64, error) {
	return b.deleteRecordsLocal(ctx, tp, offset)
}

// DeleteTopicContext is DeleteTopic, under log.Admin's name.
func (b *Broker) DeleteTopicContext(ctx context.Context, name string) error {
	return b.DeleteTopic(ctx, name)
}

// applyTopicConfig sets the topic's configuration in the metadata on ps's
// log when it is not the one set last (a change, or a replica opened from
// disk with what it was created with).
func (b *Broker) applyTopicConfig(ps *partState, cfg log.TopicConfig) {
	if ps.cfg == cfg {
		return
	}
	full := cfg.WithDefaults()
	if err := full.Validate(); err != nil {
		b.log.Error("replica: a topic's configuration in the metadata is invalid", "partition", ps.tp, "err", err)
		return
	}
	ps.p.SetConfig(full)
	ps.cfg = cfg
}
