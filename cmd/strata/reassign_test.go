package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
)

// strata reassign against three strata serve processes, as an operator
// uses kafka-reassign-partitions.sh: --generate proposes, --execute moves a
// partition onto the member that had no replica of it, --verify reports
// until it is done, and the records are all there; a move onto a stopped
// member stays in progress (--verify exit 1, --list shows it) until
// --cancel reverts it. Bad files and flags are usage errors.
func TestReassignCommand(t *testing.T) {
	ports := freePorts(t, 6)
	tmp := t.TempDir()
	var peers []string
	for i := range 3 {
		peers = append(peers, "--peer", fmt.Sprintf("%d=%s,%s", i+1, ports[2*i], ports[2*i+1]))
	}
	members := make([]*server, 3)
	defer func() {
		for _, m := range members {
			if m != nil {
				m.stop(t)
			}
		}
	}()
	for i := range 3 {
		args := append([]string{"--node-id", strconv.Itoa(i + 1), "--listen", ports[2*i], "--raft-addr", ports[2*i+1], "--raft-loopback"}, peers...)
		members[i] = startServe(t, filepath.Join(tmp, fmt.Sprint(i+1)), args...)
	}
	addr := ports[0]
	retry(t, "topics create", func() result {
		return strata(t, "", "", "topics", "create", "--bootstrap-server", addr, "--topic", "mv", "--partitions", "2", "--replication-factor", "2")
	})
	ok(t, "", "a\nb\nc\n", "produce", "--bootstrap-server", addr, "--topic", "mv", "--acks", "all", "--partition", "0")
	file := func(name, body string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// --generate: the current assignment, and a proposal over 1,2,3.
	topics := file("topics.json", `{"version":1,"topics":[{"topic":"mv"}]}`)
	out := ok(t, "", "", "reassign", "--bootstrap-server", addr, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2,3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "Current partition replica assignment" || lines[3] != "Proposed partition reassignment configuration" {
		t.Fatalf("--generate:\n%s", out)
	}
	var cur, proposed reassignmentFile
	if err := json.Unmarshal([]byte(lines[1]), &cur); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[4]), &proposed); err != nil {
		t.Fatal(err)
	}
	if len(cur.Partitions) != 2 || len(proposed.Partitions) != 2 {
		t.Fatalf("--generate: %d current and %d proposed partitions, want 2 and 2:\n%s", len(cur.Partitions), len(proposed.Partitions), out)
	}
	for _, p := range proposed.Partitions {
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] || p.Replicas[0] < 1 || p.Replicas[0] > 3 || p.Replicas[1] < 1 || p.Replicas[1] > 3 {
			t.Fatalf("--generate proposed %v for %s-%d", p.Replicas, p.Topic, p.Partition)
		}
	}

	// --execute: mv-0 onto the member without a replica of it, first.
	p0 := cur.Partitions[slices.IndexFunc(cur.Partitions, func(p reassignPartition) bool { return p.Partition == 0 })]
	other := int32(6) - p0.Replicas[0] - p0.Replicas[1]
	target := []int32{other, p0.Replicas[1]}
	move := file("move.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d,%d],"log_dirs":["any","any"]}]}`, target[0], target[1]))
	out = ok(t, "", "", "reassign", "--bootstrap-server", addr, "--execute", "--reassignment-json-file", move)
	if !strings.Contains(out, "Save this to use as the --reassignment-json-file option during rollback") ||
		!strings.Contains(out, fmt.Sprintf(`"replicas":[%d,%d]`, p0.Replicas[0], p0.Replicas[1])) ||
		!strings.Contains(out, "Successfully started partition reassignments for mv-0") {
		t.Fatalf("--execute:\n%s", out)
	}
	retry(t, "reassign --verify", func() result {
		return strata(t, "", "", "reassign", "--bootstrap-server", addr, "--verify", "--reassignment-json-file", move)
	}, "Reassignment of partition mv-0 is completed.")
	if out := ok(t, "", "", "reassign", "--bootstrap-server", addr, "--list"); !strings.Contains(out, "No partition reassignments found.") {
		t.Fatalf("--list after the move:\n%s", out)
	}
	if out := ok(t, "", "", "reassign", "--bootstrap-server", addr, "--cancel", "--reassignment-json-file", move); !strings.Contains(out, "None of the specified partition reassignments are active.") {
		t.Fatalf("--cancel of a move done:\n%s", out)
	}
	out = ok(t, "", "", "consume", "--bootstrap-server", ports[2*(other-1)], "--topic", "mv", "--partition", "0", "--from-beginning", "--exit-at-end")
	if got := strings.Join(strings.Fields(out), " "); got != "a b c" {
		t.Fatalf("consumed %q after the move, want a b c", got)
	}

	// --execute --throttle: the rates on the brokers of the move, the
	// replicas on the topic, as Kafka's dynamic configs, until --verify
	// finds the move done and removes them.
	p1 := cur.Partitions[slices.IndexFunc(cur.Partitions, func(p reassignPartition) bool { return p.Partition == 1 })]
	other1 := int32(6) - p1.Replicas[0] - p1.Replicas[1]
	move1 := file("move1.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":1,"replicas":[%d,%d]}]}`, p1.Replicas[0], other1))
	out = ok(t, "", "", "reassign", "--bootstrap-server", addr, "--execute", "--reassignment-json-file", move1, "--throttle", "50000000")
	if !strings.Contains(out, "The inter-broker throttle limit was set to 50000000 B/s") || !strings.Contains(out, "Successfully started partition reassignments for mv-1") {
		t.Fatalf("--execute --throttle:\n%s", out)
	}
	for _, b := range append(slices.Clone(p1.Replicas), other1) {
		got := dynamicConfigs(t, ports[2*(b-1)], kmsg.ConfigResourceTypeBroker, fmt.Sprint(b))
		if got["leader.replication.throttled.rate"] != "50000000" || got["follower.replication.throttled.rate"] != "50000000" {
			t.Fatalf("broker %d's dynamic configs after --throttle: %v", b, got)
		}
	}
	var got map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if got = dynamicConfigs(t, addr, kmsg.ConfigResourceTypeTopic, "mv"); len(got) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling another process: addr applies what another member was asked
	}
	if got["leader.replication.throttled.replicas"] != fmt.Sprintf("1:%d,1:%d", p1.Replicas[0], p1.Replicas[1]) || got["follower.replication.throttled.replicas"] != fmt.Sprintf("1:%d", other1) {
		t.Fatalf("mv's dynamic configs after --throttle: %v", got)
	}
	retry(t, "reassign --verify of the throttled move", func() result {
		return strata(t, "", "", "reassign", "--bootstrap-server", addr, "--verify", "--reassignment-json-file", move1)
	}, "Reassignment of partition mv-1 is completed.", "Clearing broker-level throttles on brokers 1,2,3", "Clearing topic-level throttles on topics mv")
	for b := int32(1); b <= 3; b++ {
		if got := dynamicConfigs(t, ports[2*(b-1)], kmsg.ConfigResourceTypeBroker, fmt.Sprint(b)); len(got) != 0 {
			t.Fatalf("broker %d's dynamic configs after --verify: %v", b, got)
		}
	}
	// The removal went through some member; addr's applies it a moment
	// later.
	for deadline := time.Now().Add(30 * time.Second); ; {
		got := dynamicConfigs(t, addr, kmsg.ConfigResourceTypeTopic, "mv")
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mv's dynamic configs after --verify: %v", got)
		}
		time.Sleep(50 * time.Millisecond) // polling another process
	}

	// A move onto a stopped member stays in progress until cancelled.
	stopped := p0.Replicas[0] // a replica no more: mv-0 is on target now
	members[stopped-1].stop(t)
	members[stopped-1] = nil
	live := ports[2*(other-1)]
	back := file("back.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d,%d]}]}`, stopped, other))
	retry(t, "reassign --execute onto a stopped member", func() result {
		return strata(t, "", "", "reassign", "--bootstrap-server", live, "--execute", "--reassignment-json-file", back)
	}, "Successfully started partition reassignments for mv-0")
	r := strata(t, "", "", "reassign", "--bootstrap-server", live, "--verify", "--reassignment-json-file", back)
	if r.code != 1 || !strings.Contains(r.stdout, "Reassignment of partition mv-0 is still in progress.") {
		t.Fatalf("--verify of a move in progress: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := fmt.Sprintf("mv-0: replicas: %d,%d,%d. adding: %d. removing: %d.", stopped, other, target[1], stopped, target[1])
	if out := ok(t, "", "", "reassign", "--bootstrap-server", live, "--list"); !strings.Contains(out, want) {
		t.Fatalf("--list: no %q in\n%s", want, out)
	}
	if r := strata(t, "", "", "reassign", "--bootstrap-server", live, "--execute", "--reassignment-json-file", move); r.code == 0 || !strings.Contains(r.stderr, "--additional") {
		t.Fatalf("--execute while a move is in progress: exit %d\n%s", r.code, r.stderr)
	}
	if out := ok(t, "", "", "reassign", "--bootstrap-server", live, "--cancel", "--reassignment-json-file", back); !strings.Contains(out, "Successfully cancelled partition reassignments for: mv-0") {
		t.Fatalf("--cancel:\n%s", out)
	}
	ok(t, "", "", "reassign", "--bootstrap-server", live, "--verify", "--reassignment-json-file", move)

	// Refused: an unknown broker (exit 1), and usage errors (exit 2).
	bad := file("bad.json", `{"version":1,"partitions":[{"topic":"mv","partition":1,"replicas":[1,9]}]}`)
	if r := strata(t, "", "", "reassign", "--bootstrap-server", live, "--execute", "--reassignment-json-file", bad); r.code != 1 || !strings.Contains(r.stderr, "INVALID_REPLICA_ASSIGNMENT") {
		t.Fatalf("--execute onto broker 9: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"--list", "--verify"},
		{"--execute"},
		{"--execute", "--reassignment-json-file", topics},
		{"--execute", "--reassignment-json-file", move, "--throttle", "0"},
		{"--verify", "--reassignment-json-file", move, "--throttle", "1000"},
		{"--execute", "--reassignment-json-file", file("dup.json", `{"partitions":[{"topic":"mv","partition":0,"replicas":[1]},{"topic":"mv","partition":0,"replicas":[2]}]}`)},
		{"--generate", "--topics-to-move-json-file", topics},
	} {
		if r := strata(t, "", "", append([]string{"reassign", "--bootstrap-server", live}, args...)...); r.code != 2 {
			t.Fatalf("reassign %v: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
		}
	}
}

// retry runs f until it exits 0 with every want in its stdout, for up to
// 30 s: a cluster of processes that is forming, or a move under way,
// announces nothing a test could wait for.
func retry(t *testing.T, what string, f func() result, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := f()
		done := r.code == 0
		for _, w := range want {
			done = done && strings.Contains(r.stdout, w)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: exit %d\n%s%s", what, r.code, r.stdout, r.stderr)
		}
		time.Sleep(100 * time.Millisecond) // polling other processes
	}
}

// dynamicConfigs returns the configs of a resource that DescribeConfigs
// says are set dynamically (on it, or the cluster's default), asking the
// server at addr.
func dynamicConfigs(t *testing.T, addr string, typ kmsg.ConfigResourceType, name string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	resp, err := c.Request(ctx, req, 4)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("describe %s %s: code %d", typ, name, r.ErrorCode)
		}
		for _, c := range r.Configs {
			switch c.Source {
			case kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDynamicTopicConfig:
				if strings.Contains(c.Name, "throttled") {
					out[c.Name] = *c.Value
				}
			}
		}
	}
	return out
}

