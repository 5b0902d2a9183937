package log

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/strata-log/strata/vfs"
)

// Dynamic topic defaults: Kafka's dynamic broker configs of the log
// (log.retention.ms, log.segment.bytes, ...; kafka-configs.sh --entity-type
// brokers), which a running broker changes for every topic that does not
// set the config itself. Two scopes, as in Kafka: the cluster-wide
// defaults (--entity-default) and this broker's own (--entity-name <id>),
// which win over them. Both win over Config.DefaultTopic, the static
// broker configuration. They are kept in broker-configs.json of the data
// dir (temp file fsynced, renamed, dir fsynced), and every topic's
// configuration is computed again from its overrides when they change and
// when the broker opens.

// brokerDefaultsFile holds the dynamic topic defaults.
const brokerDefaultsFile = "broker-configs.json"

// DefaultsScope is which dynamic defaults an alteration replaces.
type DefaultsScope uint8

const (
	// ClusterDefaults are the cluster-wide dynamic broker configs (Kafka's
	// BROKER resource named "").
	ClusterDefaults DefaultsScope = iota
	// NodeDefaults are this broker's own (a BROKER resource named by its
	// node id): they win over ClusterDefaults.
	NodeDefaults
)

// dynamicDefaults is broker-configs.json.
type dynamicDefaults struct {
	Cluster TopicConfig `json:"cluster"`
	Node    TopicConfig `json:"node"`
}

func decodeDynamicDefaults(data []byte) (*dynamicDefaults, error) {
	var d dynamicDefaults
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// openDynamicDefaults reads broker-configs.json; found false when there is
// none (no dynamic default was ever set).
func (b *Broker) openDynamicDefaults() (found bool, err error) {
	d, found, err := readMetaFile(b.fs, filepath.Join(b.dir, brokerDefaultsFile), brokerDefaultsFile, decodeDynamicDefaults)
	if err != nil {
		return false, err
	}
	if !found {
		d = &dynamicDefaults{}
	}
	b.dyn.Store(d)
	return found, nil
}

// topicDefaults is what fills a topic's unset configs: the node's dynamic
// defaults, the cluster's, then Config.DefaultTopic (Kafka's defaults come
// after, in WithDefaults).
func (b *Broker) topicDefaults() TopicConfig {
	d := b.dyn.Load()
	if d == nil {
		return b.cfg.DefaultTopic
	}
	return d.Node.merge(d.Cluster).merge(b.cfg.DefaultTopic)
}

// TopicDefaults returns the dynamic topic defaults of scope (zero fields:
// not set there).
func (b *Broker) TopicDefaults(scope DefaultsScope) TopicConfig {
	d := b.dyn.Load()
	if d == nil {
		return TopicConfig{}
	}
	if scope == NodeDefaults {
		return d.Node
	}
	return d.Cluster
}

// AlterTopicDefaults replaces the dynamic topic defaults of scope by
// defaults (zero fields: not set), as Kafka's AlterConfigs replaces a
// broker's dynamic configs, and applies them at once to every topic that
// does not set the config itself: topics.json and the partitions get the
// new configurations. Defaults with Partitions or ReplicationFactor set,
// or that make any topic's configuration invalid, are ErrInvalidConfig and
// change nothing.
//
// broker-configs.json is written before topics.json: a crash in between
// leaves the new defaults, which the next Open applies to every topic.
func (b *Broker) AlterTopicDefaults(scope DefaultsScope, defaults TopicConfig) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	next, topics, err := b.alteredDefaults(scope, defaults)
	if err != nil {
		return err
	}
	old := b.dyn.Load()
	if err := b.writeDynamicDefaults(next); err != nil {
		return fmt.Errorf("log: alter broker defaults: %w", err)
	}
	prev := b.topics
	b.topics = topics
	if err := b.writeTopics(); err != nil {
		b.topics = prev
		if werr := b.writeDynamicDefaults(old); werr != nil {
			b.logger.Error("log: restore broker defaults", "err", werr)
		}
		return fmt.Errorf("log: alter broker defaults: %w", err)
	}
	b.dyn.Store(next)
	for name, t := range topics {
		if prev[name] != t {
			for _, p := range t.parts {
				p.setConfig(t.cfg)
			}
		}
	}
	return nil
}

