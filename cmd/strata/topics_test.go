package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/log"
)

func TestTopics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if out := ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders", "--partitions", "3",
		"--config", "retention.ms=-1", "--config", "cleanup.policy=compact"); out != "Created topic orders.\n" {
		t.Errorf("create: %q", out)
	}
	// Kafka's flag form of the action.
	ok(t, "", "", "topics", "--data-dir", dir, "--create", "--topic", "audit")
	if out := ok(t, "", "", "topics", "--data-dir", dir, "list"); out != "audit\norders\n" {
		t.Errorf("list: %q", out)
	}
	want := "Topic: orders\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,retention.ms=-1\n" +
		"\tTopic: orders\tPartition: 0\tStartOffset: 0\tEndOffset: 0\tSize: 0\tSegments: 1\n" +
		"\tTopic: orders\tPartition: 1\tStartOffset: 0\tEndOffset: 0\tSize: 0\tSegments: 1\n" +
		"\tTopic: orders\tPartition: 2\tStartOffset: 0\tEndOffset: 0\tSize: 0\tSegments: 1\n"
	if out := ok(t, "", "", "topics", "--data-dir", dir, "describe", "--topic", "orders"); out != want {
		t.Errorf("describe:\n%s\nwant:\n%s", out, want)
	}
	r := strata(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders")
	if r.code != exitProblem || !strings.Contains(r.stderr, "topic already exists") {
		t.Errorf("create twice: exit %d, stderr %q", r.code, r.stderr)
	}
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders", "--if-not-exists")
	if out := ok(t, "", "", "topics", "--data-dir", dir, "delete", "--topic", "audit"); out != "Deleted topic audit.\n" {
		t.Errorf("delete: %q", out)
	}
	if out := ok(t, "", "", "topics", "--data-dir", dir, "list"); out != "orders\n" {
		t.Errorf("list after delete: %q", out)
	}
	r = strata(t, "", "", "topics", "--data-dir", dir, "delete", "--topic", "audit")
	if r.code != exitProblem || !strings.Contains(r.stderr, "unknown topic") {
		t.Errorf("delete unknown: exit %d, stderr %q", r.code, r.stderr)
	}
	ok(t, "", "", "topics", "--data-dir", dir, "delete", "--topic", "audit", "--if-exists")

	// The library opens what the command wrote.
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	top, err := b.Topic("orders")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := top.Config(); top.Partitions() != 3 || cfg.RetentionTime >= 0 || cfg.Cleanup != log.CleanupCompact {
		t.Errorf("orders: %d partitions, config %+v", top.Partitions(), cfg)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTopicsDescribeGolden(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	golden(t, "topics_describe", ok(t, dir, "", "topics", "--data-dir", ".", "describe"))
}

func TestTopicsBadInput(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"topics", "list"}, exitUsage, "--data-dir or --bootstrap-server is required"},
		{[]string{"topics", "--data-dir", dir}, exitUsage, "want exactly one action"},
		{[]string{"topics", "--data-dir", dir, "list", "--describe"}, exitUsage, "want exactly one action"},
		{[]string{"topics", "--data-dir", dir, "frob"}, exitUsage, `unknown action "frob"`},
		{[]string{"topics", "--data-dir", dir, "create"}, exitUsage, "create needs --topic"},
		{[]string{"topics", "--data-dir", dir, "create", "--topic", "a/b"}, exitUsage, "invalid topic name"},
		{[]string{"topics", "--data-dir", dir, "create", "--topic", "x", "--config", "retention.ms"}, exitUsage, "want KEY=VALUE"},
		{[]string{"topics", "--data-dir", dir, "create", "--topic", "x", "--config", "colour=blue"}, exitUsage, `unknown configuration "colour"`},
		{[]string{"topics", "--data-dir", dir, "create", "--topic", "x", "--replication-factor", "3"}, exitProblem, "invalid config"},
		{[]string{"topics", "--data-dir", dir, "describe", "--topic", "nope"}, exitProblem, "unknown topic"},
		{[]string{"topics", "--data-dir", dir, "alter", "--topic", "events"}, exitUsage, "alter needs --partitions, --config or --delete-config"},
		{[]string{"topics", "--data-dir", dir, "alter", "--topic", "events", "--replication-factor", "2"}, exitUsage, "cannot change the replication factor"},
		{[]string{"topics", "--data-dir", dir, "alter", "--topic", "events", "--config", "retention.ms"}, exitUsage, "want KEY=VALUE"},
		{[]string{"topics", "--data-dir", dir, "alter", "--topic", "events", "--config", "retention.ms=1", "--delete-config", "retention.ms"}, exitUsage, "named twice"},
		{[]string{"topics", "--data-dir", dir, "describe", "--delete-config", "retention.ms"}, exitUsage, "--delete-config is for alter"},
		{[]string{"topics", "--data-dir", dir, "alter", "--topic", "nope", "--partitions", "9"}, exitProblem, "unknown topic"},
		{[]string{"topics", "--data-dir", missing, "list"}, exitProblem, "no such file or directory"},
		{[]string{"topics", "--data-dir", t.TempDir(), "list"}, exitProblem, "is not a Strata data dir (no topics.json)"},
		{[]string{"topics", "--bootstrap-server", "127.0.0.1:1", "list"}, exitProblem, "connect to --bootstrap-server 127.0.0.1:1"},
		{[]string{"topics", "--bootstrap-server", "localhost:9092", "--data-dir", dir, "list"}, exitUsage, "not both"},
	} {
		r := strata(t, "", "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("strata %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
}

// TestDirInUse: every command that opens a data dir refuses one a broker
// holds, with a message that says so.
func TestDirInUse(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, args := range [][]string{
		{"topics", "--data-dir", dir, "list"},
		{"produce", "--data-dir", dir, "--topic", "events"},
		{"consume", "--data-dir", dir, "--topic", "events"},
		{"verify", dir},
	} {
		r := strata(t, "", "x\n", args...)
		if r.code != exitProblem || !strings.Contains(r.stderr, "in use by a running broker") {
			t.Errorf("strata %v: exit %d, stderr %q; want 1 and in use", args, r.code, r.stderr)
		}
	}
}

// TestTopicsAlter alters a data dir's topic as kafka-topics.sh --alter and
// kafka-configs.sh --alter would: more partitions, configs set and deleted;
// a refused alteration changes nothing.
func TestTopicsAlter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders", "--partitions", "2", "--config", "retention.ms=-1")
	if out := ok(t, "", "", "topics", "--data-dir", dir, "alter", "--topic", "orders", "--partitions", "4",
		"--config", "max.message.bytes=5000", "--config", "compression.type=zstd"); out != "Altered topic orders.\n" {
		t.Errorf("alter: %q", out)
	}
	describe := func() string {
		t.Helper()
		out := ok(t, "", "", "topics", "--data-dir", dir, "describe", "--topic", "orders")
		first, _, _ := strings.Cut(out, "\n")
		return first
	}
	if got, want := describe(), "Topic: orders\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: max.message.bytes=5000,retention.ms=-1"; got != want {
		t.Errorf("after alter: %q, want %q", got, want)
	}
	ok(t, "", "", "topics", "--data-dir", dir, "alter", "--topic", "orders", "--delete-config", "retention.ms")
	if got, want := describe(), "Topic: orders\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: max.message.bytes=5000"; got != want {
		t.Errorf("after delete-config: %q, want %q", got, want)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--partitions", "3"}, "invalid partition count"},
		{[]string{"--partitions", "4"}, "invalid partition count"},
		{[]string{"--partitions", "6", "--config", "colour=blue"}, "unknown topic config colour"},
		{[]string{"--partitions", "6", "--config", "segment.bytes=0"}, "invalid config"},
		{[]string{"--delete-config", "colour"}, "unknown topic config colour"},
	} {
		r := strata(t, "", "", append([]string{"topics", "--data-dir", dir, "alter", "--topic", "orders"}, tc.args...)...)
		if r.code != exitProblem || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("alter %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, exitProblem, tc.msg)
		}
	}
	if got, want := describe(), "Topic: orders\tPartitionCount: 4\tReplicationFactor: 1\tConfigs: max.message.bytes=5000"; got != want {
		t.Errorf("refused alterations changed the topic: %q, want %q", got, want)
	}

	// The library sees what the command did, after a restart.
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg, err := b.TopicConfig("orders")
	if err != nil {
		t.Fatal(err)
	}
	o, err := b.TopicOverrides("orders")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Partitions != 4 || cfg.MaxMessageBytes != 5000 || cfg.Compression != log.TopicCompressionZstd || cfg.RetentionTime < 0 ||
		o != (log.TopicConfig{MaxMessageBytes: 5000, Compression: log.TopicCompressionZstd}) {
		t.Errorf("orders: config %+v, overrides %+v", cfg, o)
	}
}

