package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPartitionFilter: kafka-topics.sh's report options, partition by
// partition, as its PartitionDescription decides them.
func TestPartitionFilter(t *testing.T) {
	live := func(id int32) bool { return id != 3 } // broker 3 is down
	type part struct {
		leader        int32
		replicas, isr []int32
		minISR        int
	}
	healthy := part{1, []int32{1, 2, 3}, []int32{1, 2, 3}, 2}
	shrunk := part{1, []int32{1, 2, 3}, []int32{1, 2}, 2}
	alone := part{1, []int32{1, 2, 3}, []int32{1}, 2}
	leaderless := part{-1, []int32{3}, []int32{3}, 1}
	deadLeader := part{3, []int32{3, 1}, []int32{3, 1}, 1}
	for _, tc := range []struct {
		f    partitionFilter
		name string
		want []bool // healthy, shrunk, alone, leaderless, deadLeader
	}{
		{partitionFilter{}, "none", []bool{true, true, true, true, true}},
		{partitionFilter{underReplicated: true}, "under-replicated", []bool{false, true, true, false, false}},
		{partitionFilter{underMinISR: true}, "under-min-isr", []bool{false, false, true, true, false}},
		{partitionFilter{atMinISR: true}, "at-min-isr", []bool{false, true, false, true, false}},
		{partitionFilter{unavailable: true}, "unavailable", []bool{false, false, false, true, true}},
	} {
		for i, p := range []part{healthy, shrunk, alone, leaderless, deadLeader} {
			if got := tc.f.keep(p.leader, p.replicas, p.isr, p.minISR, live); got != tc.want[i] {
				t.Errorf("%s: partition %d (%+v): %v, want %v", tc.name, i, p, got, tc.want[i])
			}
		}
	}
}

// TestTopicsDescribeReports runs the report options on a data dir and over
// --bootstrap-server: a single node is the leader and the whole ISR of
// everything, so only partitions at their min.insync.replicas (1) show.
func TestTopicsDescribeReports(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "a", "--partitions", "2")
	wantDir := "\tTopic: a\tPartition: 0\tStartOffset: 0\tEndOffset: 0\tSize: 0\tSegments: 1\n" +
		"\tTopic: a\tPartition: 1\tStartOffset: 0\tEndOffset: 0\tSize: 0\tSegments: 1\n"
	if out := ok(t, "", "", "topics", "--data-dir", dir, "describe", "--at-min-isr-partitions"); out != wantDir {
		t.Errorf("at-min-isr:\n%q\nwant\n%q", out, wantDir)
	}
	for _, f := range []string{"--under-replicated-partitions", "--under-min-isr-partitions", "--unavailable-partitions"} {
		if out := ok(t, "", "", "topics", "--data-dir", dir, "describe", f); out != "" {
			t.Errorf("%s: %q, want nothing", f, out)
		}
	}
	for _, args := range [][]string{
		{"list", "--under-replicated-partitions"},
		{"describe", "--under-replicated-partitions", "--unavailable-partitions"},
	} {
		r := strata(t, "", "", append([]string{"topics", "--data-dir", dir}, args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--under-replicated-partitions") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}

	s := startServe(t, t.TempDir())
	bs := []string{"--bootstrap-server", s.addr}
	run := func(args ...string) string {
		t.Helper()
		return ok(t, "", "", append(args, bs...)...)
	}
	run("topics", "create", "--topic", "b", "--partitions", "2")
	want := "\tTopic: b\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n\tTopic: b\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\n"
	if out := run("topics", "describe", "--at-min-isr-partitions"); out != want {
		t.Errorf("at-min-isr over the wire:\n%q\nwant\n%q", out, want)
	}
	for _, f := range []string{"--under-replicated-partitions", "--under-min-isr-partitions", "--unavailable-partitions"} {
		if out := run("topics", "describe", "--topic", "b", f); out != "" {
			t.Errorf("%s over the wire: %q, want nothing", f, out)
		}
	}
}
