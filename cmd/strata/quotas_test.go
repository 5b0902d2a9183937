package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strata quotas on a stopped data dir: alter, describe, delete, bad input
// refused; the quotas survive for the next broker.
func TestQuotasDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if r := strata(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders"); r.code != 0 {
		t.Fatalf("create topic: %d %s", r.code, r.stderr)
	}
	run := func(args ...string) result {
		t.Helper()
		r := strata(t, "", "", append([]string{"quotas", "--data-dir", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("quotas %v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	run("--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
	run("--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=1024")
	run("--alter", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=4096")
	r := run("--describe")
	for _, want := range []string{
		"Quota configs for users/alice are consumer_byte_rate=2097152,producer_byte_rate=1048576\n",
		"Quota configs for users/alice/clients/<default> are producer_byte_rate=1024\n",
		"Quota configs for clients/<default> are consumer_byte_rate=4096\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--describe lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run("--describe", "--entity-type", "users", "--entity-name", "alice")
	if strings.Count(r.stdout, "Quota configs") != 1 || !strings.Contains(r.stdout, "users/alice are") {
		t.Errorf("--describe of alice: %s", r.stdout)
	}
	r = run("--describe", "--entity-type", "clients")
	if strings.Count(r.stdout, "Quota configs") != 1 || !strings.Contains(r.stdout, "clients/<default> are") {
		t.Errorf("--describe of clients: %s", r.stdout)
	}
	run("--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate")
	r = run("--describe", "--entity-type", "users", "--entity-name", "alice")
	if !strings.Contains(r.stdout, "users/alice are producer_byte_rate=1048576\n") {
		t.Errorf("after --delete-config: %s", r.stdout)
	}
	before := r.stdout
	for _, bad := range [][]string{
		{"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=-1"},
		{"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "request_percentage=10"},
		{"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate"},
		{"--alter", "--entity-type", "topics", "--entity-name", "orders", "--add-config", "producer_byte_rate=1"},
		{"--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"},
		{"--alter", "--entity-name", "alice", "--add-config", "producer_byte_rate=1"},
		{"--alter", "--entity-type", "users", "--entity-name", "alice"},
		{"--describe", "--alter"},
	} {
		r := strata(t, "", "", append([]string{"quotas", "--data-dir", dir}, bad...)...)
		if r.code == 0 {
			t.Errorf("quotas %v succeeded: %s", bad, r.stdout)
		}
	}
	if r := run("--describe", "--entity-type", "users", "--entity-name", "alice"); r.stdout != before {
		t.Errorf("a refused alter changed the quotas: %s", r.stdout)
	}
}

// strata quotas over the Kafka protocol: only a user allowed to alter
// configs may.
func TestQuotasServe(t *testing.T) {
	tmp := t.TempDir()
	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("admin:admin-pw\nalice:alice-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, filepath.Join(tmp, "data"), "--sasl-users", users, "--override", "super.users=User:admin")
	defer s.stop(t)
	as := func(user string, args ...string) result {
		t.Helper()
		sec := []string{"--bootstrap-server", s.addr, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", user, "--sasl-password", user + "-pw"}
		return strata(t, "", "", append(append([]string{"quotas"}, sec...), args...)...)
	}
	alter := []string{"--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1024"}
	if r := as("alice", alter...); r.code == 0 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice alters quotas: exit %d: %s", r.code, r.stderr)
	}
	if r := as("admin", alter...); r.code != 0 {
		t.Fatalf("admin alters quotas: exit %d: %s", r.code, r.stderr)
	}
	if r := as("admin", "--describe"); r.code != 0 || !strings.Contains(r.stdout, "Quota configs for users/alice are producer_byte_rate=1024\n") {
		t.Fatalf("admin describes: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := as("alice", "--describe"); r.code == 0 {
		t.Fatalf("alice describes quotas: %s", r.stdout)
	}
}
