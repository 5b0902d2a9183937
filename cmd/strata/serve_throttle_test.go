package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/replica"
)

// The replication throttles parse as bytes per second and reach the
// member's replica.Config; a bad value is refused and changes nothing.
func TestThrottleOverride(t *testing.T) {
	var c serveConfig
	if err := c.override("leader.replication.throttled.rate=1048576"); err != nil {
		t.Fatal(err)
	}
	if err := c.override("follower.replication.throttled.rate=2097152"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"0", "-1", "1MB", "", "9223372036854775808"} {
		err := c.override("leader.replication.throttled.rate=" + bad)
		if err == nil || !strings.Contains(err.Error(), "bytes per second") {
			t.Fatalf("leader.replication.throttled.rate=%q: %v", bad, err)
		}
	}
	var cfg replica.Config
	c.throttles.apply(&cfg)
	if cfg.LeaderReplicationThrottledRate != 1048576 || cfg.FollowerReplicationThrottledRate != 2097152 {
		t.Fatalf("config: leader %d, follower %d", cfg.LeaderReplicationThrottledRate, cfg.FollowerReplicationThrottledRate)
	}
	var none serveConfig
	if none.throttles.apply(&cfg); cfg.LeaderReplicationThrottledRate != 0 || cfg.FollowerReplicationThrottledRate != 0 {
		t.Fatalf("no override: leader %d, follower %d", cfg.LeaderReplicationThrottledRate, cfg.FollowerReplicationThrottledRate)
	}
}

// strata serve: a cluster member starts with the throttles and logs them;
// a bad value is a usage error; a standalone broker refuses them.
func TestServeClusterThrottles(t *testing.T) {
	ports := freePorts(t, 2)
	tmp := t.TempDir()
	member := func(dir string, extra ...string) []string {
		return append([]string{"serve", "--data-dir", filepath.Join(tmp, dir), "--node-id", "1", "--listen", ports[0],
			"--raft-addr", ports[1], "--raft-loopback", "--peer", "1=" + ports[0] + "," + ports[1]}, extra...)
	}
	r := strata(t, "", "", member("bad", "--override", "follower.replication.throttled.rate=-5")...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "follower.replication.throttled.rate") {
		t.Fatalf("a negative throttle: exit %d: %s", r.code, r.stderr)
	}
	r = strata(t, "", "", "serve", "--data-dir", filepath.Join(tmp, "alone"), "--listen", "127.0.0.1:0",
		"--override", "leader.replication.throttled.rate=1048576")
	if r.code != exitUsage || !strings.Contains(r.stderr, "cluster member") {
		t.Fatalf("a throttle on a standalone broker: exit %d: %s", r.code, r.stderr)
	}
	args := member("m", "--override", "leader.replication.throttled.rate=1048576", "--override", "follower.replication.throttled.rate=2097152")
	s := startServe(t, filepath.Join(tmp, "m"), args[3:]...)
	_, logs := s.stopTimed(t)
	for _, want := range []string{"leader_replication_throttled_rate=1048576", "follower_replication_throttled_rate=2097152"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the member does not log %s:\n%s", want, logs)
		}
	}
}