// TestTopicsAlterBootstrapServer alters a topic of strata serve through
// CreatePartitions and IncrementalAlterConfigs.
func TestTopicsAlterBootstrapServer(t *testing.T) {
	s := startServe(t, t.TempDir())
	bs := []string{"--bootstrap-server", s.addr}
	run := func(args ...string) string {
		t.Helper()
		return ok(t, "", "", append(args, bs...)...)
	}
	run("topics", "create", "--topic", "orders", "--partitions", "1", "--config", "retention.ms=3600000")
	if out := run("topics", "alter", "--topic", "orders", "--partitions", "3", "--config", "retention.ms=1000", "--config", "segment.bytes=1048576"); out != "Altered topic orders.\n" {
		t.Errorf("alter: %q", out)
	}
	describe := func() string {
		t.Helper()
		first, _, _ := strings.Cut(run("topics", "describe", "--topic", "orders"), "\n")
		return first
	}
	if got, want := describe(), "Topic: orders\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=1000,segment.bytes=1048576"; got != want {
		t.Errorf("after alter: %q, want %q", got, want)
	}
	run("topics", "alter", "--topic", "orders", "--delete-config", "retention.ms")
	if got, want := describe(), "Topic: orders\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: segment.bytes=1048576"; got != want {
		t.Errorf("after delete-config: %q, want %q", got, want)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--partitions", "2"}, "INVALID_PARTITIONS"},
		{[]string{"--partitions", "5", "--config", "retention.ms=soon"}, "INVALID_CONFIG"},
		{[]string{"--config", "colour=blue"}, "INVALID_CONFIG"},
	} {
		r := strata(t, "", "", append(append([]string{"topics", "alter", "--topic", "orders"}, tc.args...), bs...)...)
		if r.code != exitProblem || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("alter %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, exitProblem, tc.msg)
		}
	}
	if got, want := describe(), "Topic: orders\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: segment.bytes=1048576"; got != want {
		t.Errorf("refused alterations changed the topic: %q, want %q", got, want)
	}
	if r := strata(t, "", "", append([]string{"topics", "alter", "--topic", "nope", "--partitions", "2"}, bs...)...); r.code != exitProblem || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("alter unknown: exit %d, %q", r.code, r.stderr)
	}
}
