package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strata users on a stopped data dir: add, describe, delete; what it
// wrote logs in on the next strata serve.
func TestUsersDataDir(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	if r := strata(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "orders"); r.code != 0 {
		t.Fatalf("create topic: %d %s", r.code, r.stderr)
	}
	run := func(args ...string) result {
		t.Helper()
		r := strata(t, "", "", append([]string{"users", "--data-dir", dir}, args...)...)
		if r.code != 0 {
			t.Fatalf("users %v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	r := run("--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-pw],SCRAM-SHA-512=[password=carol-pw]")
	if !strings.Contains(r.stdout, "Completed updating config for user carol.") {
		t.Fatalf("alter: %q", r.stdout)
	}
	run("--alter", "--entity-name", "dave", "--add-config", "SCRAM-SHA-256=[password=dave-pw]")
	run("--alter", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-512")
	r = run("--describe")
	for _, want := range []string{
		"SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192\n",
		"SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-256=iterations=4096\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--describe lacks %q:\n%s", want, r.stdout)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "scram.json"))
	if err != nil || strings.Contains(string(data), "carol-pw") {
		t.Fatalf("scram.json: %v %s", err, data)
	}
	for _, bad := range [][]string{
		{"--alter", "--entity-name", "x", "--add-config", "SCRAM-SHA-256=[iterations=100,password=p]"},
		{"--alter", "--entity-name", "x", "--add-config", "SCRAM-SHA-1=[password=p]"},
		{"--alter", "--entity-name", "x", "--add-config", "SCRAM-SHA-256=[password=]"},
		{"--alter", "--entity-name", "x"},
		{"--alter", "--describe", "--entity-name", "x"},
		{"--describe", "--entity-type", "topics"},
	} {
		if r := strata(t, "", "", append([]string{"users", "--data-dir", dir}, bad...)...); r.code != exitUsage {
			t.Errorf("users %v: exit %d, want usage (%d): %s", bad, r.code, exitUsage, r.stderr)
		}
	}
	if r := strata(t, "", "", "users", "--data-dir", dir, "--alter", "--entity-name", "nobody", "--delete-config", "SCRAM-SHA-256"); r.code == 0 {
		t.Errorf("deleting a missing credential succeeded: %s", r.stdout)
	}

	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("admin:admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "--sasl-users", users)
	defer s.stop(t)
	as := func(user, password, mech string, args ...string) result {
		t.Helper()
		sec := []string{"--bootstrap-server", s.addr, "--sasl-mechanism", mech, "--sasl-username", user, "--sasl-password", password}
		return strata(t, "", "", append(append([]string{args[0]}, sec...), args[1:]...)...)
	}
	if r := as("carol", "carol-pw", "SCRAM-SHA-256", "topics", "list"); r.code != 0 || !strings.Contains(r.stdout, "orders") {
		t.Fatalf("carol lists topics: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	if r := as("carol", "carol-pw", "SCRAM-SHA-512", "topics", "list"); r.code == 0 {
		t.Fatal("carol logged in with the SCRAM-SHA-512 credential deleted")
	}
}

// Against a serving broker: a user added over the Kafka protocol logs in
// at once, and once deleted is refused.
func TestUsersServe(t *testing.T) {
	tmp := t.TempDir()
	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("admin:admin-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, filepath.Join(tmp, "data"), "--sasl-users", users)
	defer s.stop(t)
	as := func(user, password string, args ...string) result {
		t.Helper()
		sec := []string{"--bootstrap-server", s.addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user, "--sasl-password", password}
		return strata(t, "", "", append(append([]string{args[0]}, sec...), args[1:]...)...)
	}
	if r := as("erin", "erin-pw", "topics", "list"); r.code == 0 {
		t.Fatal("erin logged in before she was added")
	}
	if r := as("admin", "admin-pw", "users", "--alter", "--entity-name", "erin", "--add-config", "SCRAM-SHA-512=[iterations=4096,password=erin-pw]"); r.code != 0 {
		t.Fatalf("admin adds erin: exit %d: %s", r.code, r.stderr)
	}
	if r := as("erin", "erin-pw", "topics", "list"); r.code != 0 {
		t.Fatalf("erin logs in: exit %d: %s", r.code, r.stderr)
	}
	r := as("admin", "admin-pw", "users", "--describe", "--entity-name", "erin")
	if r.code != 0 || r.stdout != "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=4096\n" {
		t.Fatalf("describe: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if r := as("admin", "admin-pw", "users", "--alter", "--entity-name", "erin", "--add-config", "SCRAM-SHA-512=[iterations=4096,password=x]", "--delete-config", "SCRAM-SHA-512"); r.code != exitUsage {
		t.Fatalf("the same mechanism set and deleted: exit %d: %s", r.code, r.stderr)
	}
	if r := as("admin", "admin-pw", "users", "--alter", "--entity-name", "erin", "--delete-config", "SCRAM-SHA-512"); r.code != 0 {
		t.Fatalf("admin deletes erin: exit %d: %s", r.code, r.stderr)
	}
	if r := as("erin", "erin-pw", "topics", "list"); r.code == 0 {
		t.Fatal("erin logged in after she was deleted")
	}
	if r := as("admin", "admin-pw", "users", "--describe", "--entity-name", "erin"); r.code == 0 || !strings.Contains(r.stderr, "RESOURCE_NOT_FOUND") {
		t.Fatalf("describe a deleted user: exit %d: %s", r.code, r.stderr)
	}
}
