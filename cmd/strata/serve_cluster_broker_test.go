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
// serves produce and consume. Then strata quorum replaces voter 1 with it
// (add-voter, remove-voter), as kafka-metadata-quorum.sh would.
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

	status := func(want ...string) {
		t.Helper()
		out := ok(t, "", "", "quorum", "--bootstrap-server", ports[2], "describe", "--status")
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("quorum describe --status: no %q in\n%s", w, out)
			}
		}
	}
	status("CurrentVoters:          [1,2,3]", "CurrentObservers:       [4]")
	// change runs a voter change, again if the controller moved under it
	// (a loaded machine); done is the error of a change already made.
	change := func(action, id, want, done string) {
		t.Helper()
		for i := 1; ; i++ {
			r := strata(t, "", "", "quorum", "--bootstrap-server", broker, action, "--voter-id", id)
			if r.code == 0 && strings.Contains(r.stdout, want) || i > 1 && strings.Contains(r.stderr, done) {
				return
			}
			if i == 3 || strings.Contains(r.stderr, done) {
				t.Fatalf("quorum %s %s: exit %d: %s%s", action, id, r.code, r.stdout, r.stderr)
			}
		}
	}
	change("add-voter", "4", "added voter 4", "DUPLICATE_VOTER")
	if r := strata(t, "", "", "quorum", "--bootstrap-server", broker, "add-voter", "--voter-id", "4"); r.code == 0 || !strings.Contains(r.stderr, "DUPLICATE_VOTER") {
		t.Fatalf("add-voter of a voter: exit %d: %s", r.code, r.stderr)
	}
	change("remove-voter", "1", "removed voter 1", "VOTER_NOT_FOUND")
	status("CurrentVoters:          [2,3,4]", "CurrentObservers:       [1]")
	out = ok(t, "", "", "quorum", "--bootstrap-server", broker, "describe", "--replication")
	if !strings.Contains(out, "NodeId") || !strings.Contains(out, "Leader") || !strings.Contains(out, "Observer") {
		t.Fatalf("quorum describe --replication:\n%s", out)
	}
	members[0].stop(t)
	members = members[1:]
	ok(t, "", "d\n", "produce", "--bootstrap-server", broker, "--topic", "grown", "--acks", "all")
	create(broker, "after-replace", "3")

	// strata leader-election: "before" and "after-replace" are led by
	// their preferred replicas already; "grown"'s first replica may be 1,
	// which is stopped: preferred is then not available (exit 1).
	out = ok(t, "", "", "leader-election", "--bootstrap-server", broker, "--election-type", "preferred", "--topic", "after-replace", "--partition", "0")
	if !strings.Contains(out, "Valid replica already elected for partitions after-replace-0") {
		t.Fatalf("leader-election of a partition led by its preferred replica:\n%s", out)
	}
	r := strata(t, "", "", "leader-election", "--bootstrap-server", broker, "--election-type", "unclean", "--all-topic-partitions")
	if r.code != 0 || !strings.Contains(r.stdout, "Valid replica already elected for partitions") {
		t.Fatalf("unclean election of partitions that all have leaders: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := strata(t, "", "", "leader-election", "--bootstrap-server", broker, "--election-type", "preferred", "--topic", "nope", "--partition", "0"); r.code != 1 || !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("leader-election of an unknown topic: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := strata(t, "", "", "leader-election", "--bootstrap-server", broker, "--topic", "grown", "--partition", "0"); r.code != 2 {
		t.Fatalf("leader-election without --election-type: exit %d, want 2 (usage)", r.code)
	}
}
