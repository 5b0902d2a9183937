package kafka

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic configs, by Kafka's names, over log.TopicConfig. A zero field of a
// TopicConfig is "not set" (the default): a config set on a topic is one
// whose field is non-zero in the topic's overrides.

// topicConfigDef is one of Kafka's topic configs and the field of
// log.TopicConfig it stands for.
type topicConfigDef struct {
	name string
	typ  kmsg.ConfigType
	// get renders the field in Kafka's units.
	get func(log.TopicConfig) string
	// set parses v into the field; false: a bad value.
	set func(c *log.TopicConfig, v string) bool
	// clear makes the field the default again (zero).
	clear func(c *log.TopicConfig)
}

// Topic config names, Kafka's, that have no table entry of their own.
const (
	cfgRetentionMs           = "retention.ms"
	cfgCleanupPolicy         = "cleanup.policy"
	cfgMessageFormatVersion  = "message.format.version"
	cfgUncleanLeaderElection = "unclean.leader.election.enable"
	cfgMessageDownconversion = "message.downconversion.enable"
	cfgPreallocate           = "preallocate"
	cfgFileDeleteDelayMs     = "file.delete.delay.ms"
)

// kafkaNever is Kafka's "no limit" of the long configs (Long.MAX_VALUE).
const kafkaNever = math.MaxInt64

