package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// TestGroups848ListDescribeReset: strata groups with a consumer-protocol
// (KIP-848) group beside a classic one. list --type --state names each
// group's type and state (and keeps to the types or states given);
// describe names the consumer group's member on the partitions the
// coordinator assigned it (ConsumerGroupDescribe); reset-offsets refuses
// the active group, and once it is empty prints without committing
// (--dry-run, the default) and commits with --execute: --to-earliest,
// --shift-by (kept within the log), --to-datetime, --to-latest, over the
// Kafka protocol and on the stopped data dir.
func TestGroups848ListDescribeReset(t *testing.T) {
	dir := newTopic(t, "orders", 2)
	s := startServe(t, dir)
	b := s.addr
	ok(t, "", "a\nb\nc\nd\n", "produce", "-b", b, "-t", "orders", "-p", "0")
	ok(t, "", "e\nf\n", "produce", "-b", b, "-t", "orders", "-p", "1")
	ok(t, "", "", "consume", "-b", b, "-G", "classic", "orders", "-o", "beginning", "-c", "6")

	kc, err := kafka.Dial(context.Background(), kafka.DialConfig{Seeds: []string{b}, ClientID: "app848"})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{
		Group: "g848", Topics: []string{"orders"}, Reset: log.ResetEarliest, Protocol: log.GroupProtocolConsumer,
		MaxWait: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for read := 0; read < 6; {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read += len(recs)
	}
	if err := cons.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "list"); out != "classic\ng848\n" {
		t.Errorf("list: %q", out)
	}
	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "--list", "--type", "--state"); out != "GROUP\tTYPE\tSTATE\nclassic\tclassic\tEmpty\ng848\tconsumer\tStable\n" {
		t.Errorf("list --type --state: %q", out)
	}
	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "list", "--type=consumer"); out != "GROUP\tTYPE\ng848\tconsumer\n" {
		t.Errorf("list --type=consumer: %q", out)
	}
	if out := ok(t, "", "", "groups", "--bootstrap-server", b, "list", "--state=empty"); out != "GROUP\tSTATE\nclassic\tEmpty\n" {
		t.Errorf("list --state=empty: %q", out)
	}

	rows := groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "g848"))
	if len(rows) != 2 {
		t.Fatalf("describe g848: %q", rows)
	}
	for i, r := range rows {
		want := []string{"g848", "orders", string(rune('0' + i)), []string{"4", "2"}[i], []string{"4", "2"}[i], "0"}
		if strings.Join(r[:6], " ") != strings.Join(want, " ") || r[6] == "-" || !strings.Contains(r[7], "127.0.0.1") || r[8] != "app848" {
			t.Errorf("describe g848 row %q: want %q and the member", r, want)
		}
	}

	// describe --state and --members: a row per group, per member.
	st := strings.Split(strings.TrimSuffix(ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--all-groups", "--state"), "\n"), "\n")
	if len(st) != 3 || st[0] != "GROUP\tTYPE\tSTATE\tASSIGNMENT-STRATEGY\t#MEMBERS\tGROUP-EPOCH\tTARGET-ASSIGNMENT-EPOCH" ||
		st[1] != "classic\tclassic\tEmpty\t-\t0\t-\t-" || !strings.HasPrefix(st[2], "g848\tconsumer\tStable\tuniform\t1\t") {
		t.Errorf("describe --state: %q", st)
	} else if f := strings.Split(st[2], "\t"); f[5] != f[6] || f[5] == "0" {
		t.Errorf("describe --state of g848: epochs %s and %s, want one epoch above 0", f[5], f[6])
	}
	ms := strings.Split(strings.TrimSuffix(ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "g848", "--members"), "\n"), "\n")
	if len(ms) != 2 || ms[0] != "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS\tEPOCH\tASSIGNMENT\tTARGET-ASSIGNMENT" {
		t.Fatalf("describe --members: %q", ms)
	}
	if f := strings.Split(ms[1], "\t"); len(f) != 8 || f[0] != "g848" || f[1] != rows[0][6] || f[3] != "app848" || f[4] != "2" ||
		f[5] == "-" || f[6] != "orders(0,1)" || f[7] != "orders(0,1)" {
		t.Errorf("describe --members row %q", f)
	}

	// Active: refused, nothing committed.
	r := strata(t, "", "", "groups", "--bootstrap-server", b, "reset-offsets", "--group", "g848", "--topic", "orders", "--to-earliest", "--execute")
	if r.code != exitProblem || !strings.Contains(r.stderr, "can only be reset if the group 'g848' is inactive, but the current state is Stable") {
		t.Errorf("reset of the active group: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if err := cons.Close(); err != nil { // leaves: the group is Empty
		t.Fatal(err)
	}

	reset := func(args ...string) string {
		t.Helper()
		return ok(t, "", "", append([]string{"groups", "--bootstrap-server", b, "--reset-offsets", "--group", "g848"}, args...)...)
	}
	current := func() []string {
		t.Helper()
		var out []string
		for _, r := range groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", "g848")) {
			out = append(out, r[3])
		}
		return out
	}
	if out := reset("--topic", "orders", "--to-earliest", "--dry-run"); out != "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET\ng848\torders\t0\t0\ng848\torders\t1\t0\n" {
		t.Errorf("--to-earliest --dry-run: %q", out)
	}
	if got := strings.Join(current(), " "); got != "4 2" {
		t.Errorf("after a dry run: committed %s, want 4 2 (unchanged)", got)
	}
	reset("--topic", "orders:0", "--to-earliest", "--execute")
	if got := strings.Join(current(), " "); got != "0 2" {
		t.Errorf("after --to-earliest of orders:0: committed %s, want 0 2", got)
	}
	if out := reset("--all-topics", "--shift-by", "3", "--execute"); out != "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET\ng848\torders\t0\t3\ng848\torders\t1\t2\n" {
		t.Errorf("--shift-by 3: %q (partition 1 kept at its end)", out)
	}
	reset("--topic", "orders", "--shift-by", "-10", "--execute")
	if got := strings.Join(current(), " "); got != "0 0" {
		t.Errorf("after --shift-by -10: committed %s, want 0 0", got)
	}
	reset("--topic", "orders", "--to-datetime", "2100-01-01T00:00:00.000", "--execute")
	if got := strings.Join(current(), " "); got != "4 2" {
		t.Errorf("after --to-datetime in 2100: committed %s, want the ends 4 2", got)
	}
	reset("--topic", "orders", "--to-datetime", "2000-01-01T00:00:00Z", "--execute")
	if got := strings.Join(current(), " "); got != "0 0" {
		t.Errorf("after --to-datetime in 2000: committed %s, want 0 0", got)
	}
	// The consumer group's offsets are the ones a new member starts from.
	cons2, err := log.NewConsumer(kc, log.ConsumerConfig{
		Group: "g848", Topics: []string{"orders"}, Reset: log.ResetLatest, Protocol: log.GroupProtocolConsumer, MaxWait: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for len(vals) < 6 {
		recs, err := cons2.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
	}
	if err := cons2.Close(); err != nil {
		t.Fatal(err)
	}
	s.stop(t)

	// On the data dir.
	ok(t, "", "", "groups", "--data-dir", dir, "reset-offsets", "--group", "g848", "--topic", "orders", "--to-latest", "--execute")
	rows = groupRows(t, ok(t, "", "", "groups", "--data-dir", dir, "describe", "--group", "g848"))
	if len(rows) != 2 || rows[0][3] != "4" || rows[1][3] != "2" {
		t.Errorf("data dir after --to-latest: %q", rows)
	}
	if out := ok(t, "", "", "groups", "--data-dir", dir, "list", "--type"); out != "GROUP\tTYPE\nclassic\tclassic\ng848\tconsumer\n" {
		t.Errorf("data dir list --type: %q", out)
	}
	if out := ok(t, "", "", "groups", "--data-dir", dir, "describe", "--group", "g848", "--state"); !strings.HasPrefix(out, "GROUP\tTYPE") || !strings.Contains(out, "\ng848\tconsumer\tEmpty\tuniform\t0\t") {
		t.Errorf("data dir describe --state: %q", out)
	}
}

func TestGroupsResetUsage(t *testing.T) {
	dir := newTopic(t, "orders", 1)
	for _, args := range [][]string{
		{"reset-offsets", "--group", "g", "--topic", "orders"},                                  // no scenario
		{"reset-offsets", "--group", "g", "--topic", "orders", "--to-earliest", "--to-latest"},  // two
		{"reset-offsets", "--group", "g", "--to-earliest"},                                      // no topic
		{"reset-offsets", "--group", "g", "--topic", "orders", "--all-topics", "--to-earliest"}, // both
		{"reset-offsets", "--group", "g", "--topic", "orders", "--to-latest", "--execute", "--dry-run"},
		{"reset-offsets", "--group", "g", "--topic", "orders", "--to-datetime", "yesterday"},
		{"reset-offsets", "--group", "g", "--topic", "orders", "--shift-by", "x"},
		{"describe", "--group", "g", "--to-earliest"},
		{"describe", "--group", "g", "--type"},
		{"describe", "--group", "g", "--state=Stable"},
		{"describe", "--group", "g", "--state", "--members"},
		{"list", "--members"},
		{"delete", "--group", "g", "--state"},
	} {
		r := strata(t, "", "", append([]string{"groups", "--data-dir", dir}, args...)...)
		if r.code != exitUsage || r.stdout != "" {
			t.Errorf("groups %s: exit %d, stdout %q, stderr %q; want a usage error", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// A partition the topic does not have changes nothing.
	r := strata(t, "", "", "groups", "--data-dir", dir, "reset-offsets", "--group", "g", "--topic", "orders:3", "--to-earliest", "--execute")
	if r.code == 0 || !strings.Contains(r.stderr, "orders has 1 partitions, no 3") {
		t.Errorf("orders:3: exit %d, stderr %q", r.code, r.stderr)
	}
}
