package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
)

// newTopic creates a data dir with a topic of n partitions through the
// command, and returns the dir.
func newTopic(t *testing.T, topic string, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", topic, "--partitions", fmt.Sprint(n))
	return dir
}

func TestProduceConsume(t *testing.T) {
	dir := newTopic(t, "orders", 3)
	keys := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
	var in strings.Builder
	for i, k := range keys {
		fmt.Fprintf(&in, "%s:order %d: paid\n", k, i) // the value holds the separator too
	}
	in.WriteString("alice:last\r\n") // a CRLF line loses its CR
	if out := ok(t, "", in.String(), "produce", "--data-dir", dir, "--topic", "orders", "--key-separator", ":",
		"--header", "source=cli", "--header", "trace"); out != "" {
		t.Errorf("produce printed %q", out)
	}

	// Each key is on the partition Kafka's partitioner gives it, in order.
	want := map[int][]string{}
	for i, k := range append(keys, "alice") {
		v := fmt.Sprintf("order %d: paid", i)
		if i == len(keys) {
			v = "last"
		}
		want[log.KeyPartition([]byte(k), 3)] = append(want[log.KeyPartition([]byte(k), 3)],
			fmt.Sprintf("%s=%s [source=cli,trace=]", k, v))
	}
	var wantOut strings.Builder
	for p := range 3 {
		for o, line := range want[p] {
			fmt.Fprintf(&wantOut, "orders/%d@%d %s\n", p, o, line)
		}
	}
	got := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "orders", "--from-beginning", "-f", `%t/%p@%o %k=%s [%h]\n`)
	if got != wantOut.String() {
		t.Errorf("consume:\n%s\nwant:\n%s", got, wantOut.String())
	}

	// Without a start, consume starts at the end: nothing.
	if out := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "orders"); out != "" {
		t.Errorf("consume from the end printed %q", out)
	}
	// --partition and --offset; sizes and the default format.
	p := log.KeyPartition([]byte("alice"), 3)
	got = ok(t, "", "", "consume", "--data-dir", dir, "--topic", "orders", "--partition", fmt.Sprint(p), "--offset", "1", "--format", `%K %S %s\n`)
	lines := want[p][1:]
	var w strings.Builder
	for _, l := range lines {
		kv := strings.TrimSuffix(l, " [source=cli,trace=]")
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&w, "%d %d %s\n", len(k), len(v), v)
	}
	if got != w.String() {
		t.Errorf("--partition %d --offset 1:\n%s\nwant:\n%s", p, got, w.String())
	}
	if out := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "orders", "--from-beginning", "--max-messages", "2"); strings.Count(out, "\n") != 2 {
		t.Errorf("--max-messages 2: %q", out)
	}
}

func TestProduceValuesOnlyAndPartition(t *testing.T) {
	dir := newTopic(t, "logs", 2)
	ok(t, "", "first\n\nthird", "produce", "--data-dir", dir, "--topic", "logs", "--partition", "1")
	// An empty line is an empty value; a last line without a newline counts.
	got := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "logs", "--from-beginning", "-f", `%p %o %K %S "%s"\n`)
	if want := "1 0 -1 5 \"first\"\n1 1 -1 0 \"\"\n1 2 -1 5 \"third\"\n"; got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestConsumeFromTime(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	// Partition 1's records are at baseTime + 100 s + i s.
	ts := baseTime.Add(115 * time.Second)
	for _, arg := range []string{fmt.Sprint(ts.UnixMilli()), ts.UTC().Format(time.RFC3339)} {
		got := ok(t, dir, "", "consume", "--data-dir", ".", "--topic", "events", "--partition", "1", "--from-time", arg, "-f", `%o %T\n`)
		want := fmt.Sprintf("15 %d\n16 %d\n17 %d\n", ts.UnixMilli(), ts.UnixMilli()+1000, ts.UnixMilli()+2000)
		if got != want {
			t.Errorf("--from-time %s:\n%s\nwant:\n%s", arg, got, want)
		}
	}
}

func TestConsumeGroup(t *testing.T) {
	dir := newTopic(t, "jobs", 2)
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "job %d\n", i)
	}
	ok(t, "", in.String(), "produce", "--data-dir", dir, "--topic", "jobs")
	all := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "jobs", "--from-beginning")
	if strings.Count(all, "\n") != 10 {
		t.Fatalf("all: %q", all)
	}
	// A group reads 4, commits; the next run resumes after them; a third
	// finds nothing left.
	first := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "jobs", "--group", "workers", "--from-beginning", "--max-messages", "4")
	if lag := groupLag(t, dir, "workers"); lag != 6 {
		t.Errorf("after 4 of 10 records the group's lag is %d, want 6", lag)
	}
	second := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "jobs", "--group", "workers")
	third := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "jobs", "--group", "workers")
	if strings.Count(first, "\n") != 4 || strings.Count(second, "\n") != 6 || third != "" {
		t.Fatalf("first %q, second %q, third %q", first, second, third)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(first+second), "\n") {
		if seen[l] {
			t.Errorf("%q delivered twice", l)
		}
		seen[l] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
		if !seen[l] {
			t.Errorf("%q never delivered to the group", l)
		}
	}
	// groups describe shows the commits: 10 records over 2 partitions, all
	// consumed, no lag.
	desc := ok(t, "", "", "groups", "--data-dir", dir, "describe", "--group", "workers")
	lines := strings.Split(strings.TrimSpace(desc), "\n")
	if len(lines) != 3 || lines[0] != "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID" {
		t.Fatalf("groups describe:\n%s", desc)
	}
	total := 0
	for i, l := range lines[1:] {
		var g, top string
		var p, cur, end, lag int
		if _, err := fmt.Sscanf(l, "%s\t%s\t%d\t%d\t%d\t%d", &g, &top, &p, &cur, &end, &lag); err != nil || g != "workers" || top != "jobs" || p != i || cur != end || lag != 0 {
			t.Errorf("row %q (%v)", l, err)
		}
		total += end
	}
	if total != 10 {
		t.Errorf("log end offsets sum to %d, want 10:\n%s", total, desc)
	}
	r := strata(t, "", "", "groups", "--data-dir", dir, "describe", "--group", "nobody")
	if r.code != exitProblem || !strings.Contains(r.stderr, "group nobody has no committed offsets") {
		t.Errorf("unknown group: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := ok(t, "", "", "groups", "--data-dir", dir, "list"); out != "workers\n" {
		t.Errorf("groups list: %q", out)
	}

	// A new group without --from-beginning starts at the end.
	if out := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "jobs", "--group", "latecomers"); out != "" {
		t.Errorf("new group from the end: %q", out)
	}
}

