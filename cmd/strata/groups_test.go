package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// groupRows returns describe's rows (no header) as their columns, after
// checking the header.
func groupRows(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID" {
		t.Fatalf("header %q", lines[0])
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}

// groups over the Kafka protocol as kafka-consumer-groups.sh: describe
// without --topic covers every topic of the group and names each
// partition's member (DescribeGroups + OffsetFetch on the coordinator);
// --all-groups; delete refuses a group with members and deletes the others.
func TestGroupsDescribeAndDelete(t *testing.T) {
	dir := newTopic(t, "orders", 2)
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "audit", "--partitions", "1")
	s := startServe(t, dir)
	b := s.addr
	ok(t, "", "a\nb\nc\nd\n", "produce", "-b", b, "-t", "orders", "-p", "0")
	ok(t, "", "e\nf\n", "produce", "-b", b, "-t", "audit")
	// Group "done" commits on both topics, then has no members.
	ok(t, "", "", "consume", "-b", b, "-G", "done", "orders", "-o", "beginning", "-c", "4")
	ok(t, "", "", "consume", "-b", b, "-G", "done", "audit", "-o", "beginning", "-c", "1")

	rows := groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "done"))
	want := [][]string{
		{"done", "audit", "0", "1", "2", "1", "-", "-", "-"},
		{"done", "orders", "0", "4", "4", "0", "-", "-", "-"},
		{"done", "orders", "1", "0", "0", "0", "-", "-", "-"}, // its position, committed too
	}
	if len(rows) != len(want) {
		t.Fatalf("describe --group done: rows %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("row %d: %q, want %q", i, rows[i], want[i])
		}
	}

	// A live member (a Consumer of this test, polled once: joined and
	// assigned) is named on the partitions it has.
	kc, err := kafka.Dial(context.Background(), kafka.DialConfig{Seeds: []string{b}, ClientID: "billing-app"})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Group: "live", Topics: []string{"orders"}, Reset: log.ResetEarliest, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cons.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	rows = groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "live"))
	if len(rows) != 2 {
		t.Fatalf("describe --group live: %q, want orders 0 and 1", rows)
	}
	for i, r := range rows {
		if r[1] != "orders" || r[2] != string(rune('0'+i)) || r[6] == "-" || !strings.Contains(r[7], "127.0.0.1") || r[8] != "billing-app" {
			t.Errorf("row %q: want orders %d with the member's id, host and client id", r, i)
		}
	}
	// --topic keeps to one topic; --all-groups describes every group.
	if rows := groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "done", "--topic", "audit")); len(rows) != 1 || rows[0][1] != "audit" {
		t.Errorf("describe --topic audit: %q", rows)
	}
	all := groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "--describe", "--all-groups"))
	if len(all) != 5 || all[0][0] != "done" || all[4][0] != "live" {
		t.Errorf("describe --all-groups: %q", all)
	}

	// delete: a group with a member is refused (exit 1), the others go.
	r := strata(t, "", "", "groups", "--bootstrap-server", b, "delete", "--group", "live", "--group", "done")
	if r.code != exitProblem || r.stdout != "Deletion of requested consumer groups ('done') was successful.\n" ||
		!strings.Contains(r.stderr, "* Group 'live' could not be deleted due to: NON_EMPTY_GROUP") {
		t.Errorf("delete live and done: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "list"); out != "live\n" {
		t.Errorf("groups after deleting done: %q", out)
	}
	r = strata(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "done")
	if r.code != exitProblem || r.stdout != "" || !strings.Contains(r.stderr, "group done has no committed offsets on any topic and no members") {
		t.Errorf("describe of the deleted group: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if err := cons.Commit(ctx); err != nil { // the group stays, without members
		t.Fatal(err)
	}
	if err := cons.Close(); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "--delete", "--all-groups"); out != "Deletion of requested consumer groups ('live') was successful.\n" {
		t.Errorf("delete --all-groups: %q", out)
	}
	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "list"); out != "" {
		t.Errorf("groups after delete --all-groups: %q", out)
	}
	s.stop(t)

	// On the data dir: describe and delete the same way.
	ok(t, "", "", "consume", "--data-dir", dir, "--topic", "orders", "--group", "offline", "--from-beginning")
	rows = groupRows(t, ok(t, "", "", "groups", "--data-dir", dir, "describe", "--all-groups"))
	if len(rows) != 2 || rows[0][0] != "offline" || rows[0][3] != "4" || rows[0][6] != "-" {
		t.Errorf("data dir describe --all-groups: %q", rows)
	}
	if out := ok(t, "", "", "groups", "--data-dir", dir, "delete", "--group", "offline"); out != "Deletion of requested consumer groups ('offline') was successful.\n" {
		t.Errorf("data dir delete: %q", out)
	}
	if r := strata(t, "", "", "groups", "--data-dir", dir, "delete", "--group", "offline"); r.code != exitProblem || !strings.Contains(r.stderr, "GROUP_ID_NOT_FOUND") {
		t.Errorf("data dir delete of a deleted group: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestGroupsUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	for _, args := range [][]string{
		{"delete"},
		{"describe"},
		{"describe", "--group", "g", "--all-groups"},
		{"list", "--group", "g"},
		{"delete", "--group", "g", "--topic", "t"},
		{"describe", "delete", "--group", "g"},
		{"--delete", "list"},
		{"remove", "--group", "g"},
	} {
		r := strata(t, "", "", append([]string{"groups", "--data-dir", dir}, args...)...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || r.stdout != "" || len(lines) != 2 {
			t.Errorf("groups %s: exit %d, stdout %q, stderr %q; want 2 and one line", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}
