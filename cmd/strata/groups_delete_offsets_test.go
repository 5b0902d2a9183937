package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// groups delete-offsets as kafka-consumer-groups.sh --delete-offsets, over
// the Kafka protocol (OffsetDelete on the coordinator) and on a data dir:
// an empty group loses a topic's offsets (every partition, or those
// named), the others stay; an active group keeps those of the topic its
// member consumes (exit 1, the partition's error) and loses the others;
// an unknown group is an error.
func TestGroupsDeleteOffsets(t *testing.T) {
	dir := newTopic(t, "orders", 2)
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "audit", "--partitions", "1")
	s := startServe(t, dir)
	b := s.addr
	ok(t, "", "a\nb\n", "produce", "-b", b, "-t", "orders", "-p", "0")
	ok(t, "", "c\n", "produce", "-b", b, "-t", "orders", "-p", "1")
	ok(t, "", "e\nf\n", "produce", "-b", b, "-t", "audit")
	ok(t, "", "", "consume", "-b", b, "-G", "done", "orders", "-o", "beginning", "-c", "3")
	ok(t, "", "", "consume", "-b", b, "-G", "done", "audit", "-o", "beginning", "-c", "2")
	committed := func(g string) []string {
		t.Helper()
		var out []string
		for _, r := range groupRows(t, ok(t, "", "", "groups", "--bootstrap-server", b, "describe", "--group", g)) {
			if r[3] != "-" {
				out = append(out, r[1]+"-"+r[2])
			}
		}
		return out
	}
	if got := strings.Join(committed("done"), " "); got != "audit-0 orders-0 orders-1" {
		t.Fatalf("committed before: %s", got)
	}

	out := ok(t, "", "", "groups", "--bootstrap-server", b, "--delete-offsets", "--group", "done", "--topic", "orders:1")
	want := "Request succeed for deleting offsets with topic orders group done\n\n" +
		"TOPIC                          PARTITION       STATUS         \n" +
		"orders                         1               Successful     \n"
	if out != want {
		t.Errorf("delete-offsets orders:1:\n%q\nwant\n%q", out, want)
	}
	if got := strings.Join(committed("done"), " "); got != "audit-0 orders-0" {
		t.Errorf("committed after deleting orders-1: %s", got)
	}
	out = ok(t, "", "", "groups", "--bootstrap-server", b, "delete-offsets", "--group", "done", "--topic", "orders")
	if !strings.Contains(out, "orders                         0               Successful") || !strings.Contains(out, "orders                         1               Successful") {
		t.Errorf("delete-offsets orders:\n%s", out)
	}
	if got := strings.Join(committed("done"), " "); got != "audit-0" {
		t.Errorf("committed after deleting orders: %s", got)
	}

	// An active member consuming orders: its commits of orders stay.
	kc, err := kafka.Dial(context.Background(), kafka.DialConfig{Seeds: []string{b}})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Group: "live", Topics: []string{"orders"}, Reset: log.ResetEarliest, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cons.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cons.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := strata(t, "", "", "groups", "--bootstrap-server", b, "delete-offsets", "--group", "live", "--topic", "orders:0")
	if r.code != exitProblem || !strings.Contains(r.stderr, "Encounter some partition level error") ||
		!strings.Contains(r.stdout, "orders                         0               Error: The group is subscribed to the topic.") {
		t.Errorf("delete-offsets of an active group's topic: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := strata(t, "", "", "groups", "--bootstrap-server", b, "delete-offsets", "--group", "nope", "--topic", "orders"); r.code != exitProblem || !strings.Contains(r.stderr, "'nope' does not exist") {
		t.Errorf("delete-offsets of an unknown group: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := cons.Close(); err != nil {
		t.Fatal(err)
	}
	s.stop(t)

	// On the data dir, the same.
	out = ok(t, "", "", "groups", "--data-dir", dir, "delete-offsets", "--group", "done", "--topic", "audit")
	if !strings.Contains(out, "Request succeed for deleting offsets with topic audit group done") || !strings.Contains(out, "audit                          0               Successful") {
		t.Errorf("data dir delete-offsets:\n%s", out)
	}
	if r := strata(t, "", "", "groups", "--data-dir", dir, "describe", "--group", "done"); r.code != exitProblem {
		t.Errorf("describe of a group without offsets: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"delete-offsets", "--group", "g"},
		{"delete-offsets", "--topic", "t"},
		{"delete-offsets", "--all-groups", "--topic", "t"},
		{"delete-offsets", "--group", "g", "--group", "h", "--topic", "t"},
		{"delete-offsets", "--group", "g", "--topic", "t:x"},
	} {
		if r := strata(t, "", "", append([]string{"groups", "--data-dir", dir}, args...)...); r.code != exitUsage {
			t.Errorf("groups %s: exit %d, want %d\n%s", strings.Join(args, " "), r.code, exitUsage, r.stderr)
		}
	}
}
