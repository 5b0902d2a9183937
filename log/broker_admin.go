package log

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Administration of existing topics (Kafka's CreatePartitions,
// IncrementalAlterConfigs, DeleteRecords): a Topic is never changed in
// place once published (its methods read it without a lock), so each of
// these builds a new Topic and swaps it into b.topics under b.mu, after
// topics.json says so.

// topicOverrides is what of cfg, as given to CreateTopic, was set on the
// topic: every field but the partition count and the replication factor,
// which are not configs.
func topicOverrides(cfg TopicConfig) TopicConfig {
	cfg.Partitions, cfg.ReplicationFactor = 0, 0
	return cfg
}

// derivedOverrides is what a topics.json written before overrides were
// kept is taken to have set on a topic: the fields of cfg that differ from
// the broker's defaults, so that an AlterTopicConfig keeps them.
func derivedOverrides(cfg, defaults TopicConfig) TopicConfig {
	var out TopicConfig
	c, d, o := reflect.ValueOf(cfg), reflect.ValueOf(defaults), reflect.ValueOf(&out).Elem()
	for i := 0; i < c.NumField(); i++ {
		if !c.Field(i).Equal(d.Field(i)) {
			o.Field(i).Set(c.Field(i))
		}
	}
	return topicOverrides(out)
}

// appendOverridesJSON appends the "overrides" member of topics.json (the
// topics with any, one a line) and closes the document. The member is
// always written, possibly empty: its absence marks a file from before
// overrides were kept (see load).
func appendOverridesJSON(buf []byte, names []string, topics map[string]*Topic) ([]byte, error) {
	buf = append(buf, ",\n  \"overrides\": {"...)
	first := true
	for _, name := range names {
		o := topics[name].overrides
		if o == (TopicConfig{}) {
			continue
		}
		data, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, "\n    \""...)
		buf = append(buf, name...)
		buf = append(buf, "\": "...)
		buf = append(buf, data...)
	}
	if !first {
		buf = append(buf, "\n  "...)
	}
	return append(buf, "}\n}\n"...), nil
}

// deriveMissingOverrides gives every topic of a topics.json without an
// "overrides" member the overrides its configuration implies. Called by
// load, before the broker is shared.
func (b *Broker) deriveMissingOverrides(meta topicsMeta) {
	if meta.Overrides != nil {
		return
	}
	defaults := b.cfg.DefaultTopic.WithDefaults()
	for name, t := range b.topics {
		if internalTopic(name) {
			continue
		}
		t.overrides = derivedOverrides(t.cfg, defaults)
	}
}

// editableTopic returns the named user topic for an administrative change.
// Holds b.mu.
func (b *Broker) editableTopic(name, what string) (*Topic, error) {
	if err := ValidTopicName(name); err != nil {
		return nil, err
	}
	if internalTopic(name) {
		return nil, fmt.Errorf("%w: %s is internal", ErrInvalidTopic, name)
	}
	if b.closed {
		return nil, fmt.Errorf("log: %s %s: %w", what, name, ErrClosed)
	}
	t, ok := b.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return t, nil
}

// publishTopic replaces a topic by next and writes topics.json; on a write
// error the old topic is put back. Holds b.mu.
func (b *Broker) publishTopic(old, next *Topic) error {
	b.topics[next.name] = next
	if err := b.writeTopics(); err != nil {
		b.topics[old.name] = old
		return err
	}
	return nil
}

// CreatePartitions grows a topic to count partitions in all (Kafka's
// CreatePartitions: the total, not the number to add). The new partitions
// are empty and have the topic's configuration; Partitions, producers and
// group assignments see them from the return on. A count not above the
// current one is ErrInvalidPartitions, an unknown topic ErrUnknownTopic,
// the internal OffsetsTopic ErrInvalidTopic; each changes nothing. A
// standalone broker creates them at once: ctx is only checked before.
//
// The partitions are created before topics.json names them: a crash in
// between leaves directories the next Open removes (removeStrays).
func (b *Broker) CreatePartitions(ctx context.Context, topic string, count int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.editableTopic(topic, "create partitions of")
	if err != nil {
		return err
	}
	if count <= len(t.parts) {
		return fmt.Errorf("%w: %s has %d partitions, asked for %d", ErrInvalidPartitions, topic, len(t.parts), count)
	}
	if _, err := partitionDirName(topic, count-1); err != nil {
		return err
	}
	next := &Topic{name: t.name, cfg: t.cfg, overrides: t.overrides}
	next.cfg.Partitions = count
	next.parts = append(make([]*Partition, 0, count), t.parts...)
	fail := func(err error) error {
		for _, p := range next.parts[len(t.parts):] {
			b.store.RemovePartition(p.topic, p.id)
		}
		return fmt.Errorf("log: create partitions of %s: %w", topic, err)
	}
	for i := len(t.parts); i < count; i++ {
		// A directory left by a crash before topics.json named it.
		if err := b.store.RemovePartition(topic, i); err != nil && !errors.Is(err, ErrUnknownPartition) {
			return fail(err)
		}
		p, err := b.store.CreatePartition(topic, i, next.cfg)
		if err != nil {
			return fail(err)
		}
		next.parts = append(next.parts, p)
	}
	if err := b.publishTopic(t, next); err != nil {
		return fail(err)
	}
	return nil
}

