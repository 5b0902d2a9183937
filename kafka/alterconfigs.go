package kafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs is the non-incremental config API older clients use (kadm's
// AlterTopicConfigs/AlterBrokerConfigs with no operation, sarama's
// AlterConfig, kafka-configs.sh before 2.3): each resource's whole dynamic
// config set is replaced by the one sent, configs left out going back to
// their defaults, as Kafka's legacy AlterConfigs does.

// BrokerConfigAlterer keeps a broker's dynamic broker configs: Strata has
// those of the log (log.retention.ms, log.segment.bytes, ...), the topic
// defaults of every topic that does not set the config itself. The
// cluster-wide set (Kafka's BROKER resource "") and the node's own (the
// resource named by its node id) are each replaced whole. *log.Broker
// implements it.
type BrokerConfigAlterer interface {
	// TopicDefaults returns the dynamic defaults set in scope.
	TopicDefaults(scope log.DefaultsScope) log.TopicConfig
	// EffectiveTopicDefaults returns what a topic that sets nothing has.
	EffectiveTopicDefaults() log.TopicConfig
	// AlterTopicDefaults replaces scope's set (log.ErrInvalidConfig).
	AlterTopicDefaults(scope log.DefaultsScope, defaults log.TopicConfig) error
	// ValidateTopicDefaults reports what AlterTopicDefaults would,
	// changing nothing.
	ValidateTopicDefaults(scope log.DefaultsScope, defaults log.TopicConfig) error
}

var _ BrokerConfigAlterer = (*log.Broker)(nil)

const legacyAlterConfigsKey int16 = 33

// v1 is v0 with throttling after the response, v2 flexible.
var legacyAlterConfigsAPIs = []api{{key: legacyAlterConfigsKey, min: 0, max: 2, handle: handleAlterConfigs}}

// brokerConfigSynonyms maps the dynamic broker configs Strata has to the
// topic config each is the default of (Kafka's LogConfig synonyms), sorted
// by broker config name.
var brokerConfigSynonyms = [][2]string{
	{"compression.type", "compression.type"},
	{"log.cleaner.delete.retention.ms", "delete.retention.ms"},
	{"log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"},
	{"log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio"},
	{"log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"},
	{"log.cleanup.policy", cfgCleanupPolicy},
	{"log.flush.interval.messages", "flush.messages"},
	{"log.flush.interval.ms", "flush.ms"},
	{"log.index.interval.bytes", "index.interval.bytes"},
	{"log.index.size.max.bytes", "segment.index.bytes"},
	{"log.message.timestamp.type", "message.timestamp.type"},
	{"log.retention.bytes", "retention.bytes"},
	{"log.retention.ms", cfgRetentionMs},
	{"log.roll.ms", "segment.ms"},
	{"log.segment.bytes", "segment.bytes"},
	{"message.max.bytes", "max.message.bytes"},
	{"min.insync.replicas", "min.insync.replicas"},
}

// brokerTopicConfig is the topic config broker config name is the default
// of, false if it is none Strata has.
func brokerTopicConfig(name string) (string, bool) {
	i, ok := slices.BinarySearchFunc(brokerConfigSynonyms, name, func(s [2]string, n string) int {
		switch {
		case s[0] < n:
			return -1
		case s[0] > n:
			return 1
		}
		return 0
	})
	if !ok {
		return "", false
	}
	return brokerConfigSynonyms[i][1], true
}

// staticBrokerConfigs are Kafka broker configs that cannot be changed on a
// running broker ("Cannot update these configs dynamically"): named in an
// AlterConfigs, they are refused as read-only rather than unknown.
var staticBrokerConfigs = map[string]bool{
	"broker.id": true, "node.id": true, "process.roles": true, "log.dir": true, "log.dirs": true,
	"listeners": true, "advertised.listeners": true, "controller.quorum.voters": true,
	"controller.listener.names": true, "num.partitions": true, "default.replication.factor": true,
	"auto.create.topics.enable": true, "offsets.topic.num.partitions": true,
	"offsets.topic.replication.factor": true, "log.retention.hours": true, "log.retention.minutes": true,
	"log.roll.hours": true, "zookeeper.connect": true, "inter.broker.listener.name": true,
	"transaction.max.timeout.ms": true, "transactional.id.expiration.ms": true,
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": true,
	"transaction.remove.expired.transaction.cleanup.interval.ms":  true,
}

// handleAlterConfigs replaces each resource's dynamic configs, each with
// its own error: a resource or a config named twice, a null value, a
// broker id that is not this node's or a resource type without dynamic
// configs here is INVALID_REQUEST; an unknown or read-only config or a
// bad value INVALID_CONFIG; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
// validate_only checks and changes nothing.
func handleAlterConfigs(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	seen := countResources(req.Resources, func(rr kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
		return rr.ResourceType, rr.ResourceName
	})
	for _, rr := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		err := seen.repeated(rr.ResourceType, rr.ResourceName)
		if err == nil {
			err = c.s.replaceConfigs(ctx, rr, req.ValidateOnly)
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply{resp: resp}
}

// resourceCounts counts how often a request lists each resource, for
// AlterConfigs and IncrementalAlterConfigs, which refuse a resource listed
// more than once (every listing of it), as Kafka does.
type resourceCounts map[resourceKey]int

type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

func countResources[R any](rs []R, key func(R) (kmsg.ConfigResourceType, string)) resourceCounts {
	c := resourceCounts{}
	for _, r := range rs {
		typ, name := key(r)
		c[resourceKey{typ, name}]++
	}
	return c
}

// repeated is INVALID_REQUEST for a resource listed more than once.
func (c resourceCounts) repeated(typ kmsg.ConfigResourceType, name string) error {
	if c[resourceKey{typ, name}] > 1 {
		return fmt.Errorf("%w: resource %s listed more than once", errInvalidRequestErr, name)
	}
	return nil
}

// replaceConfigs replaces (or, validateOnly, checks) one resource's configs.
func (s *Server) replaceConfigs(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	names := map[string]bool{}
	for _, kv := range rr.Configs {
		if names[kv.Name] {
			return fmt.Errorf("%w: config %s listed more than once", errInvalidRequestErr, kv.Name)
		}
		names[kv.Name] = true
		if kv.Value == nil {
			return fmt.Errorf("%w: null value for %s", errInvalidRequestErr, kv.Name)
		}
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker:
		// The replication throttles (alterconfigs_throttle.go), then the rest.
		ops, err := s.replaceThrottleOps(&rr)
		if err != nil {
			return err
		}
		rest := func(validateOnly bool) error {
			if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
				return s.replaceBrokerConfigs(rr, validateOnly)
			}
			return s.replaceTopicConfigs(rr, validateOnly)
		}
		// A server whose only configs are the throttles has nothing else
		// to replace.
		restAny := len(rr.Configs) > 0 || s.caps.throttles == nil ||
			rr.ResourceType == kmsg.ConfigResourceTypeBroker && s.caps.brokerConfigs != nil ||
			rr.ResourceType == kmsg.ConfigResourceTypeTopic && s.caps.configs != nil
		return s.alterWithThrottles(ctx, rr.ResourceType, rr.ResourceName, ops, restAny, rest, validateOnly)
	case kmsg.ConfigResourceTypeBrokerLogger:
		return fmt.Errorf("%w: AlterConfigs does not alter broker loggers", errInvalidRequestErr)
	}
	return fmt.Errorf("%w: configs of resource type %d are not alterable by AlterConfigs", errInvalidRequestErr, rr.ResourceType)
}

// replaceTopicConfigs sets a topic's overrides to exactly the configs sent.
func (s *Server) replaceTopicConfigs(rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	a := s.caps.configs
	if a == nil {
		return fmt.Errorf("%w: this server's topic configs are the replication throttles only", log.ErrInvalidConfig)
	}
	topic := rr.ResourceName
	if err := log.ValidTopicName(topic); err != nil {
		return err
	}
	if _, err := a.TopicOverrides(topic); err != nil {
		return err
	}
	var o log.TopicConfig
	for _, kv := range rr.Configs {
		if err := SetTopicConfig(&o, kv.Name, *kv.Value); err != nil {
			return err
		}
	}
	if validateOnly {
		return a.ValidateTopicConfig(topic, o)
	}
	return a.AlterTopicConfig(topic, o)
}

// replaceBrokerConfigs sets the cluster's (resource "") or this node's
// dynamic broker configs to exactly those sent.
func (s *Server) replaceBrokerConfigs(rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	scope, err := s.brokerScope(rr.ResourceName)
	if err != nil {
		return err
	}
	a := s.caps.brokerConfigs
	if a == nil {
		return fmt.Errorf("%w: this broker has no dynamic broker configs", errInvalidRequestErr)
	}
	var d log.TopicConfig
	for _, kv := range rr.Configs {
		def, err := dynamicBrokerConfig(kv.Name)
		if err != nil {
			return err
		}
		if err := SetTopicConfig(&d, def.name, *kv.Value); err != nil {
			return fmt.Errorf("%s: %w", kv.Name, err)
		}
	}
	if validateOnly {
		return a.ValidateTopicDefaults(scope, d)
	}
	return a.AlterTopicDefaults(scope, d)
}

// brokerScope is the dynamic configs a BROKER resource names: "" the
// cluster's, this node's id its own; any other is INVALID_REQUEST, as
// Kafka answers a broker id that is not the receiver's.
func (s *Server) brokerScope(name string) (log.DefaultsScope, error) {
	if name == "" {
		return log.ClusterDefaults, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: broker id must be an integer, not %q", errInvalidRequestErr, name)
	}
	if int32(id) != s.cfg.NodeID {
		return 0, fmt.Errorf("%w: broker id %d is not this broker's (%d)", errInvalidRequestErr, id, s.cfg.NodeID)
	}
	return log.NodeDefaults, nil
}

// describeBrokerConfigs lists the dynamic broker configs of a BROKER
// resource for DescribeConfigs: each one's value and where it comes from
// (this node's set, the cluster's, the static configuration or Kafka's
// default).
func (s *Server) describeBrokerConfigs(rr kmsg.DescribeConfigsRequestResource, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	a := s.caps.brokerConfigs
	if a == nil {
		return nil, nil
	}
	scope, err := s.brokerScope(rr.ResourceName)
	if err != nil {
		return nil, err
	}
	node, cluster := a.TopicDefaults(log.NodeDefaults), a.TopicDefaults(log.ClusterDefaults)
	if scope == log.ClusterDefaults {
		node = log.TopicConfig{}
	}
	eff := a.EffectiveTopicDefaults()
	kafkaDefaults := log.TopicConfig{}.WithDefaults()
	want := map[string]bool{}
	for _, n := range rr.ConfigNames {
		want[n] = true
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, syn := range brokerConfigSynonyms {
		if rr.ConfigNames != nil && !want[syn[0]] {
			continue
		}
		d, _ := topicConfigDefOf(syn[1])
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.ConfigType = syn[0], d.typ
		rc.Value = kmsg.StringPtr(d.get(eff))
		switch {
		case d.isSetOn(node):
			rc.Source = kmsg.ConfigSourceDynamicBrokerConfig
		case d.isSetOn(cluster):
			rc.Source = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		case d.get(eff) != d.get(kafkaDefaults):
			rc.Source = kmsg.ConfigSourceStaticBrokerConfig
		default:
			rc.Source, rc.IsDefault = kmsg.ConfigSourceDefaultConfig, true
		}
		if scope == log.ClusterDefaults && rc.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
			continue // the cluster-wide resource describes what is set on it
		}
		if synonyms {
			addSelfSynonym(&rc)
		}
		out = append(out, rc)
	}
	return out, nil
}

// addSelfSynonym lists rc as its own synonym, with its value and source:
// what DescribeConfigs' include_synonyms gives a config set in one place.
func addSelfSynonym(rc *kmsg.DescribeConfigsResponseResourceConfig) {
	sy := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	sy.Name, sy.Value, sy.Source = rc.Name, rc.Value, rc.Source
	rc.ConfigSynonyms = append(rc.ConfigSynonyms, sy)
}

// dynamicBrokerConfig is the topic config a dynamic broker config stands
// for; INVALID_CONFIG for a read-only or an unknown one.
func dynamicBrokerConfig(name string) (*topicConfigDef, error) {
	topicName, ok := brokerTopicConfig(name)
	switch {
	case !ok && staticBrokerConfigs[name]:
		return nil, fmt.Errorf("%w: %s cannot be updated dynamically", log.ErrInvalidConfig, name)
	case !ok:
		return nil, fmt.Errorf("%w: unknown broker config %s (the dynamic ones are the log's defaults: log.retention.ms, log.segment.bytes, ...)", log.ErrInvalidConfig, name)
	}
	d, _ := topicConfigDefOf(topicName)
	return d, nil
}

// alterBrokerConfigs applies (or, validateOnly, checks) an
// IncrementalAlterConfigs of a BROKER resource to the dynamic broker
// configs of its scope: SET and DELETE on any, APPEND and SUBTRACT on
// log.cleanup.policy, the list one.
func (s *Server) alterBrokerConfigs(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	scope, err := s.brokerScope(rr.ResourceName)
	if err != nil {
		return err
	}
	a := s.caps.brokerConfigs
	cur := a.TopicDefaults(scope)
	names := map[string]bool{}
	for _, op := range rr.Configs {
		if names[op.Name] {
			return fmt.Errorf("%w: config %s listed more than once", errInvalidRequestErr, op.Name)
		}
		names[op.Name] = true
		d, err := dynamicBrokerConfig(op.Name)
		if err != nil {
			return err
		}
		switch op.Op {
		case opSet:
			if op.Value == nil {
				return fmt.Errorf("%w: %s: SET without a value", log.ErrInvalidConfig, op.Name)
			}
			err = SetTopicConfig(&cur, d.name, *op.Value)
		case opDelete:
			err = DeleteTopicConfig(&cur, d.name)
		case opAppend, opSubtract:
			if d.typ != kmsg.ConfigTypeList {
				return fmt.Errorf("%w: %s is not a list config: APPEND and SUBTRACT do not apply", errInvalidRequestErr, op.Name)
			}
			value := ""
			if op.Value != nil {
				value = *op.Value
			}
			err = alterList(&cur, a.EffectiveTopicDefaults(), d, op.Op == opAppend, splitList(value))
		default:
			return fmt.Errorf("%w: unknown operation %d on %s", errInvalidRequestErr, op.Op, op.Name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op.Name, err)
		}
	}
	if validateOnly {
		return a.ValidateTopicDefaults(scope, cur)
	}
	return a.AlterTopicDefaults(scope, cur)
}