func parseLong(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// positiveInt parses an int config that must be above 0.
func positiveInt(v string) (int, bool) {
	n, ok := parseLong(v)
	return int(n), ok && n > 0 && n <= math.MaxInt32
}

func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func clearField[T any](field func(*log.TopicConfig) *T) func(*log.TopicConfig) {
	return func(c *log.TopicConfig) {
		var zero T
		*field(c) = zero
	}
}

// topicConfigTable is every topic config Strata acts on, sorted by name:
// DescribeConfigs lists them, CreateTopics and IncrementalAlterConfigs set
// them.
var topicConfigTable = []topicConfigDef{
	{cfgCleanupPolicy, kmsg.ConfigTypeList,
		func(c log.TopicConfig) string { return c.Cleanup.String() },
		func(c *log.TopicConfig, v string) bool {
			p, ok := parseCleanupPolicy(splitList(v))
			c.Cleanup = p
			return ok
		},
		clearField(func(c *log.TopicConfig) *log.CleanupPolicy { return &c.Cleanup })},
	{"compression.type", kmsg.ConfigTypeString,
		func(c log.TopicConfig) string { return c.Compression.String() },
		func(c *log.TopicConfig, v string) bool {
			for tc := log.TopicCompressionProducer; tc <= log.TopicCompressionZstd; tc++ {
				if tc.String() == v {
					c.Compression = tc
					return true
				}
			}
			return false
		},
		clearField(func(c *log.TopicConfig) *log.TopicCompression { return &c.Compression })},
	{"delete.retention.ms", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string { return msString(c.DeleteRetention) },
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			c.DeleteRetention = time.Duration(n) * time.Millisecond
			if n == 0 {
				// Kafka's "tombstones go at the next pass"; 0 is the zero
				// field (the default, 1 day). Shown as 0 all the same.
				c.DeleteRetention = time.Nanosecond
			}
			return ok && n >= 0 && n < kafkaNever/int64(time.Millisecond)
		},
		clearField(func(c *log.TopicConfig) *time.Duration { return &c.DeleteRetention })},
	{"flush.messages", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string {
			if c.FlushMessages == 0 {
				return strconv.FormatInt(kafkaNever, 10)
			}
			return strconv.FormatInt(c.FlushMessages, 10)
		},
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			c.FlushMessages = n
			if n == kafkaNever {
				c.FlushMessages = 0 // never: the zero field
			}
			return ok && n >= 1 // Kafka's bound
		},
		clearField(func(c *log.TopicConfig) *int64 { return &c.FlushMessages })},
	{"flush.ms", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string {
			if c.FlushInterval == 0 {
				return strconv.FormatInt(kafkaNever, 10)
			}
			return msString(c.FlushInterval)
		},
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			if n == kafkaNever {
				n = 0
			}
			c.FlushInterval = time.Duration(n) * time.Millisecond
			return ok && n >= 0 && n < kafkaNever/int64(time.Millisecond)
		},
		clearField(func(c *log.TopicConfig) *time.Duration { return &c.FlushInterval })},
	{"index.interval.bytes", kmsg.ConfigTypeInt,
		func(c log.TopicConfig) string { return strconv.Itoa(c.IndexIntervalBytes) },
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			// Kafka's 0, an index entry for every batch, is 1 here: 0 is
			// the zero field (the default, 4096).
			c.IndexIntervalBytes = int(max(n, 1))
			return ok && n >= 0 && n <= math.MaxInt32
		},
		clearField(func(c *log.TopicConfig) *int { return &c.IndexIntervalBytes })},
	{"max.compaction.lag.ms", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string {
			if c.MaxCompactionLag == 0 {
				return strconv.FormatInt(kafkaNever, 10)
			}
			return msString(c.MaxCompactionLag)
		},
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			if n == kafkaNever {
				n = 0
			} else if n <= 0 {
				return false
			}
			c.MaxCompactionLag = time.Duration(n) * time.Millisecond
			return ok && n < kafkaNever/int64(time.Millisecond)
		},
		clearField(func(c *log.TopicConfig) *time.Duration { return &c.MaxCompactionLag })},
	{"max.message.bytes", kmsg.ConfigTypeInt,
		func(c log.TopicConfig) string { return strconv.Itoa(c.MaxMessageBytes) },
		func(c *log.TopicConfig, v string) (ok bool) {
			c.MaxMessageBytes, ok = positiveInt(v)
			return ok
		},
		clearField(func(c *log.TopicConfig) *int { return &c.MaxMessageBytes })},
	{"message.timestamp.type", kmsg.ConfigTypeString,
		func(log.TopicConfig) string { return "CreateTime" },
		func(_ *log.TopicConfig, v string) bool { return v == "CreateTime" }, // the only one Strata has
		func(*log.TopicConfig) {}},
	{"min.cleanable.dirty.ratio", kmsg.ConfigTypeDouble,
		func(c log.TopicConfig) string { return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64) },
		func(c *log.TopicConfig, v string) bool {
			f, err := strconv.ParseFloat(v, 64)
			c.MinCleanableDirtyRatio = f
			return err == nil && f > 0 && f <= 1
		},
		clearField(func(c *log.TopicConfig) *float64 { return &c.MinCleanableDirtyRatio })},
	{"min.compaction.lag.ms", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string { return msString(c.MinCompactionLag) },
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			c.MinCompactionLag = time.Duration(n) * time.Millisecond
			return ok && n >= 0 && n < kafkaNever/int64(time.Millisecond)
		},
		clearField(func(c *log.TopicConfig) *time.Duration { return &c.MinCompactionLag })},
	{"min.insync.replicas", kmsg.ConfigTypeInt,
		func(c log.TopicConfig) string { return strconv.Itoa(c.MinInSyncReplicas) },
		func(c *log.TopicConfig, v string) (ok bool) {
			c.MinInSyncReplicas, ok = positiveInt(v)
			return ok
		},
		clearField(func(c *log.TopicConfig) *int { return &c.MinInSyncReplicas })},
	{"retention.bytes", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string {
			if c.RetentionBytes == 0 {
				return "-1"
			}
			return strconv.FormatInt(c.RetentionBytes, 10)
		},
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			c.RetentionBytes = max(n, 0) // negative: unlimited, the zero field
			return ok && n != 0
		},
		clearField(func(c *log.TopicConfig) *int64 { return &c.RetentionBytes })},
	{cfgRetentionMs, kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string {
			if c.RetentionTime < 0 {
				return "-1"
			}
			return msString(c.RetentionTime)
		},
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			switch {
			case n < -1: // Kafka's bound
				return false
			case n < 0:
				c.RetentionTime = -1 // forever
			case n == 0:
				// Kafka's "delete at once"; 0 is the zero field (the default).
				c.RetentionTime = time.Millisecond
			default:
				c.RetentionTime = time.Duration(n) * time.Millisecond
			}
			return ok && n < kafkaNever/int64(time.Millisecond)
		},
		clearField(func(c *log.TopicConfig) *time.Duration { return &c.RetentionTime })},
	{"segment.bytes", kmsg.ConfigTypeInt,
		func(c log.TopicConfig) string { return strconv.FormatInt(c.SegmentBytes, 10) },
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			c.SegmentBytes = n
			return ok && n >= 14 && n <= math.MaxInt32 // Kafka's bounds (LegacyRecord.RECORD_OVERHEAD_V0)
		},
		clearField(func(c *log.TopicConfig) *int64 { return &c.SegmentBytes })},
	{"segment.index.bytes", kmsg.ConfigTypeInt,
		func(c log.TopicConfig) string { return strconv.Itoa(c.MaxIndexBytes) },
		func(c *log.TopicConfig, v string) (ok bool) {
			c.MaxIndexBytes, ok = positiveInt(v)
			return ok
		},
		clearField(func(c *log.TopicConfig) *int { return &c.MaxIndexBytes })},
	{"segment.ms", kmsg.ConfigTypeLong,
		func(c log.TopicConfig) string { return msString(c.SegmentTime) },
		func(c *log.TopicConfig, v string) bool {
			n, ok := parseLong(v)
			c.SegmentTime = time.Duration(n) * time.Millisecond
			return ok && n > 0 && n < kafkaNever/int64(time.Millisecond)
		},
		clearField(func(c *log.TopicConfig) *time.Duration { return &c.SegmentTime })},
}

