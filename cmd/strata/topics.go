package main

import (
	"bufio"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/log"
)

const topicsHelp = `
Lists, creates, describes and deletes the topics of a Kafka-protocol broker
(--bootstrap-server: strata serve, Apache Kafka, ...) or of a data dir
(--data-dir), as kafka-topics.sh does. The action is a word (list, create, describe, delete,
alter) or Kafka's flag for it (--list, --create, ...).

  strata topics --bootstrap-server ADDR list
  strata topics --data-dir DIR list
  strata topics --data-dir DIR create --topic T --partitions N [--config k=v]...
  strata topics --data-dir DIR describe [--topic T]
  strata topics --data-dir DIR delete --topic T

--config takes Kafka's topic configuration names: retention.ms,
retention.bytes, segment.bytes, segment.ms, segment.index.bytes,
index.interval.bytes, max.message.bytes, flush.messages, flush.ms,
cleanup.policy (delete, compact, compact,delete), min.insync.replicas.

alter is not available yet: the library cannot change a topic's partitions
or configuration.`

var topicActions = []string{"list", "create", "describe", "delete", "alter"}

func runTopics(e *env, args []string) (err error) {
	fs := newFlags(e, "topics", "--bootstrap-server ADDR|--data-dir DIR list|create|describe|delete|alter [flags]", topicsHelp)
	var t target
	t.register(fs)
	actionFlags := map[string]*bool{}
	for _, a := range topicActions {
		actionFlags[a] = fs.Bool(a, false, "the "+a+" action (Kafka's flag form)")
	}
	topic := fs.String("topic", "", "`NAME` of the topic")
	partitions := fs.Int("partitions", 0, "`N` partitions for create (default 1)")
	rf := fs.Int("replication-factor", 0, "`N` replicas for create: a data dir has one replica of everything")
	ifNotExists := fs.Bool("if-not-exists", false, "create: no error when the topic exists")
	ifExists := fs.Bool("if-exists", false, "delete, describe: no error when the topic does not exist")
	var configs stringList
	fs.Var(&configs, "config", "`KEY=VALUE` topic configuration for create, Kafka's names; repeatable")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	var actions []string
	for _, a := range topicActions {
		if *actionFlags[a] {
			actions = append(actions, a)
		}
	}
	for _, p := range pos {
		if !isTopicAction(p) {
			return usagef("unknown action %q (want one of %s)", p, strings.Join(topicActions, ", "))
		}
		actions = append(actions, p)
	}
	if len(actions) != 1 {
		return usagef("want exactly one action of %s, got %d", strings.Join(topicActions, ", "), len(actions))
	}
	action := actions[0]
	if (action == "create" || action == "delete" || action == "alter") && *topic == "" {
		return usagef("%s needs --topic", action)
	}
	if action != "create" && (*partitions != 0 || *rf != 0 || len(configs) > 0) && action != "alter" {
		return usagef("--partitions, --replication-factor and --config are for create")
	}
	if action == "alter" {
		if err := t.check(); err != nil {
			return err
		}
		return fmt.Errorf("alter: %w: the library cannot change a topic's partitions or configuration", errNotYet)
	}
	var cfg log.TopicConfig
	if action == "create" {
		if *partitions < 0 || *rf < 0 {
			return usagef("--partitions and --replication-factor must be positive")
		}
		cfg.Partitions, cfg.ReplicationFactor = *partitions, *rf
		for _, kv := range configs {
			if err := setTopicConfig(&cfg, kv); err != nil {
				return usagef("--config %s: %v", kv, err)
			}
		}
		if err := log.ValidTopicName(*topic); err != nil {
			return usagef("%v", err)
		}
	}
	if err := t.check(); err != nil {
		return err
	}
	if t.bootstrap != "" {
		return runTopicsKafka(e, &t, action, *topic, cfg, *ifExists, *ifNotExists)
	}
	b, err := openBroker(e, &t, action == "create")
	if err != nil {
		return err
	}
	defer closeBroker(b, &err)
	switch action {
	case "list":
		for _, name := range b.Topics() {
			fmt.Fprintln(e.stdout, name)
		}
	case "create":
		_, err = b.CreateTopic(*topic, cfg)
		if errors.Is(err, log.ErrTopicExists) && *ifNotExists {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Created topic %s.\n", *topic)
	case "delete":
		err = b.DeleteTopic(*topic)
		if errors.Is(err, log.ErrUnknownTopic) && *ifExists {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "Deleted topic %s.\n", *topic)
	case "describe":
		names := b.Topics()
		if *topic != "" {
			if _, err := b.Topic(*topic); err != nil {
				if errors.Is(err, log.ErrUnknownTopic) && *ifExists {
					return nil
				}
				return err
			}
			names = []string{*topic}
		}
		return describeTopics(e, b, names)
	}
	return err
}

func isTopicAction(s string) bool {
	for _, a := range topicActions {
		if s == a {
			return true
		}
	}
	return false
}

// describeTopics prints each topic and its partitions, as kafka-topics.sh
// --describe does, with the offsets and sizes of the data dir.
func describeTopics(e *env, b *log.Broker, names []string) error {
	w := bufio.NewWriter(e.stdout)
	for _, name := range names {
		top, err := b.Topic(name)
		if err != nil {
			return err
		}
		cfg := top.Config()
		fmt.Fprintf(w, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			name, top.Partitions(), cfg.ReplicationFactor, formatTopicConfig(cfg))
		for i := range top.Partitions() {
			p, err := top.Partition(i)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tStartOffset: %d\tEndOffset: %d\tSize: %d\tSegments: %d\n",
				name, i, p.StartOffset(), p.EndOffset(), p.Size(), p.Segments())
		}
	}
	return w.Flush()
}