// The reassignment's and the election's codes read as their names, with
// the broker's message (kafkaCodeError, which both commands use).
func TestReassignAndElectCodeNames(t *testing.T) {
	msg := "details"
	for code, name := range map[int16]string{
		39: "INVALID_REPLICA_ASSIGNMENT", 85: "NO_REASSIGNMENT_IN_PROGRESS", 35: "UNSUPPORTED_VERSION",
		80: "PREFERRED_LEADER_NOT_AVAILABLE", 83: "ELIGIBLE_LEADERS_NOT_AVAILABLE", 84: "ELECTION_NOT_NEEDED",
	} {
		if got := kafkaCodeError(code, &msg).Error(); got != name+": details" {
			t.Errorf("code %d: %q, want %q", code, got, name+": details")
		}
		if got := kafkaCodeError(code, nil).Error(); got != name {
			t.Errorf("code %d without a message: %q, want %q", code, got, name)
		}
	}
	if kafkaCodeError(0, &msg) != nil {
		t.Error("code 0 is no error")
	}
}

// A reassignment file's topics: each once, in the file's order (what
// --execute and --verify ask Metadata for).
func TestReassignmentFileTopics(t *testing.T) {
	f := reassignmentFile{Partitions: []reassignPartition{{Topic: "b", Partition: 1}, {Topic: "a"}, {Topic: "b"}, {Topic: "c", Partition: 2}, {Topic: "a", Partition: 3}}}
	if got := strings.Join(f.topics(), ","); got != "b,a,c" {
		t.Errorf("topics %q, want b,a,c", got)
	}
	if got := (reassignmentFile{}).topics(); got != nil {
		t.Errorf("topics of an empty file: %q", got)
	}
}
