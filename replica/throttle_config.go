package replica

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// The replication throttles as dynamic configs (throttle.go says what
// they do): the rates are broker configs, the replica lists topic configs,
// kept in the metadata (controller.AlterConfigs) so every member applies
// the same ones and a restart keeps them.

var _ kafka.ThrottleConfigBackend = kafkaBackend{}

// Which replicas of a partition this member throttles (partState.throttle).
const (
	leaderListed   uint32 = 1 << iota // named in the topic's leader list, or "*"
	leaderUnset                       // the topic has no leader list
	followerListed                    // named in the topic's follower list, or "*"
	followerUnset                     // the topic has no follower list
)

// throttledReplicas is a parsed replica list: "*" (all), or the brokers
// named per partition.
type throttledReplicas struct {
	all   bool
	parts map[int][]int
}

// parseThrottledReplicas parses Kafka's replica list: "*", or
// partition:broker pairs separated by commas ("" none), as Kafka's
// ThrottledReplicaListValidator takes it.
func parseThrottledReplicas(v string) (throttledReplicas, error) {
	var t throttledReplicas
	v = strings.TrimSpace(v)
	if v == "*" {
		t.all = true
		return t, nil
	}
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		ps, bs, ok := strings.Cut(item, ":")
		p, perr := strconv.Atoi(strings.TrimSpace(ps))
		b, berr := strconv.Atoi(strings.TrimSpace(bs))
		if !ok || perr != nil || berr != nil || p < 0 || b < 0 {
			return t, fmt.Errorf("%w: replication throttled replicas %q: want \"*\" or partition:broker pairs separated by commas", log.ErrInvalidConfig, v)
		}
		if t.parts == nil {
			t.parts = map[int][]int{}
		}
		t.parts[p] = append(t.parts[p], b)
	}
	return t, nil
}

func (t throttledReplicas) lists(partition, broker int) bool {
	if t.all {
		return true
	}
	for _, b := range t.parts[partition] {
		if b == broker {
			return true
		}
	}
	return false
}

// parseThrottleRate parses a rate config: bytes per second, 1 or more;
// Long.MAX_VALUE (Kafka's default) is no throttle (0). Kafka takes 0,
// which stops the throttled replicas altogether; Strata refuses it.
func parseThrottleRate(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: replication throttled rate %q: want bytes per second, 1 or more (%d: none)", log.ErrInvalidConfig, v, int64(math.MaxInt64))
	}
	if n == math.MaxInt64 {
		return 0, nil
	}
	return n, nil
}

// topicThrottles are the parsed lists of one topic, for member id: a
// partition's flags.
type topicThrottles struct {
	leader, follower       throttledReplicas
	leaderSet, followerSet bool
}

func topicThrottlesOf(configs map[string]string) topicThrottles {
	var t topicThrottles
	if v, ok := configs[kafka.LeaderThrottledReplicasConfig]; ok {
		t.leaderSet = true
		t.leader, _ = parseThrottledReplicas(v) // checked before it was committed
	}
	if v, ok := configs[kafka.FollowerThrottledReplicasConfig]; ok {
		t.followerSet = true
		t.follower, _ = parseThrottledReplicas(v)
	}
	return t
}

func (t topicThrottles) flags(partition, id int) uint32 {
	var f uint32
	switch {
	case !t.leaderSet:
		f |= leaderUnset
	case t.leader.lists(partition, id):
		f |= leaderListed
	}
	switch {
	case !t.followerSet:
		f |= followerUnset
	case t.follower.lists(partition, id):
		f |= followerListed
	}
	return f
}

// throttled reports whether ps's replicas out of the ISR are throttled on
// this member's side listed/unset under quota q (throttle.go).
func isThrottled(ps *partState, q *replicationQuota, listed, unset uint32) bool {
	f := ps.throttle.Load()
	return q.enabled() && (f&listed != 0 || f&unset != 0 && !q.dynamic.Load())
}