// topicConfigValid says what each config takes: Kafka's bounds (its
// LogConfig), less what Strata cannot hold (a 0 that is its default).
var topicConfigValid = map[string]string{
	cfgCleanupPolicy:            "a list of delete and compact",
	"compression.type":          "producer, uncompressed, gzip, snappy, lz4 or zstd",
	"delete.retention.ms":       "0 or more",
	"flush.messages":            "1 or more",
	"flush.ms":                  "0 or more",
	"index.interval.bytes":      "0 to 2147483647",
	"max.compaction.lag.ms":     "1 or more",
	"max.message.bytes":         "1 to 2147483647",
	"message.timestamp.type":    "CreateTime",
	"min.cleanable.dirty.ratio": "a number in (0, 1]",
	"min.compaction.lag.ms":     "0 or more",
	"min.insync.replicas":       "1 to 2147483647 (and at most the replication factor)",
	"retention.bytes":           "a negative number (unlimited) or more than 0",
	cfgRetentionMs:              "-1 (forever) or more",
	"segment.bytes":             "14 to 2147483647",
	"segment.index.bytes":       "24 to 2147483647",
	"segment.ms":                "1 or more",
}

// ignoredTopicConfig reports the configs Strata accepts and does not act
// on (what it does is what they ask for, or they do not apply to it).
func ignoredTopicConfig(name string) bool {
	switch name {
	case cfgMessageFormatVersion, cfgUncleanLeaderElection, cfgMessageDownconversion, cfgPreallocate, cfgFileDeleteDelayMs:
		return true
	}
	return false
}

// topicConfigDefOf returns the table entry of name.
func topicConfigDefOf(name string) (*topicConfigDef, bool) {
	i, ok := slices.BinarySearchFunc(topicConfigTable, name, func(d topicConfigDef, name string) int { return strings.Compare(d.name, name) })
	if !ok {
		return nil, false
	}
	return &topicConfigTable[i], true
}

