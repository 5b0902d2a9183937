package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Three strata serve members with mutual TLS between them (--listen,
// --raft-addr) and a client listener each (--client-addr) secured by
// --tls-cert and --sasl-users: the commands, holding only the client
// listener's CA and a password, create a topic of replication factor 3,
// produce with acks=all and consume through any member's client listener;
// they are refused on --listen, and with a wrong password.
func TestServeClusterClientListener(t *testing.T) {
	ports := freePorts(t, 9)
	tmp := t.TempDir()
	clusterCA, memberCert, memberKey, _ := testCA(t, tmp, "cluster")
	clientCA, clientCert, clientKey, _ := testCA(t, tmp, "clients")
	users := filepath.Join(tmp, "users")
	if err := os.WriteFile(users, []byte("alice:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i := range 3 {
		peers = append(peers, "--peer", fmt.Sprintf("%d=%s,%s", i+1, ports[3*i], ports[3*i+1]))
	}
	var members []*server
	defer func() {
		for _, m := range members {
			m.stop(t)
		}
	}()
	for i := range 3 {
		args := append([]string{
			"--node-id", strconv.Itoa(i + 1), "--listen", ports[3*i], "--raft-addr", ports[3*i+1], "--raft-loopback",
			"--cluster-tls-cert", memberCert, "--cluster-tls-key", memberKey, "--cluster-ca", clusterCA,
			"--client-addr", ports[3*i+2], "--tls-cert", clientCert, "--tls-key", clientKey, "--sasl-users", users,
		}, peers...)
		members = append(members, startServe(t, filepath.Join(tmp, fmt.Sprint(i+1)), args...))
	}
	client := func(addr string, password string) []string {
		return []string{"--bootstrap-server", addr, "--tls-ca", clientCA, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "alice", "--sasl-password", password}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := strata(t, "", "", append([]string{"topics", "create", "--topic", "orders", "--partitions", "2", "--replication-factor", "3"}, client(ports[2], "s3cret")...)...)
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics create on the client listener never succeeded: %s", r.stderr)
		}
		time.Sleep(100 * time.Millisecond) // polling a cluster being formed by other processes: nothing to await
	}
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("k%d:v%d", i, i))
	}
	// Produced through member 2's client listener: each record goes to its
	// partition's leader at the address Metadata gave, on the client
	// listener (the inter-broker one would refuse this client).
	ok(t, "", strings.Join(lines, "\n")+"\n", append([]string{"produce", "--topic", "orders", "--key-separator", ":", "--acks", "all"}, client(ports[5], "s3cret")...)...)
	out := ok(t, "", "", append([]string{"consume", "--topic", "orders", "--from-beginning", "--exit-at-end", "-f", "%k:%s\n"}, client(ports[8], "s3cret")...)...)
	if got := strings.Fields(out); len(got) != len(lines) {
		t.Fatalf("consumed %d records through member 3's client listener, want %d:\n%s", len(got), len(lines), out)
	}

	for name, args := range map[string][]string{
		"the client on --listen":       client(ports[0], "s3cret"),
		"a wrong password":             client(ports[2], "wrong"),
		"plain TCP on the client port": {"--bootstrap-server", ports[2]},
		"the client CA on --raft-addr": client(ports[1], "s3cret"),
	} {
		if r := strata(t, "", "", append([]string{"topics", "list"}, args...)...); r.code == 0 {
			t.Errorf("%s was served: %q", name, r.stdout)
		}
	}

	// A cluster member refuses --tls-cert without a client listener to
	// secure with it.
	r := strata(t, "", "", "serve", "--data-dir", filepath.Join(tmp, "x"), "--raft-addr", ports[1], "--peer", "1="+ports[0]+","+ports[1], "--tls-cert", clientCert, "--tls-key", clientKey)
	if r.code != 2 || !strings.Contains(r.stderr, "--client-addr") {
		t.Errorf("serve --tls-cert as a member without --client-addr: exit %d: %s", r.code, r.stderr)
	}
}
