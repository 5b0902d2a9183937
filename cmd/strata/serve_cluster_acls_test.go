package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Three strata serve members with client listeners, SCRAM users from the
// users file and --override super.users: the super user adds ACLs on one
// member's listener and an ordinary user is refused, then allowed, on
// another's; an authorizer without --client-addr is refused.
func TestServeClusterACLs(t *testing.T) {
	ports := freePorts(t, 9)
	tmp := t.TempDir()
	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("admin:admin-pw\nalice:alice-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, "--peer", fmt.Sprintf("%d=%s,%s", i+1, ports[3*i], ports[3*i+1]))
	}
	client := func(i int) string { return ports[3*i+2] }
	var members []*server
	defer func() {
		for _, m := range members {
			m.kill(t)
		}
	}()
	for i := range 3 {
		args := append([]string{"--node-id", strconv.Itoa(i + 1), "--listen", ports[3*i], "--raft-addr", ports[3*i+1],
			"--raft-loopback", "--client-addr", client(i), "--sasl-users", users, "--override", "super.users=User:admin"}, peers...)
		members = append(members, startServe(t, filepath.Join(tmp, fmt.Sprint(i+1)), args...))
	}
	as := func(member int, user, stdin string, args ...string) result {
		t.Helper()
		sec := []string{"--bootstrap-server", client(member), "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", user, "--sasl-password", user + "-pw"}
		return strata(t, "", stdin, append(append([]string{args[0]}, sec...), args[1:]...)...)
	}
	if r := as(0, "admin", "", "topics", "create", "--topic", "orders", "--replication-factor", "3"); r.code != 0 {
		t.Fatalf("admin creates a topic: %d %s", r.code, r.stderr)
	}
	if r := as(2, "alice", "x\n", "produce", "--topic", "orders"); r.code == 0 {
		t.Fatalf("alice produces without an ACL: %s", r.stdout)
	}
	if r := as(1, "alice", "", "acls", "--add", "--producer", "--allow-principal", "User:alice", "--topic", "orders"); r.code == 0 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice adds ACLs: exit %d: %s", r.code, r.stderr)
	}
	if r := as(1, "admin", "", "acls", "--add", "--producer", "--allow-principal", "User:alice", "--topic", "orders"); r.code != 0 || !strings.Contains(r.stdout, "Added 4 ACLs") {
		t.Fatalf("admin adds ACLs: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	// Member 3 may apply the ACLs a moment after member 2 answered.
	var r result
	for range 50 {
		if r = as(2, "alice", "x\n", "produce", "--topic", "orders"); r.code == 0 {
			break
		}
	}
	if r.code != 0 {
		t.Fatalf("alice produces with an ACL on another member: exit %d: %s", r.code, r.stderr)
	}
	r = as(0, "admin", "", "acls", "--list", "--principal", "User:alice")
	if r.code != 0 || strings.Count(r.stdout, "(principal=User:alice") != 4 {
		t.Fatalf("admin lists on member 1: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}

	// The authorizer guards the client listener: a member without one is refused.
	r = strata(t, "", "", "serve", "--data-dir", filepath.Join(tmp, "x"), "--node-id", "1", "--listen", "127.0.0.1:0",
		"--raft-addr", ports[1], "--peer", "1=127.0.0.1:1,"+ports[1], "--override", "super.users=User:admin")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--client-addr") {
		t.Fatalf("authorizer without --client-addr: exit %d: %s", r.code, r.stderr)
	}
	r = strata(t, "", "", "serve", "--data-dir", filepath.Join(tmp, "y"), "--node-id", "1", "--listen", "127.0.0.1:0",
		"--raft-addr", ports[1], "--peer", "1=127.0.0.1:1,"+ports[1], "--override", "num.partitions=3")
	if r.code != exitUsage || !strings.Contains(r.stderr, "super.users") {
		t.Fatalf("a topic override on a member: exit %d: %s", r.code, r.stderr)
	}
}
