package main

import (
	"strings"
	"testing"
)

// TestConfigsKafkaRefuses: the topic configs Kafka refuses (issue 25:
// segment.bytes=1, retention.ms=-5, min.insync.replicas above the
// replication factor) are refused by serve --override, before the broker
// starts, and by topics create --config, with the config named.
func TestConfigsKafkaRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, kv := range []string{"log.segment.bytes=1", "log.retention.ms=-5", "min.insync.replicas=2"} {
		r := strata(t, "", "", "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--override", kv)
		name := strings.TrimPrefix(kv[:strings.IndexByte(kv, '=')], "log.")
		if r.code == 0 || !strings.Contains(r.stderr, name) {
			t.Errorf("serve --override %s: exit %d, stderr %q; want a failure naming %s", kv, r.code, r.stderr, name)
		}
	}
	for _, kv := range []string{"segment.bytes=1", "retention.ms=-5", "min.insync.replicas=2"} {
		r := strata(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "t", "--config", kv)
		if r.code != exitProblem && r.code != exitUsage || !strings.Contains(r.stderr, kv[:strings.IndexByte(kv, '=')]) {
			t.Errorf("topics create --config %s: exit %d, stderr %q", kv, r.code, r.stderr)
		}
	}
	if out := ok(t, "", "", "topics", "--data-dir", dir, "list"); out != "" {
		t.Errorf("refused creates made topics: %q", out)
	}
}
