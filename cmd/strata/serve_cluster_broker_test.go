package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Three voters form a cluster; a fourth strata serve whose --node-id is
// not among the --peer voters joins it later as a broker only: a topic
// created afterwards with replication factor 4 has a replica on it, and it
// serves produce and consume.
func TestServeClusterBrokerJoins(t *testing.T) {
	ports := freePorts(t, 8)
	tmp := t.TempDir()
	var peers []string
	for i := range 3 {
		peers = append(peers, "--peer", fmt.Sprintf("%d=%s,%s", i+1, ports[2*i], ports[2*i+1]))
	}
	start := func(i int) *server {
		args := append([]string{"--node-id", strconv.Itoa(i + 1), "--listen", ports[2*i], "--raft-addr", ports[2*i+1], "--raft-loopback"}, peers...)
		return startServe(t, filepath.Join(tmp, fmt.Sprint(i+1)), args...)
	}
	var members []*server
	defer func() {
		for _, m := range members {
			m.stop(t)
		}
	}()
	for i := range 3 {
		members = append(members, start(i))
	}
	create := func(addr, topic, rf string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := strata(t, "", "", "topics", "create", "--bootstrap-server", addr, "--topic", topic, "--partitions", "1", "--replication-factor", rf)
			if r.code == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("topics create %s never succeeded: %s", topic, r.stderr)
			}
			time.Sleep(100 * time.Millisecond) // polling a cluster being formed by other processes: nothing to await
		}
	}
	create(ports[0], "before", "3")
	members = append(members, start(3)) // the broker: --node-id 4, not a --peer
	broker := ports[6]
	create(broker, "grown", "4")
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, isr := describe(t, broker, "grown")
		if leader > 0 && len(strings.Split(isr, ",")) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR of grown never reached 4 members: leader %d, ISR %q", leader, isr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ok(t, "", "a\nb\nc\n", "produce", "--bootstrap-server", broker, "--topic", "grown", "--acks", "all")
	out := ok(t, "", "", "consume", "--bootstrap-server", ports[0], "--topic", "grown", "--from-beginning", "--exit-at-end")
	if got := strings.Fields(out); strings.Join(got, " ") != "a b c" {
		t.Fatalf("consumed %q through a voter, want a b c", out)
	}
	if l, _ := describe(t, broker, "before"); l <= 0 {
		t.Fatalf("the broker does not know the topic created before it joined")
	}
}