// TopicOverrides returns the configuration set on the topic itself (given
// to CreateTopic or AlterTopicConfig): its non-zero fields; the zero ones
// follow the broker's DefaultTopic and Kafka's defaults. Partitions and
// ReplicationFactor are always zero. A Kafka server reports the configs
// set here as DYNAMIC_TOPIC_CONFIG.
func (b *Broker) TopicOverrides(name string) (TopicConfig, error) {
	t, err := b.Topic(name)
	if err != nil {
		return TopicConfig{}, err
	}
	return t.overrides, nil
}

// AlterTopicConfig replaces the configuration set on a topic by overrides
// (zero fields: the default again), as Kafka's IncrementalAlterConfigs
// leaves it: the topic's configuration becomes overrides over the broker's
// DefaultTopic and Kafka's defaults, with its partition count and
// replication factor kept. It is written to topics.json and then applied
// to the partitions at once: appends (max.message.bytes, compression,
// segment rolls), retention and the cleaner see it from their next step.
// The index sizes (MaxIndexBytes, IndexIntervalBytes) apply to segments
// made after the next Open.
//
// Overrides with Partitions or ReplicationFactor set, or that make an
// invalid configuration, are ErrInvalidConfig; an unknown topic
// ErrUnknownTopic; the internal OffsetsTopic ErrInvalidTopic; each
// changes nothing.
func (b *Broker) AlterTopicConfig(name string, overrides TopicConfig) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, next, err := b.alteredTopic(name, overrides)
	if err != nil {
		return err
	}
	if err := b.publishTopic(t, next); err != nil {
		return fmt.Errorf("log: alter config of %s: %w", name, err)
	}
	for _, p := range next.parts {
		p.setConfig(next.cfg)
	}
	return nil
}

// ValidateTopicConfig checks what AlterTopicConfig(name, overrides) would
// do, changing nothing (Kafka's validate_only).
func (b *Broker) ValidateTopicConfig(name string, overrides TopicConfig) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, _, err := b.alteredTopic(name, overrides)
	return err
}

// alteredTopic returns the topic name and what it would be with
// overrides. Holds b.mu.
func (b *Broker) alteredTopic(name string, overrides TopicConfig) (old, next *Topic, err error) {
	if overrides.Partitions != 0 || overrides.ReplicationFactor != 0 {
		return nil, nil, fmt.Errorf("%w: partitions and replication factor are not topic configs", ErrInvalidConfig)
	}
	t, err := b.editableTopic(name, "alter config of")
	if err != nil {
		return nil, nil, err
	}
	cfg := overrides.merge(b.topicDefaults()).WithDefaults()
	cfg.Partitions, cfg.ReplicationFactor = t.cfg.Partitions, t.cfg.ReplicationFactor
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	return t, &Topic{name: name, cfg: cfg, overrides: overrides, parts: t.parts}, nil
}

// setConfig replaces the partition's configuration. The writer lock orders
// it with appends, retention and truncations; readers of config() see the
// old or the new one whole.
func (p *Partition) setConfig(cfg TopicConfig) {
	p.editConfig(func(c *TopicConfig) { *c = cfg })
}

// editConfig changes the partition's configuration with f, as setConfig.
func (p *Partition) editConfig(f func(*TopicConfig)) {
	p.mu.Lock()
	c := *p.config()
	f(&c)
	p.conf.Store(&c)
	p.mu.Unlock()
}

// DeleteRecords moves the log start offset of a partition to offset
// (Kafka's DeleteRecords; -1: the high watermark) and returns the new low
// watermark. See Partition.DeleteRecordsBefore. The internal OffsetsTopic
// is ErrInvalidTopic. A standalone broker deletes at once: ctx is only
// checked before.
func (b *Broker) DeleteRecords(ctx context.Context, tp TopicPartition, offset int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if internalTopic(tp.Topic) {
		return 0, fmt.Errorf("%w: %s is internal", ErrInvalidTopic, tp.Topic)
	}
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return 0, err
	}
	return p.DeleteRecordsBefore(offset)
}

// EndOffsetForEpoch answers Kafka's OffsetForLeaderEpoch for a partition:
// see Partition.EndOffsetForEpoch.
func (b *Broker) EndOffsetForEpoch(tp TopicPartition, epoch int32) (leaderEpoch int32, endOffset int64, err error) {
	p, err := b.Partition(tp.Topic, tp.Partition)
	if err != nil {
		return 0, 0, err
	}
	if p.closed.Load() {
		return 0, 0, p.closedErr()
	}
	e, off := p.EndOffsetForEpoch(epoch)
	return e, off, nil
}
