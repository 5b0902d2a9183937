package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
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
  strata topics --data-dir DIR alter --topic T [--partitions N] [--config k=v]... [--delete-config k]...

--config takes Kafka's topic configuration names: retention.ms,
retention.bytes, segment.bytes, segment.ms, segment.index.bytes,
index.interval.bytes, max.message.bytes, flush.messages, flush.ms,
cleanup.policy (delete, compact, compact,delete), min.insync.replicas;
alter takes compression.type, delete.retention.ms,
min.cleanable.dirty.ratio, min.compaction.lag.ms and max.compaction.lag.ms
too.

alter grows a topic to --partitions N in all (never fewer: Kafka's rule),
sets each --config on the topic and makes each --delete-config the default
again, as kafka-topics.sh --alter and kafka-configs.sh --alter do; the
settings it does not name stay as they are. On a Kafka-protocol broker it
sends CreatePartitions and IncrementalAlterConfigs.

describe takes one of kafka-topics.sh's report options, and then prints
only the partitions it names, without the topics' lines:
--under-replicated-partitions (ISR smaller than the replicas),
--under-min-isr-partitions (ISR smaller than min.insync.replicas, or no
leader), --at-min-isr-partitions (ISR exactly min.insync.replicas) and
--unavailable-partitions (no leader, or one that is not a live broker).`

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
	fs.Var(&configs, "config", "`KEY=VALUE` topic configuration for create and alter, Kafka's names; repeatable")
	var deleteConfigs stringList
	fs.Var(&deleteConfigs, "delete-config", "`KEY` of a topic configuration alter makes the default again; repeatable")
	var filter partitionFilter
	filter.register(fs)
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
	if filter.any() && action != "describe" {
		return usagef("--under-replicated-partitions, --under-min-isr-partitions, --at-min-isr-partitions and --unavailable-partitions are for describe")
	}
	if filter.count() > 1 {
		return usagef("--under-replicated-partitions, --under-min-isr-partitions, --at-min-isr-partitions and --unavailable-partitions: one at most")
	}
	if isFlagSet(fs, "partitions") && *partitions <= 0 {
		return usagef("--partitions %d: a topic has at least one partition", *partitions)
	}
	if isFlagSet(fs, "replication-factor") && *rf <= 0 {
		return usagef("--replication-factor %d: a partition has at least one replica", *rf)
	}
	if (action == "create" || action == "delete" || action == "alter") && *topic == "" {
		return usagef("%s needs --topic", action)
	}
	if action != "create" && (isFlagSet(fs, "partitions") || isFlagSet(fs, "replication-factor") || len(configs) > 0) && action != "alter" {
		return usagef("--partitions, --replication-factor and --config are for create and alter")
	}
	if action != "alter" && len(deleteConfigs) > 0 {
		return usagef("--delete-config is for alter")
	}
	if action == "alter" {
		alt, err := parseAlter(*topic, *partitions, *rf, configs, deleteConfigs)
		if err != nil {
			return err
		}
		if err := t.check(); err != nil {
			return err
		}
		if t.bootstrap != "" {
			return alterTopicKafka(e, &t, alt)
		}
		b, err := openBroker(e, &t, false)
		if err != nil {
			return err
		}
		defer closeBroker(b, &err)
		return alterTopic(e, b, alt)
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
		return runTopicsKafka(e, &t, action, *topic, cfg, *ifExists, *ifNotExists, filter)
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
		return describeTopics(e, b, names, filter)
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
// With a report option (filter), only the partitions it names are printed,
// without the topics' lines: a data dir is the only replica and leader of
// each, so only the min.insync.replicas options can name any.
func describeTopics(e *env, b *log.Broker, names []string, filter partitionFilter) error {
	w := bufio.NewWriter(e.stdout)
	for _, name := range names {
		top, err := b.Topic(name)
		if err != nil {
			return err
		}
		cfg := top.Config()
		if !filter.any() {
			fmt.Fprintf(w, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				name, top.Partitions(), cfg.ReplicationFactor, formatTopicConfig(cfg))
		}
		self := []int32{0}
		for i := range top.Partitions() {
			p, err := top.Partition(i)
			if err != nil {
				return err
			}
			if !filter.keep(0, self, self, cfg.MinInSyncReplicas, func(int32) bool { return true }) {
				continue
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

// kafkaMs is a Kafka millisecond setting: -1 → forever; below -1 is
// refused, as Kafka refuses it.
func kafkaMs(v string) (time.Duration, error) {
	n, err := parseInt(v)
	if err != nil {
		return 0, err
	}
	if n < -1 {
		return 0, errors.New("want -1 (forever) or more")
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

// topicAlteration is what one alter asks for.
type topicAlteration struct {
	topic      string
	partitions int         // 0: unchanged
	set        [][2]string // Kafka's names and values, in order
	del        []string    // names made the default again
}

// parseAlter checks alter's flags.
func parseAlter(topic string, partitions, rf int, configs, deletes []string) (topicAlteration, error) {
	alt := topicAlteration{topic: topic, partitions: partitions, del: deletes}
	if err := log.ValidTopicName(topic); err != nil {
		return alt, usagef("%v", err)
	}
	if rf != 0 {
		return alt, usagef("alter cannot change the replication factor")
	}
	if partitions < 0 {
		return alt, usagef("--partitions must be positive")
	}
	if partitions == 0 && len(configs) == 0 && len(deletes) == 0 {
		return alt, usagef("alter needs --partitions, --config or --delete-config")
	}
	seen := map[string]bool{}
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return alt, usagef("--config %s: want KEY=VALUE", kv)
		}
		alt.set = append(alt.set, [2]string{k, v})
		if seen[k] {
			return alt, usagef("%s is named twice", k)
		}
		seen[k] = true
	}
	for _, k := range deletes {
		if seen[k] {
			return alt, usagef("%s is named twice", k)
		}
		seen[k] = true
	}
	return alt, nil
}

// alterTopic alters a topic of a data dir: its partitions, then its
// configuration (the settings set on it, changed as asked).
func alterTopic(e *env, b *log.Broker, alt topicAlteration) error {
	if _, err := b.Topic(alt.topic); err != nil {
		return err
	}
	if len(alt.set) > 0 || len(alt.del) > 0 {
		o, err := b.TopicOverrides(alt.topic)
		if err != nil {
			return err
		}
		for _, kv := range alt.set {
			if err := kafka.SetTopicConfig(&o, kv[0], kv[1]); err != nil {
				return err
			}
		}
		for _, k := range alt.del {
			if err := kafka.DeleteTopicConfig(&o, k); err != nil {
				return err
			}
		}
		// Checked before the partitions change: all or nothing, as far
		// as the checks go.
		if err := b.ValidateTopicConfig(alt.topic, o); err != nil {
			return err
		}
		if alt.partitions > 0 {
			if err := b.CreatePartitions(context.Background(), alt.topic, alt.partitions); err != nil {
				return err
			}
		}
		if err := b.AlterTopicConfig(alt.topic, o); err != nil {
			return err
		}
	} else if err := b.CreatePartitions(context.Background(), alt.topic, alt.partitions); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Altered topic %s.\n", alt.topic)
	return nil
}

// alterTopicKafka alters a topic of a Kafka-protocol broker: CreatePartitions
// (v1), then IncrementalAlterConfigs (v0), validated first.
func alterTopicKafka(e *env, t *target, alt topicAlteration) error {
	a, err := dialAdmin(t)
	if err != nil {
		return err
	}
	defer a.Close()
	configs := len(alt.set) > 0 || len(alt.del) > 0
	if configs {
		if err := a.alterConfigs(alt, true); err != nil {
			return err
		}
	}
	if alt.partitions > 0 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = int32(adminTimeout / time.Millisecond)
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = alt.topic, int32(alt.partitions)
		req.Topics = append(req.Topics, rt)
		r, err := a.do(req, 1)
		if err != nil {
			return err
		}
		for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
			if err := kafkaCodeError(t.ErrorCode, t.ErrorMessage); err != nil {
				return fmt.Errorf("create partitions of %s: %w", t.Topic, err)
			}
		}
	}
	if configs {
		if err := a.alterConfigs(alt, false); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "Altered topic %s.\n", alt.topic)
	return nil
}

// alterConfigs sends alt's configuration changes as one
// IncrementalAlterConfigs resource.
func (a *admin) alterConfigs(alt topicAlteration, validateOnly bool) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, alt.topic
	for _, kv := range alt.set {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name, c.Value = kmsg.IncrementalAlterConfigOpSet, kv[0], kmsg.StringPtr(kv[1])
		rr.Configs = append(rr.Configs, c)
	}
	for _, k := range alt.del {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Op, c.Name = kmsg.IncrementalAlterConfigOpDelete, k
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	r, err := a.do(req, 0)
	if err != nil {
		return err
	}
	for _, res := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if err := kafkaCodeError(res.ErrorCode, res.ErrorMessage); err != nil {
			return fmt.Errorf("alter configs of %s: %w", res.ResourceName, err)
		}
	}
	return nil
}