// isSetOn reports whether d's field is set (non-zero) in overrides.
func (d *topicConfigDef) isSetOn(overrides log.TopicConfig) bool {
	c := overrides
	d.clear(&c)
	return c != overrides
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func parseCleanupPolicy(items []string) (log.CleanupPolicy, bool) {
	var del, compact bool
	for _, s := range items {
		switch s {
		case "delete":
			del = true
		case "compact":
			compact = true
		default:
			return 0, false
		}
	}
	switch {
	case del && compact:
		return log.CleanupCompactDelete, true
	case compact:
		return log.CleanupCompact, true
	case del:
		return log.CleanupDelete, true
	}
	return 0, false // empty
}

// SetTopicConfig sets one of Kafka's topic configs (retention.ms,
// cleanup.policy, compression.type, ...; Kafka's units) on cfg: the field
// it stands for. An unknown name or a bad value is log.ErrInvalidConfig and
// leaves cfg as it was. Configs Strata accepts without acting on them
// (preallocate, message.format.version, ...) change nothing.
func SetTopicConfig(cfg *log.TopicConfig, name, value string) error {
	d, ok := topicConfigDefOf(name)
	if !ok {
		if ignoredTopicConfig(name) {
			return nil
		}
		return fmt.Errorf("%w: unknown topic config %s", log.ErrInvalidConfig, name)
	}
	c := *cfg
	if !d.set(&c, value) {
		if want, ok := topicConfigValid[name]; ok {
			return fmt.Errorf("%w: %s=%q: want %s", log.ErrInvalidConfig, name, value, want)
		}
		return fmt.Errorf("%w: %s=%q", log.ErrInvalidConfig, name, value)
	}
	*cfg = c
	return nil
}

// DeleteTopicConfig makes one of Kafka's topic configs the default again
// on cfg (its field zero). An unknown name is log.ErrInvalidConfig.
func DeleteTopicConfig(cfg *log.TopicConfig, name string) error {
	d, ok := topicConfigDefOf(name)
	if !ok {
		if ignoredTopicConfig(name) {
			return nil
		}
		return fmt.Errorf("%w: unknown topic config %s", log.ErrInvalidConfig, name)
	}
	d.clear(cfg)
	return nil
}

// setTopicConfig sets one config of a CreateTopics request; a null value
// is the default.
func setTopicConfig(cfg *log.TopicConfig, name string, value *string) error {
	if value == nil {
		return nil
	}
	return SetTopicConfig(cfg, name, *value)
}

// topicOverrides returns what is set on a topic, if the backend knows;
// ok false if it does not (every config is then described as a default).
func (s *Server) topicOverrides(topic string) (overrides log.TopicConfig, ok bool) {
	a := s.caps.configs
	if a == nil {
		return log.TopicConfig{}, false
	}
	o, err := a.TopicOverrides(topic)
	return o, err == nil
}

// configSource is how DescribeConfigs and CreateTopics describe a config
// of a topic with overrides.
func configSource(d *topicConfigDef, overrides log.TopicConfig) (kmsg.ConfigSource, bool) {
	if d.isSetOn(overrides) {
		return kmsg.ConfigSourceDynamicTopicConfig, false
	}
	return kmsg.ConfigSourceDefaultConfig, true
}

func createdConfigs(cfg, overrides log.TopicConfig) []kmsg.CreateTopicsResponseTopicConfig {
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(topicConfigTable))
	for i := range topicConfigTable {
		d := &topicConfigTable[i]
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value = d.name, kmsg.StringPtr(d.get(cfg))
		src, _ := configSource(d, overrides)
		c.Source = int8(src)
		out = append(out, c)
	}
	return out
}

