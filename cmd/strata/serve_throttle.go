package main

import (
	"fmt"
	"strconv"

	"github.com/strata-log/strata/replica"
)

// throttleOverrideKeys are the replication throttles a cluster member takes
// with --override, Kafka's names: bytes per second a member sends as a
// leader to, and fetches as a follower for, replicas catching up (a
// reassignment's new ones), so a move does not starve clients.
var throttleOverrideKeys = []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"}

// replicationThrottles are the throttles given with --override; set when
// any was (a standalone broker replicates nothing and refuses them).
type replicationThrottles struct {
	leader, follower int64
	set              bool
}

// throttleOverride applies one of the replication throttles; false if k
// is not one. The value is bytes per second, at least 1; Kafka's default,
// Long.MAX_VALUE, is no throttle, as is leaving the setting out.
func (c *serveConfig) throttleOverride(k, v string) (bool, error) {
	var dst *int64
	switch k {
	case "leader.replication.throttled.rate":
		dst = &c.throttles.leader
	case "follower.replication.throttled.rate":
		dst = &c.throttles.follower
	default:
		return false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return true, fmt.Errorf("%s: want bytes per second, a whole number from 1 (not %q)", k, v)
	}
	*dst, c.throttles.set = n, true
	return true, nil
}

// apply sets the throttles given on cfg (0, not given: no throttle).
func (t replicationThrottles) apply(cfg *replica.Config) {
	cfg.LeaderReplicationThrottledRate = t.leader
	cfg.FollowerReplicationThrottledRate = t.follower
}