func TestProduceConsumeBadInput(t *testing.T) {
	dir := newTopic(t, "t", 1)
	for _, tc := range []struct {
		stdin string
		args  []string
		code  int
		msg   string
	}{
		{"", []string{"produce", "--data-dir", dir}, exitUsage, "--topic is required"},
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "nope"}, exitProblem, "unknown topic"},
		{"k:v\nnosep\nk:w\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--key-separator", ":"}, exitProblem, `line 2: no key separator ":"`},
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--partition", "5"}, exitProblem, "unknown partition"},
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--acks", "2"}, exitUsage, "want all, -1, 1 or 0"},
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--header", "=v"}, exitUsage, "the key is empty"},
		{"x\n", []string{"produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t"}, exitProblem, "connect to --bootstrap-server 127.0.0.1:1"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "-f", "%z"}, exitUsage, "unknown token %z"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--offset", "-3"}, exitUsage, "want a non-negative offset"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--offset", "99"}, exitProblem, "outside the log"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--from-beginning", "--offset", "0"}, exitUsage, "give one of"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--group", "g", "--partition", "0"}, exitUsage, "cannot go with it"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--from-time", "yesterday"}, exitUsage, "want ms since the epoch"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "nope"}, exitProblem, "unknown topic"},
		{"", []string{"consume", "--bootstrap-server", "127.0.0.1:1", "--topic", "t"}, exitProblem, "connect to --bootstrap-server 127.0.0.1:1"},
	} {
		r := strata(t, "", tc.stdin, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("strata %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	// The line before the one without a separator was written; the one
	// after it was not read.
	if out := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning", "-f", `%k=%s\n`); out != "k=v\n" {
		t.Errorf("after the separator error the topic holds %q, want k=v", out)
	}
}

// consume never prints records of a corrupt batch: it fails.
func TestConsumeCorrupt(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	flipValueByte(t, filepath.Join(dir, "events-0"))
	r := strata(t, dir, "", "consume", "--data-dir", ".", "--topic", "events", "--partition", "0", "--from-beginning", "-f", `%o\n`)
	if r.code != exitProblem || !strings.Contains(r.stderr, "corrupt") {
		t.Errorf("exit %d, stderr %q; want 1 and corrupt", r.code, r.stderr)
	}
	if r.stdout != "0\n1\n2\n" {
		t.Errorf("printed %q, want the records before the damaged batch", r.stdout)
	}
}

// Kafka's console tools' --property flags: parse.key on the way in, the
// default formatter's print.* on the way out.
func TestKafkaProperties(t *testing.T) {
	dir := newTopic(t, "t", 1)
	ok(t, "", "a\t1\nb\t2\n", "produce", "--data-dir", dir, "--topic", "t", "--property", "parse.key=true")
	ok(t, "", "c=3\n", "produce", "--data-dir", dir, "--topic", "t", "--property", "parse.key=true", "--property", "key.separator==", "--header", "h=x")
	ok(t, "", "no key\n", "produce", "--data-dir", dir, "--topic", "t")
	got := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--from-beginning",
		"--property", "print.key=true", "--property", "print.offset=true", "--property", "print.headers=true", "--property", "key.separator=|")
	want := "Offset:0|NO_HEADERS|a|1\nOffset:1|NO_HEADERS|b|2\nOffset:2|h:x|c|3\nOffset:3|NO_HEADERS|null|no key\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	got = ok(t, "", "", "consume", "--data-dir", dir, "--topic", "t", "--offset", "3", "--property", "print.timestamp=true", "--property", "print.value=false")
	if !strings.HasPrefix(got, "CreateTime:") || strings.Count(got, "\n") != 1 {
		t.Errorf("print.timestamp only: %q", got)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		msg   string
	}{
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--property", "parse.headers=true"}, `unknown (known: parse.key, key.separator)`},
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--property", "parse.key=yes please"}, "want true or false"},
		{"x\n", []string{"produce", "--data-dir", dir, "--topic", "t", "--key-separator", ":", "--property", "parse.key=true", "--property", "key.separator=;"}, "disagree"},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--property", "print.colour=true"}, `"print.colour": unknown`},
		{"", []string{"consume", "--data-dir", dir, "--topic", "t", "--property", "print.key=true", "-f", "%k"}, "not both"},
	} {
		r := strata(t, "", tc.stdin, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("strata %v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}
}

// groupLag sums the LAG column of groups describe.
func groupLag(t *testing.T, dir, group string) int {
	t.Helper()
	out := ok(t, "", "", "groups", "--data-dir", dir, "describe", "--group", group)
	total := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Split(l, "\t")
		n := 0
		if _, err := fmt.Sscan(f[5], &n); err != nil { // LAG
			t.Fatalf("row %q: %v", l, err)
		}
		total += n
	}
	return total
}
