package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The connection and fetch bounds as --override takes them, Kafka's names.
func TestServeBoundsOverrides(t *testing.T) {
	var c serveConfig
	for _, kv := range []string{
		"max.connections.per.ip=50",
		"max.connections.per.ip.overrides=10.0.0.1:5, [::1]:0,::2:7",
		"connection.failed.authentication.delay.ms=250",
		"fetch.max.bytes=1048576",
	} {
		if err := c.override(kv); err != nil {
			t.Fatalf("%s: %v", kv, err)
		}
	}
	s := c.server
	if s.MaxConnectionsPerIP != 50 || s.FailedAuthenticationDelay != 250*time.Millisecond || s.FetchMaxBytes != 1<<20 {
		t.Fatalf("server config %+v", s)
	}
	if o := s.MaxConnectionsPerIPOverrides; len(o) != 3 || o["10.0.0.1"] != 5 || o["::1"] != 0 || o["::2"] != 7 {
		t.Fatalf("overrides %v", o)
	}
	if err := c.override("connection.failed.authentication.delay.ms=0"); err != nil || c.server.FailedAuthenticationDelay >= 0 {
		t.Fatalf("delay 0 (none): %v, %v", err, c.server.FailedAuthenticationDelay)
	}
	for _, bad := range []string{
		"max.connections.per.ip=0",
		"max.connections.per.ip.overrides=localhost:5",
		"max.connections.per.ip.overrides=10.0.0.1",
		"max.connections.per.ip.overrides=10.0.0.1:-1",
		"connection.failed.authentication.delay.ms=-1",
		"fetch.max.bytes=10",
	} {
		if err := c.override(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// A users file line with an empty password (user:) is refused when the
// file is read, naming the line.
func TestServeUsersEmptyPassword(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("alice:s3cret\nbob:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readUsers(users); err == nil || !strings.Contains(err.Error(), `users:2: user "bob" has an empty password`) {
		t.Fatalf("readUsers: %v", err)
	}
	r := strata(t, "", "", "serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--sasl-users", users)
	if r.code != exitUsage || !strings.Contains(r.stderr, "empty password") {
		t.Fatalf("serve: exit %d, stderr %q", r.code, r.stderr)
	}
}
