package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	produceSummary = regexp.MustCompile(`(?m)^3000 records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency, [0-9.]+ ms 50th, [0-9.]+ ms 95th, [0-9.]+ ms 99th, [0-9.]+ ms 99\.9th\.\n\z`)
	consumeSummary = regexp.MustCompile(`(?m)^%d records consumed, [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency, [0-9.]+ ms 50th, [0-9.]+ ms 95th, [0-9.]+ ms 99th, [0-9.]+ ms 99\.9th\.\n\z`)
	intervalLine   = regexp.MustCompile(`^[0-9]+ records (sent|consumed), [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency, [0-9.]+ ms 50th, [0-9.]+ ms 99th\.$`)
)

func TestPerf(t *testing.T) {
	dir := newTopic(t, "bench", 2)
	out := ok(t, "", "", "perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "3000", "--record-size", "200",
		"--reporting-interval", "1", "--producer-props", "acks=1", "linger.ms=0", "batch.size=4096")
	if !produceSummary.MatchString(out) {
		t.Errorf("no summary at the end of:\n%s", out)
	}
	checkIntervals(t, out)
	// The records are there, 200 bytes each.
	desc := ok(t, "", "", "topics", "--data-dir", dir, "describe", "--topic", "bench")
	var total int
	for _, f := range regexp.MustCompile(`EndOffset: ([0-9]+)`).FindAllStringSubmatch(desc, -1) {
		n := 0
		for _, c := range f[1] {
			n = n*10 + int(c-'0')
		}
		total += n
	}
	if total != 3000 {
		t.Errorf("the topic holds %d records, want 3000:\n%s", total, desc)
	}
	if v := ok(t, "", "", "consume", "--data-dir", dir, "--topic", "bench", "--from-beginning", "--max-messages", "1", "-f", "%S"); v != "200" {
		t.Errorf("value size %q, want 200", v)
	}

	out = ok(t, "", "", "perf", "consume", "--data-dir", dir, "--topic", "bench", "--reporting-interval", "1")
	if !regexp.MustCompile(strings.Replace(consumeSummary.String(), "%d", "3000", 1)).MatchString(out) {
		t.Errorf("no summary of 3000 records at the end of:\n%s", out)
	}
	checkIntervals(t, out)
	out = ok(t, "", "", "perf", "consume", "--data-dir", dir, "--topic", "bench", "--messages", "1000")
	if !regexp.MustCompile(strings.Replace(consumeSummary.String(), "%d", "1000", 1)).MatchString(out) {
		t.Errorf("--messages 1000: no summary of 1000 records:\n%s", out)
	}

	// With --group the positions reached are committed at the end, as
	// Kafka's perf consumer does on close: every record read, no lag.
	ok(t, "", "", "perf", "consume", "--data-dir", dir, "--topic", "bench", "--group", "perf")
	desc = ok(t, "", "", "groups", "--data-dir", dir, "describe", "--group", "perf")
	var committed int
	for _, f := range regexp.MustCompile(`(?m)^perf\tbench\t[01]\t([0-9]+)\t[0-9]+\t0\b`).FindAllStringSubmatch(desc, -1) {
		n, _ := strconv.Atoi(f[1])
		committed += n
	}
	if committed != 3000 {
		t.Errorf("group perf committed %d records with no lag, want 3000:\n%s", committed, desc)
	}
}

// checkIntervals checks that every line before the summary is an interval line.
func checkIntervals(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		if !intervalLine.MatchString(l) {
			t.Errorf("not an interval line: %q", l)
		}
	}
}

func TestPerfBadInput(t *testing.T) {
	dir := newTopic(t, "bench", 1)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"perf"}, exitUsage, "want produce or consume"},
		{[]string{"perf", "fetch"}, exitUsage, `unknown perf test "fetch"`},
		{[]string{"perf", "produce", "--data-dir", dir, "--topic", "bench"}, exitUsage, "positive --num-records"},
		{[]string{"perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "1", "--producer-props", "transactional.id=t"}, exitUsage, "unknown producer setting"},
		{[]string{"perf", "produce", "--data-dir", dir, "--topic", "nope", "--num-records", "1"}, exitProblem, "unknown topic"},
		{[]string{"perf", "consume", "--data-dir", dir, "--topic", "bench", "--num-records", "5"}, exitProblem, "the topic holds 0 records"},
		{[]string{"perf", "produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "bench", "--num-records", "1"}, exitProblem, "connect to --bootstrap-server 127.0.0.1:1"},
	} {
		r := strata(t, "", "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("strata %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	if h := ok(t, "", "", "perf", "produce", "--help"); !strings.HasPrefix(h, "Usage: strata perf produce") {
		t.Errorf("perf produce --help: %q", h)
	}
}

// perf produce's defaults are Kafka's producer's (idempotent: the batches
// carry a producer id), compression.type compresses them, and an unknown
// codec is a usage error.
func TestPerfProducerProps(t *testing.T) {
	dir := newTopic(t, "bench", 1)
	ok(t, "", "", "perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "500", "--producer-props", "compression.type=lz4")
	segs, err := filepath.Glob(filepath.Join(dir, "bench-0", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment: %v", err)
	}
	dump := ok(t, "", "", "dump", segs[0])
	if !strings.Contains(dump, "compresscodec: lz4") || strings.Contains(dump, "producerId: -1") {
		t.Errorf("want idempotent lz4 batches:\n%s", dump)
	}
	if r := strata(t, "", "", "perf", "produce", "--data-dir", dir, "--topic", "bench", "--num-records", "1", "--producer-props", "compression.type=brotli"); r.code != 2 {
		t.Errorf("compression.type=brotli: exit %d, want 2", r.code)
	}
}