// ValidateTopicDefaults checks what AlterTopicDefaults would do, changing
// nothing (Kafka's validate_only).
func (b *Broker) ValidateTopicDefaults(scope DefaultsScope, defaults TopicConfig) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, _, err := b.alteredDefaults(scope, defaults)
	return err
}

// alteredDefaults returns the dynamic defaults with scope's replaced by
// defaults, and the topics as they would be with them. Holds b.mu.
func (b *Broker) alteredDefaults(scope DefaultsScope, defaults TopicConfig) (*dynamicDefaults, map[string]*Topic, error) {
	if defaults.Partitions != 0 || defaults.ReplicationFactor != 0 {
		return nil, nil, fmt.Errorf("%w: partitions and replication factor are not broker configs", ErrInvalidConfig)
	}
	if b.closed {
		return nil, nil, fmt.Errorf("log: alter broker defaults: %w", ErrClosed)
	}
	next := &dynamicDefaults{}
	if d := b.dyn.Load(); d != nil {
		*next = *d
	}
	switch scope {
	case NodeDefaults:
		next.Node = defaults
	case ClusterDefaults:
		next.Cluster = defaults
	default:
		return nil, nil, fmt.Errorf("%w: defaults scope %d", ErrInvalidConfig, scope)
	}
	eff := next.Node.merge(next.Cluster).merge(b.cfg.DefaultTopic)
	if err := eff.WithDefaults().Validate(); err != nil {
		return nil, nil, err
	}
	topics, err := b.topicsOver(eff, true)
	return next, topics, err
}

// topicsOver returns b.topics with every user topic's configuration
// computed again over defaults: those it changes are new Topics (a Topic is
// never changed in place), the others the same. strict: a topic the
// defaults make invalid is an error; else it keeps its configuration.
// Holds b.mu.
func (b *Broker) topicsOver(defaults TopicConfig, strict bool) (map[string]*Topic, error) {
	out := make(map[string]*Topic, len(b.topics))
	for name, t := range b.topics {
		out[name] = t
		if internalTopic(name) {
			continue
		}
		cfg := t.overrides.merge(defaults).WithDefaults()
		cfg.Partitions, cfg.ReplicationFactor = t.cfg.Partitions, t.cfg.ReplicationFactor
		if cfg == t.cfg {
			continue
		}
		if err := cfg.Validate(); err != nil {
			if strict {
				return nil, fmt.Errorf("topic %s: %w", name, err)
			}
			b.logger.Warn("log: broker defaults make a topic's config invalid: kept", "topic", name, "err", err)
			continue
		}
		out[name] = &Topic{name: name, cfg: cfg, overrides: t.overrides, parts: t.parts}
	}
	return out, nil
}

// applyDynamicDefaults gives every loaded topic its configuration over the
// dynamic defaults (Open, when broker-configs.json exists: topics.json may
// predate the last change).
func (b *Broker) applyDynamicDefaults() {
	topics, _ := b.topicsOver(b.topicDefaults(), false)
	for name, t := range topics {
		if b.topics[name] != t {
			for _, p := range t.parts {
				p.setConfig(t.cfg)
			}
		}
	}
	b.topics = topics
}

func (b *Broker) writeDynamicDefaults(d *dynamicDefaults) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(b.fs, filepath.Join(b.dir, brokerDefaultsFile), append(data, '\n'))
}

// EffectiveTopicDefaults is the configuration of a topic that sets
// nothing itself: the dynamic defaults over Config.DefaultTopic over
// Kafka's defaults.
func (b *Broker) EffectiveTopicDefaults() TopicConfig { return b.topicDefaults().WithDefaults() }
