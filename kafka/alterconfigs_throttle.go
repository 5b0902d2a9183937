package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replication throttles as Kafka's dynamic configs: two broker configs,
// the byte rates, and two topic configs, the replicas they apply to
// ("*" or partition:broker lists). A cluster member keeps them in its
// metadata (ThrottleConfigBackend); a standalone broker replicates
// nothing and refuses them (INVALID_CONFIG).
const (
	LeaderThrottledRateConfig       = "leader.replication.throttled.rate"
	FollowerThrottledRateConfig     = "follower.replication.throttled.rate"
	LeaderThrottledReplicasConfig   = "leader.replication.throttled.replicas"
	FollowerThrottledReplicasConfig = "follower.replication.throttled.replicas"
)

// ThrottleConfigBackend keeps the replication throttles of a cluster (a
// member of package replica implements it). Values are strings in
// Kafka's units: a rate in bytes per second, a replica list.
type ThrottleConfigBackend interface {
	// ThrottleConfigs returns the throttles set on a BROKER resource
	// ("" the cluster's default, or a broker id) or a TOPIC
	// (log.ErrUnknownTopic).
	ThrottleConfigs(typ kmsg.ConfigResourceType, name string) (map[string]string, error)
	// AlterThrottleConfigs sets and deletes throttles of one resource,
	// durably and for every member (log.ErrInvalidConfig for a name that
	// is not one of the resource's throttles or a bad value,
	// log.ErrUnknownTopic); validateOnly checks and changes nothing.
	AlterThrottleConfigs(ctx context.Context, typ kmsg.ConfigResourceType, name string, set map[string]string, del []string, validateOnly bool) error
	// StaticThrottleRates are the rates this node was started with
	// (0: none), in effect where no dynamic one is set.
	StaticThrottleRates() (leader, follower int64)
}

// throttleConfig reports whether name is a replication throttle of
// resource type typ.
func throttleConfig(typ kmsg.ConfigResourceType, name string) bool {
	switch typ {
	case kmsg.ConfigResourceTypeBroker:
		return name == LeaderThrottledRateConfig || name == FollowerThrottledRateConfig
	case kmsg.ConfigResourceTypeTopic:
		return name == LeaderThrottledReplicasConfig || name == FollowerThrottledReplicasConfig
	}
	return false
}

// hasThrottles reports whether resources of type typ have throttles.
func hasThrottles(typ kmsg.ConfigResourceType) bool {
	return typ == kmsg.ConfigResourceTypeBroker || typ == kmsg.ConfigResourceTypeTopic
}

// throttleNames are typ's throttles, sorted.
func throttleNames(typ kmsg.ConfigResourceType) []string {
	if typ == kmsg.ConfigResourceTypeBroker {
		return []string{FollowerThrottledRateConfig, LeaderThrottledRateConfig}
	}
	return []string{FollowerThrottledReplicasConfig, LeaderThrottledReplicasConfig}
}

// errNoThrottles: a throttle sent to a server that replicates nothing.
func errNoThrottles(name string) error {
	return fmt.Errorf("%w: %s: a standalone broker replicates nothing (replication throttles are a cluster member's)", log.ErrInvalidConfig, name)
}

// throttleOps are the throttles one alteration changes: the values set,
// the names deleted.
type throttleOps struct {
	set map[string]string
	del []string
}

func (o *throttleOps) any() bool { return len(o.set)+len(o.del) > 0 }

// incrementalThrottleOps takes rr's operations on throttles out of rr
// (what is left goes on as before) and turns them into throttleOps
// against what is set now: SET and DELETE; APPEND and SUBTRACT on the
// replica lists (Kafka's LIST type).
func (s *Server) incrementalThrottleOps(rr *kmsg.IncrementalAlterConfigsRequestResource) (throttleOps, error) {
	var ops throttleOps
	var rest []kmsg.IncrementalAlterConfigsRequestResourceConfig
	var cur map[string]string
	for _, op := range rr.Configs {
		if !throttleConfig(rr.ResourceType, op.Name) {
			rest = append(rest, op)
			continue
		}
		t := s.caps.throttles
		if t == nil {
			return ops, errNoThrottles(op.Name)
		}
		if ops.set == nil {
			ops.set = map[string]string{}
			var err error
			if cur, err = t.ThrottleConfigs(rr.ResourceType, rr.ResourceName); err != nil {
				return ops, err
			}
		}
		if _, dup := ops.set[op.Name]; dup || slices.Contains(ops.del, op.Name) {
			return ops, fmt.Errorf("%w: config %s listed more than once", errInvalidRequestErr, op.Name)
		}
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		switch op.Op {
		case opSet:
			if op.Value == nil {
				return ops, fmt.Errorf("%w: %s: SET without a value", log.ErrInvalidConfig, op.Name)
			}
			ops.set[op.Name] = value
		case opDelete:
			ops.del = append(ops.del, op.Name)
		case opAppend, opSubtract:
			if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
				return ops, fmt.Errorf("%w: %s is not a list config: APPEND and SUBTRACT do not apply", errInvalidRequestErr, op.Name)
			}
			list := splitList(cur[op.Name])
			for _, it := range splitList(value) {
				i := slices.Index(list, it)
				switch {
				case op.Op == opAppend && i < 0:
					list = append(list, it)
				case op.Op == opSubtract && i >= 0:
					list = slices.Delete(list, i, i+1)
				}
			}
			ops.set[op.Name] = strings.Join(list, ",")
		default:
			return ops, fmt.Errorf("%w: unknown operation %d on %s", errInvalidRequestErr, op.Op, op.Name)
		}
	}
	rr.Configs = rest
	return ops, nil
}

