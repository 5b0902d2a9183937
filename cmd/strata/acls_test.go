package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strata acls on a stopped data dir: add, list, remove, and the file
// survives for the next broker.
func TestACLsDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if r := strata(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders"); r.code != 0 {
		t.Fatalf("create topic: %d %s", r.code, r.stderr)
	}
	run := func(args ...string) result {
		t.Helper()
		r := strata(t, "", "", append([]string{"acls", "--data-dir", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("acls %v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	r := run("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "describe", "--topic", "orders")
	if !strings.Contains(r.stdout, "Added 2 ACLs") {
		t.Fatalf("add: %q", r.stdout)
	}
	run("--add", "--consumer", "--allow-principal", "User:bob", "--topic", "orders", "--group", "app")
	run("--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9", "--topic", "ord", "--resource-pattern-type", "prefixed")
	r = run("--list")
	for _, want := range []string{
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:",
		"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
		"(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)",
		"`ResourcePattern(resourceType=GROUP, name=app, patternType=LITERAL)`",
		"(principal=User:eve, host=10.0.0.9, operation=ALL, permissionType=DENY)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--list lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := strings.Count(r.stdout, "(principal="); got != 6 {
		t.Errorf("--list: %d ACLs, want 6:\n%s", got, r.stdout)
	}
	// Those that apply to the topic orders, from the prefix too.
	r = run("--list", "--topic", "orders", "--resource-pattern-type", "match", "--principal", "User:eve")
	if strings.Count(r.stdout, "(principal=") != 1 || !strings.Contains(r.stdout, "User:eve") {
		t.Errorf("--list match: %s", r.stdout)
	}
	r = run("--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
	if !strings.Contains(r.stdout, "Removed 1 ACLs") {
		t.Fatalf("remove: %q", r.stdout)
	}
	r = run("--remove", "--group", "app")
	if !strings.Contains(r.stdout, "Removed 1 ACLs") {
		t.Fatalf("remove all of a group: %q", r.stdout)
	}
	r = run("--list")
	if got := strings.Count(r.stdout, "(principal="); got != 4 || strings.Contains(r.stdout, "operation=READ, permissionType=ALLOW)\n \t(principal=User:alice") {
		t.Errorf("after remove: %s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "acls.json")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"--add", "--topic", "orders"},
		{"--add", "--allow-principal", "alice", "--topic", "orders"},
		{"--add", "--allow-principal", "User:alice", "--operation", "Fly", "--topic", "orders"},
		{"--add", "--remove", "--allow-principal", "User:alice", "--topic", "orders"},
		{"--remove"},
	} {
		if r := strata(t, "", "", append([]string{"acls", "--data-dir", dir}, bad...)...); r.code != exitUsage {
			t.Errorf("acls %v: exit %d, want usage (%d): %s", bad, r.code, exitUsage, r.stderr)
		}
	}
}

// Against a serving broker with ACLs on: a super user manages ACLs, an
// ordinary user may not, and is refused until an ACL lets it produce.
func TestACLsServe(t *testing.T) {
	tmp := t.TempDir()
	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("admin:admin-pw\nalice:alice-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, filepath.Join(tmp, "data"), "--sasl-users", users, "--override", "super.users=User:admin")
	defer s.stop(t)
	as := func(user string, stdin string, args ...string) result {
		t.Helper()
		sec := []string{"--bootstrap-server", s.addr, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", user, "--sasl-password", user + "-pw"}
		return strata(t, "", stdin, append(append([]string{args[0]}, sec...), args[1:]...)...)
	}
	if r := as("admin", "", "topics", "create", "--topic", "orders"); r.code != 0 {
		t.Fatalf("admin creates a topic: %d %s", r.code, r.stderr)
	}
	if r := as("alice", "", "acls", "--add", "--producer", "--allow-principal", "User:alice", "--topic", "orders"); r.code == 0 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice adds ACLs: exit %d: %s", r.code, r.stderr)
	}
	if r := as("alice", "x\n", "produce", "--topic", "orders"); r.code == 0 {
		t.Fatalf("alice produces without an ACL: %s", r.stdout)
	}
	if r := as("admin", "", "acls", "--add", "--producer", "--allow-principal", "User:alice", "--topic", "orders"); r.code != 0 || !strings.Contains(r.stdout, "Added 4 ACLs") {
		t.Fatalf("admin adds ACLs: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := as("alice", "x\n", "produce", "--topic", "orders"); r.code != 0 {
		t.Fatalf("alice produces with an ACL: exit %d: %s", r.code, r.stderr)
	}
	r := as("admin", "", "acls", "--list", "--principal", "User:alice")
	if r.code != 0 || strings.Count(r.stdout, "(principal=User:alice") != 4 || !strings.Contains(r.stdout, "operation=IDEMPOTENT_WRITE") {
		t.Fatalf("admin lists: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}