// handleDescribeConfigs describes topics' configurations: each config's
// value, whether it was set on the topic (DYNAMIC_TOPIC_CONFIG, not
// default) or is the default (DEFAULT_CONFIG), and whether it can be
// altered (read-only unless the backend alters topic configs). A broker
// resource lists the dynamic broker configs (alterconfigs.go).
func handleDescribeConfigs(_ context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.DescribeConfigsRequest)
	s := c.s
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	alterable := s.caps.configs != nil
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			cfg, err := s.b.TopicConfig(rr.ResourceName)
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
				break
			}
			overrides, _ := s.topicOverrides(rr.ResourceName)
			want := map[string]bool{}
			for _, n := range rr.ConfigNames {
				want[n] = true
			}
			for i := range topicConfigTable {
				d := &topicConfigTable[i]
				if rr.ConfigNames != nil && !want[d.name] {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value = d.name, kmsg.StringPtr(d.get(cfg))
				rc.ReadOnly = !alterable
				rc.Source, rc.IsDefault = configSource(d, overrides)
				rc.ConfigType = d.typ
				if req.IncludeSynonyms {
					syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					syn.Name, syn.Value, syn.Source = rc.Name, rc.Value, rc.Source
					rc.ConfigSynonyms = append(rc.ConfigSynonyms, syn)
				}
				res.Configs = append(res.Configs, rc)
			}
			// The replication throttles (alterconfigs_throttle.go).
			if th, err := s.describeThrottles(rr.ResourceType, rr.ResourceName, rr.ConfigNames, req.IncludeSynonyms); err == nil {
				res.Configs = append(res.Configs, th...)
			}
		case kmsg.ConfigResourceTypeBroker:
			// The dynamic broker configs (alterconfigs.go).
			cfgs, err := s.describeBrokerConfigs(rr, req.IncludeSynonyms)
			if err == nil {
				cfgs = append(cfgs, s.describeTxnConfigs(rr, req.IncludeSynonyms)...) // txn_configs.go
			}
			if err == nil && s.caps.throttles != nil {
				var th []kmsg.DescribeConfigsResponseResourceConfig
				if _, err = s.brokerScope(rr.ResourceName); err == nil {
					th, err = s.describeThrottles(rr.ResourceType, rr.ResourceName, rr.ConfigNames, req.IncludeSynonyms)
				}
				cfgs = append(cfgs, th...)
			}
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
				cfgs = nil
			}
			res.Configs = cfgs
		case kmsg.ConfigResourceTypeBrokerLogger:
		case kmsg.ConfigResourceTypeGroupConfig:
			if !s.describeGroupConfig(rr.ResourceName, rr.ConfigNames, &res) { // share groups (share_configs.go)
				res.ErrorCode = errInvalidRequest
			}
		default:
			res.ErrorCode = errInvalidRequest
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply{resp: resp}
}

// Operations of IncrementalAlterConfigs.
const (
	opSet      = kmsg.IncrementalAlterConfigOpSet
	opDelete   = kmsg.IncrementalAlterConfigOpDelete
	opAppend   = kmsg.IncrementalAlterConfigOpAppend
	opSubtract = kmsg.IncrementalAlterConfigOpSubtract
)