// applyThrottleRates puts into effect the rates img sets for this member.
func (b *Broker) applyThrottleRates(img *controller.Image) {
	for _, q := range []struct {
		quota *replicationQuota
		key   string
	}{{b.leaderQuota, kafka.LeaderThrottledRateConfig}, {b.followerQuota, kafka.FollowerThrottledRateConfig}} {
		v, ok := img.BrokerConfig(b.cfg.ID, q.key)
		rate, err := parseThrottleRate(v)
		if ok && err != nil {
			b.log.Warn("replica: bad replication throttle in the metadata", "config", q.key, "err", err)
		}
		q.quota.setDynamic(rate, ok && err == nil)
	}
}

// throttleResource is the controller's resource of a Kafka one.
func throttleResource(typ kmsg.ConfigResourceType) (controller.ConfigResourceType, error) {
	switch typ {
	case kmsg.ConfigResourceTypeBroker:
		return controller.BrokerConfigs, nil
	case kmsg.ConfigResourceTypeTopic:
		return controller.TopicConfigs, nil
	}
	return 0, fmt.Errorf("%w: no replication throttles on resource type %d", log.ErrInvalidConfig, typ)
}

// isThrottle reports whether key is a throttle of resource type typ.
func isThrottle(typ controller.ConfigResourceType, key string) bool {
	if typ == controller.BrokerConfigs {
		return key == kafka.LeaderThrottledRateConfig || key == kafka.FollowerThrottledRateConfig
	}
	return key == kafka.LeaderThrottledReplicasConfig || key == kafka.FollowerThrottledReplicasConfig
}

// ThrottleConfigs returns the throttles set on a resource
// (kafka.ThrottleConfigBackend).
func (b kafkaBackend) ThrottleConfigs(typ kmsg.ConfigResourceType, name string) (map[string]string, error) {
	ct, err := throttleResource(typ)
	if err != nil {
		return nil, err
	}
	img := b.img.Load()
	var all map[string]string
	if ct == controller.BrokerConfigs {
		all = img.BrokerConfigs(name)
	} else {
		t, ok := img.Topic(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", log.ErrUnknownTopic, name)
		}
		all = t.Configs
	}
	out := map[string]string{}
	for k, v := range all {
		if isThrottle(ct, k) {
			out[k] = v
		}
	}
	return out, nil
}

// AlterThrottleConfigs sets and deletes throttles through the controller
// and returns once this member applies them (kafka.ThrottleConfigBackend).
func (b kafkaBackend) AlterThrottleConfigs(ctx context.Context, typ kmsg.ConfigResourceType, name string, set map[string]string, del []string, validateOnly bool) error {
	ct, err := throttleResource(typ)
	if err != nil {
		return err
	}
	for k, v := range set {
		switch {
		case !isThrottle(ct, k):
			return fmt.Errorf("%w: %s is not a replication throttle of a %s", log.ErrInvalidConfig, k, ct)
		case ct == controller.BrokerConfigs:
			_, err = parseThrottleRate(v)
		default:
			_, err = parseThrottledReplicas(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, k := range del {
		if !isThrottle(ct, k) {
			return fmt.Errorf("%w: %s is not a replication throttle of a %s", log.ErrInvalidConfig, k, ct)
		}
	}
	if ct == controller.TopicConfigs {
		if _, ok := b.img.Load().Topic(name); !ok {
			return fmt.Errorf("%w: %s", log.ErrUnknownTopic, name)
		}
	} else if name != "" {
		if id, err := strconv.Atoi(name); err != nil || id <= 0 || strconv.Itoa(id) != name {
			return fmt.Errorf("%w: broker resource %q: a broker id or \"\"", log.ErrInvalidConfig, name)
		}
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := b.securityContext(ctx)
	defer cancel()
	errs, v, err := b.ctl.AlterConfigs(ctx, []controller.ConfigAlteration{{Type: ct, Name: name, Set: set, Delete: del}})
	if err != nil {
		return controllerErr(err)
	}
	if errs[0] != nil {
		return controllerErr(errs[0])
	}
	return b.applied(ctx, v)
}

// StaticThrottleRates are Config's rates (kafka.ThrottleConfigBackend).
func (b kafkaBackend) StaticThrottleRates() (leader, follower int64) {
	return b.cfg.LeaderReplicationThrottledRate, b.cfg.FollowerReplicationThrottledRate
}