// topicConfigKey is one of Kafka's topic configuration names and the field
// of log.TopicConfig it sets.
type topicConfigKey struct {
	name string
	set  func(c *log.TopicConfig, v string) error
	get  func(c log.TopicConfig) string
}

func parseInt(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }

// kafkaMs is a Kafka millisecond setting: -1 (or any negative) → forever.
func kafkaMs(v string) (time.Duration, error) {
	n, err := parseInt(v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return -1, nil
	}
	if n == 0 {
		return 0, errors.New("0 ms is not a usable setting")
	}
	return time.Duration(n) * time.Millisecond, nil
}

func ms(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

var topicConfigKeys = []topicConfigKey{
	{"cleanup.policy", func(c *log.TopicConfig, v string) error {
		switch v {
		case "delete":
			c.Cleanup = log.CleanupDelete
		case "compact":
			c.Cleanup = log.CleanupCompact
		case "compact,delete", "delete,compact":
			c.Cleanup = log.CleanupCompactDelete
		default:
			return errors.New("want delete, compact or compact,delete")
		}
		return nil
	}, func(c log.TopicConfig) string {
		return [...]string{"delete", "compact", "compact,delete"}[c.Cleanup]
	}},
	{"flush.messages", func(c *log.TopicConfig, v string) (err error) {
		c.FlushMessages, err = parseInt(v)
		return err
	}, func(c log.TopicConfig) string { return strconv.FormatInt(c.FlushMessages, 10) }},
	{"flush.ms", func(c *log.TopicConfig, v string) (err error) {
		c.FlushInterval, err = kafkaMs(v)
		return err
	}, func(c log.TopicConfig) string { return ms(c.FlushInterval) }},
	{"index.interval.bytes", func(c *log.TopicConfig, v string) error {
		n, err := strconv.Atoi(v)
		c.IndexIntervalBytes = n
		return err
	}, func(c log.TopicConfig) string { return strconv.Itoa(c.IndexIntervalBytes) }},
	{"max.message.bytes", func(c *log.TopicConfig, v string) error {
		n, err := strconv.Atoi(v)
		c.MaxMessageBytes = n
		return err
	}, func(c log.TopicConfig) string { return strconv.Itoa(c.MaxMessageBytes) }},
	{"min.insync.replicas", func(c *log.TopicConfig, v string) error {
		n, err := strconv.Atoi(v)
		c.MinInSyncReplicas = n
		return err
	}, func(c log.TopicConfig) string { return strconv.Itoa(c.MinInSyncReplicas) }},
	{"retention.bytes", func(c *log.TopicConfig, v string) error {
		n, err := parseInt(v)
		if n < 0 {
			n = 0 // Kafka's -1: unlimited
		}
		c.RetentionBytes = n
		return err
	}, func(c log.TopicConfig) string {
		if c.RetentionBytes == 0 {
			return "-1"
		}
		return strconv.FormatInt(c.RetentionBytes, 10)
	}},
	{"retention.ms", func(c *log.TopicConfig, v string) (err error) {
		c.RetentionTime, err = kafkaMs(v)
		return err
	}, func(c log.TopicConfig) string { return ms(c.RetentionTime) }},
	{"segment.bytes", func(c *log.TopicConfig, v string) (err error) {
		c.SegmentBytes, err = parseInt(v)
		return err
	}, func(c log.TopicConfig) string { return strconv.FormatInt(c.SegmentBytes, 10) }},
	{"segment.index.bytes", func(c *log.TopicConfig, v string) error {
		n, err := strconv.Atoi(v)
		c.MaxIndexBytes = n
		return err
	}, func(c log.TopicConfig) string { return strconv.Itoa(c.MaxIndexBytes) }},
	{"segment.ms", func(c *log.TopicConfig, v string) (err error) {
		c.SegmentTime, err = kafkaMs(v)
		return err
	}, func(c log.TopicConfig) string { return ms(c.SegmentTime) }},
}

// setTopicConfig applies one KEY=VALUE of Kafka's topic configuration.
func setTopicConfig(c *log.TopicConfig, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return errors.New("want KEY=VALUE")
	}
	for _, key := range topicConfigKeys {
		if key.name == k {
			if err := key.set(c, v); err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
			return nil
		}
	}
	names := make([]string, len(topicConfigKeys))
	for i, key := range topicConfigKeys {
		names[i] = key.name
	}
	return fmt.Errorf("unknown configuration %q (known: %s)", k, strings.Join(names, ", "))
}

// formatTopicConfig lists the settings that differ from the defaults, in
// Kafka's names, as kafka-topics.sh --describe does.
func formatTopicConfig(c log.TopicConfig) string {
	def := log.TopicConfig{}.WithDefaults()
	var out []string
	for _, key := range topicConfigKeys {
		if v := key.get(c); v != key.get(def) {
			out = append(out, key.name+"="+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