// handleIncrementalAlterConfigs alters topic configs through the
// TopicConfigAlterer, each resource as one change with its own error:
// SET and DELETE on any topic config, APPEND and SUBTRACT on list configs
// (cleanup.policy; INVALID_REQUEST on others). An unknown config or a bad
// value is INVALID_CONFIG, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a
// resource or a config listed twice INVALID_REQUEST; a broker resource
// alters the dynamic broker configs (alterconfigs.go). validate_only checks
// and changes nothing.
func handleIncrementalAlterConfigs(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	a := c.s.caps.configs
	seen := countResources(req.Resources, func(rr kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
		return rr.ResourceType, rr.ResourceName
	})
	for _, rr := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		err := seen.repeated(rr.ResourceType, rr.ResourceName) // alterconfigs.go
		switch {
		case err != nil:
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			err = c.s.alterGroupConfig(rr, req.ValidateOnly) // share groups (share_configs.go)
		case rr.ResourceType != kmsg.ConfigResourceTypeTopic && rr.ResourceType != kmsg.ConfigResourceTypeBroker:
			err = fmt.Errorf("%w: only topic and broker configs can be altered", errInvalidRequestErr)
		default:
			err = c.s.alterResourceConfigs(ctx, a, rr, req.ValidateOnly)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply{resp: resp}
}

// alterResourceConfigs applies (or, validateOnly, checks) the operations
// of a TOPIC or BROKER resource: the replication throttles
// (alterconfigs_throttle.go), the topic's overrides, the dynamic broker
// configs (alterconfigs.go).
func (s *Server) alterResourceConfigs(ctx context.Context, a TopicConfigAlterer, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	ops, err := s.incrementalThrottleOps(&rr)
	if err != nil {
		return err
	}
	rest := func(validateOnly bool) error {
		switch {
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker && s.caps.brokerConfigs == nil:
			return fmt.Errorf("%w: this server's dynamic broker configs are the replication throttles only", log.ErrInvalidConfig)
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			return s.alterBrokerConfigs(rr, validateOnly) // alterconfigs.go
		case a == nil:
			return fmt.Errorf("%w: this server's topic configs are the replication throttles only", log.ErrInvalidConfig)
		}
		return s.alterTopicConfig(a, rr, validateOnly)
	}
	return s.alterWithThrottles(ctx, rr.ResourceType, rr.ResourceName, ops, len(rr.Configs) > 0 || !ops.any(), rest, validateOnly)
}

// alterTopicConfig applies (or, validateOnly, checks) one resource's
// operations to its topic's overrides.
func (s *Server) alterTopicConfig(a TopicConfigAlterer, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	topic := rr.ResourceName
	if err := log.ValidTopicName(topic); err != nil {
		return err
	}
	o, err := a.TopicOverrides(topic)
	if err != nil {
		return err
	}
	cur, err := s.b.TopicConfig(topic)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, op := range rr.Configs {
		if names[op.Name] {
			return fmt.Errorf("%w: config %s listed more than once", errInvalidRequestErr, op.Name)
		}
		names[op.Name] = true
		d, known := topicConfigDefOf(op.Name)
		if !known && !ignoredTopicConfig(op.Name) {
			return fmt.Errorf("%w: unknown topic config %s", log.ErrInvalidConfig, op.Name)
		}
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		switch op.Op {
		case opSet:
			if op.Value == nil {
				return fmt.Errorf("%w: %s: SET without a value", log.ErrInvalidConfig, op.Name)
			}
			err = SetTopicConfig(&o, op.Name, value)
		case opDelete:
			err = DeleteTopicConfig(&o, op.Name)
		case opAppend, opSubtract:
			if !known || d.typ != kmsg.ConfigTypeList {
				return fmt.Errorf("%w: %s is not a list config: APPEND and SUBTRACT do not apply", errInvalidRequestErr, op.Name)
			}
			err = alterList(&o, cur, d, op.Op == opAppend, splitList(value))
		default:
			return fmt.Errorf("%w: unknown operation %d on %s", errInvalidRequestErr, op.Op, op.Name)
		}
		if err != nil {
			return err
		}
	}
	if validateOnly {
		return a.ValidateTopicConfig(topic, o)
	}
	return a.AlterTopicConfig(topic, o)
}

// alterList appends items to, or subtracts them from, the list config d:
// its value set on the topic, or the topic's current one (the default) if
// none is.
func alterList(o *log.TopicConfig, cur log.TopicConfig, d *topicConfigDef, add bool, items []string) error {
	base := cur
	if d.isSetOn(*o) {
		base = *o
	}
	list := splitList(d.get(base))
	for _, it := range items {
		i := slices.Index(list, it)
		switch {
		case add && i < 0:
			list = append(list, it)
		case !add && i >= 0:
			list = slices.Delete(list, i, i+1)
		}
	}
	if err := SetTopicConfig(o, d.name, strings.Join(list, ",")); err != nil {
		return err
	}
	return nil
}