// replaceThrottleOps takes rr's throttles out of rr, for the legacy
// AlterConfigs: the throttles sent are set, those set and not sent
// deleted. Without throttles here, none is sent and there is none to
// delete.
func (s *Server) replaceThrottleOps(rr *kmsg.AlterConfigsRequestResource) (throttleOps, error) {
	var ops throttleOps
	var rest []kmsg.AlterConfigsRequestResourceConfig
	for _, kv := range rr.Configs {
		if !throttleConfig(rr.ResourceType, kv.Name) {
			rest = append(rest, kv)
			continue
		}
		if s.caps.throttles == nil {
			return ops, errNoThrottles(kv.Name)
		}
		if ops.set == nil {
			ops.set = map[string]string{}
		}
		ops.set[kv.Name] = *kv.Value // not nil: replaceConfigs checked
	}
	rr.Configs = rest
	if t := s.caps.throttles; t != nil && hasThrottles(rr.ResourceType) {
		cur, err := t.ThrottleConfigs(rr.ResourceType, rr.ResourceName)
		if err != nil {
			return ops, err
		}
		for _, k := range slices.Sorted(maps.Keys(cur)) {
			if _, sent := ops.set[k]; !sent {
				ops.del = append(ops.del, k)
			}
		}
	}
	return ops, nil
}

// alterWithThrottles applies (or, validateOnly, checks) the operations of
// a TOPIC or BROKER resource: the throttles through the
// ThrottleConfigBackend, the others as before (rest). Both parts are
// checked before either is applied.
func (s *Server) alterWithThrottles(ctx context.Context, typ kmsg.ConfigResourceType, name string, ops throttleOps, restAny bool, rest func(validateOnly bool) error, validateOnly bool) error {
	if typ == kmsg.ConfigResourceTypeBroker && ops.any() {
		if _, err := s.brokerScope(name); err != nil {
			return err
		}
	}
	if err := s.alterThrottles(ctx, typ, name, ops, true); err != nil {
		return err
	}
	if restAny {
		if err := rest(true); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	if restAny {
		if err := rest(false); err != nil {
			return err
		}
	}
	return s.alterThrottles(ctx, typ, name, ops, false)
}

// alterThrottles applies (or checks) ops on rr's resource.
func (s *Server) alterThrottles(ctx context.Context, typ kmsg.ConfigResourceType, name string, ops throttleOps, validateOnly bool) error {
	if !ops.any() {
		return nil
	}
	return s.caps.throttles.AlterThrottleConfigs(ctx, typ, name, ops.set, ops.del, validateOnly)
}

// describeThrottles lists the throttles of a resource for DescribeConfigs
// (nothing without throttles here): a topic's lists (DYNAMIC_TOPIC_CONFIG
// or the default, none), a broker's rates (its own, the cluster's default,
// the static one or Kafka's default, Long.MAX_VALUE: none). scope is the
// broker resource's (brokerScope).
func (s *Server) describeThrottles(typ kmsg.ConfigResourceType, name string, names []string, synonyms bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	t := s.caps.throttles
	if t == nil {
		return nil, nil
	}
	want := func(n string) bool { return names == nil || slices.Contains(names, n) }
	var own, cluster map[string]string
	var err error
	if typ == kmsg.ConfigResourceTypeBroker {
		if cluster, err = t.ThrottleConfigs(typ, ""); err != nil {
			return nil, err
		}
		if name != "" {
			if own, err = t.ThrottleConfigs(typ, name); err != nil {
				return nil, err
			}
		}
	} else if own, err = t.ThrottleConfigs(typ, name); err != nil {
		return nil, err
	}
	staticLeader, staticFollower := t.StaticThrottleRates()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range throttleNames(typ) {
		if !want(n) {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name = n
		if typ == kmsg.ConfigResourceTypeTopic {
			rc.ConfigType = kmsg.ConfigTypeList
			if v, ok := own[n]; ok {
				rc.Value, rc.Source = kmsg.StringPtr(v), kmsg.ConfigSourceDynamicTopicConfig
			} else {
				rc.Value, rc.Source, rc.IsDefault = kmsg.StringPtr(""), kmsg.ConfigSourceDefaultConfig, true
			}
		} else {
			rc.ConfigType = kmsg.ConfigTypeLong
			static := staticLeader
			if n == FollowerThrottledRateConfig {
				static = staticFollower
			}
			if v, ok := own[n]; ok {
				rc.Value, rc.Source = kmsg.StringPtr(v), kmsg.ConfigSourceDynamicBrokerConfig
			} else if v, ok := cluster[n]; ok {
				rc.Value, rc.Source = kmsg.StringPtr(v), kmsg.ConfigSourceDynamicDefaultBrokerConfig
			} else if static > 0 && name != "" {
				rc.Value, rc.Source = kmsg.StringPtr(strconv.FormatInt(static, 10)), kmsg.ConfigSourceStaticBrokerConfig
			} else {
				rc.Value, rc.Source, rc.IsDefault = kmsg.StringPtr(strconv.FormatInt(kafkaNever, 10)), kmsg.ConfigSourceDefaultConfig, true
			}
			if name == "" && rc.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				continue // the cluster-wide resource describes what is set on it
			}
		}
		if synonyms {
			addSelfSynonym(&rc)
		}
		out = append(out, rc)
	}
	return out, nil
}
