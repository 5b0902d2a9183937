package main

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// A mistyped flag prints one line and the --help hint to stderr, nothing
// to stdout, and exits 2: for every command, and for a flag given before
// the command.
func TestBadFlagOneLine(t *testing.T) {
	for _, c := range commands() {
		r := strata(t, "", "", c.name, "--no-such-flag")
		want := "strata " + c.name + ": unknown flag --no-such-flag\nRun 'strata " + c.name + " --help' for usage.\n"
		if c.name == "perf" {
			r = strata(t, "", "", c.name, "produce", "--no-such-flag")
		}
		if r.code != exitUsage || r.stdout != "" || r.stderr != want {
			t.Errorf("strata %s --no-such-flag: exit %d\nstdout %q\nstderr %q\nwant exit 2, no stdout, stderr %q", c.name, r.code, r.stdout, r.stderr, want)
		}
	}
	// A typo names the flag it is most likely of.
	r := strata(t, "", "", "consume", "--from-begining")
	if want := "strata consume: unknown flag --from-begining (did you mean --from-beginning?)\n"; !strings.HasPrefix(r.stderr, want) {
		t.Errorf("consume --from-begining: stderr %q, want it to start %q", r.stderr, want)
	}
	for _, args := range [][]string{{"--topics"}, {"consume", "--from-begining"}, {"groups", "--al-groups"}, {"produce", "-x"}, {"perf"}, {"frobnicate"}} {
		r := strata(t, "", "", args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || r.stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'strata ") {
			t.Errorf("strata %s: exit %d\nstdout %q\nstderr %q\nwant exit 2, no stdout, one line and the hint", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	out := ok(t, "", "", "version")
	if !strings.HasPrefix(out, "strata ") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
		t.Errorf("strata version printed %q", out)
	}
	for _, flag := range []string{"--version", "-version"} {
		if got := ok(t, "", "", flag); got != out {
			t.Errorf("strata %s printed %q, strata version %q", flag, got, out)
		}
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "devel"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "devel 0123456789ab+dirty"},
		{&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "devel abc"},
	} {
		if got := buildVersion(tc.bi); got != tc.want {
			t.Errorf("buildVersion(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

func TestPerfHelpListsTests(t *testing.T) {
	out := ok(t, "", "", "perf", "--help")
	i := strings.Index(out, "Commands:\n")
	if i < 0 || !strings.Contains(out[i:], "\n  produce ") || !strings.Contains(out[i:], "\n  consume ") || strings.Contains(out, "Flags:") {
		t.Errorf("strata perf --help does not list produce and consume under Commands:\n%s", out)
	}
	for _, test := range []string{"produce", "consume"} {
		out := ok(t, "", "", "perf", test, "--help")
		if !strings.HasPrefix(out, "Usage: strata perf "+test) || !strings.Contains(out, "--num-records") {
			t.Errorf("strata perf %s --help:\n%s", test, out)
		}
	}
}

// --partitions 0 (or a negative count, or --replication-factor 0) is a
// usage error, before anything is created or dialed.
func TestTopicsCreateZeroPartitions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{
		{"--data-dir", dir, "create", "--topic", "t", "--partitions", "0"},
		{"--data-dir", dir, "create", "--topic", "t", "--partitions", "-3"},
		{"--data-dir", dir, "create", "--topic", "t", "--replication-factor", "0"},
		{"--bootstrap-server", "127.0.0.1:1", "create", "--topic", "t", "--partitions", "0"},
		{"--data-dir", dir, "alter", "--topic", "t", "--partitions", "0"},
		{"--data-dir", dir, "describe", "--partitions", "0"},
	} {
		r := strata(t, "", "", append([]string{"topics"}, args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "strata topics: --") {
			t.Errorf("strata topics %s: exit %d, stderr %q; want 2 and the flag named", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused creates left a data dir: %v", err)
	}
}

// serve that cannot start — its port or metrics port in use, a data dir in
// use, a bad flag — exits 1 (2 for the flag) without creating the data dir,
// and leaves an existing one as it was.
func TestServeFailedStartLeavesNoDataDir(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tmp := t.TempDir()
	fresh := filepath.Join(tmp, "fresh")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--listen", busy.Addr().String()}, exitProblem},
		{[]string{"--listen", "127.0.0.1:0", "--metrics-addr", busy.Addr().String()}, exitProblem},
		{[]string{"--listen", "127.0.0.1:0", "--no-such-flag"}, exitUsage},
		{[]string{"--listen", "127.0.0.1:0", "--override", "num.partitions=0"}, exitUsage},
		// A cluster member whose ports are taken.
		{[]string{"--listen", busy.Addr().String(), "--node-id", "1", "--raft-addr", busy.Addr().String(),
			"--peer", "1=" + busy.Addr().String() + "," + busy.Addr().String()}, exitProblem},
	} {
		r := strata(t, "", "", append([]string{"serve", "--data-dir", fresh}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("serve %s: exit %d, want %d; stderr %q", strings.Join(tc.args, " "), r.code, tc.code, r.stderr)
		}
		if strings.Contains(r.stdout, "listening") {
			t.Errorf("serve %s printed %q though it did not start", strings.Join(tc.args, " "), r.stdout)
		}
		if _, err := os.Stat(fresh); !os.IsNotExist(err) {
			t.Fatalf("serve %s left a data dir behind: %v", strings.Join(tc.args, " "), err)
		}
	}

	// An existing data dir that a start fails on keeps its topic.
	dir := newTopic(t, "kept", 1)
	r := strata(t, "", "", "serve", "--data-dir", dir, "--listen", busy.Addr().String())
	if r.code != exitProblem || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("serve on a busy port: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := ok(t, "", "", "topics", "--data-dir", dir, "list"); out != "kept\n" {
		t.Errorf("after the failed start the data dir lists %q", out)
	}

	// A data dir in use by a running serve: the second one fails at the
	// lock, and the first still serves it.
	s := startServe(t, dir)
	r = strata(t, "", "", "serve", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if r.code != exitProblem || !strings.Contains(r.stderr, "in use") || strings.Contains(r.stdout, "listening") {
		t.Errorf("serve on a data dir in use: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, "", "", "topics", "--bootstrap-server", s.addr, "list"); out != "kept\n" {
		t.Errorf("the first serve lists %q", out)
	}
	s.stop(t)
}

// serve prints "listening on" after every port is bound: with
// --metrics-addr, /metrics answers as soon as the line is out.
func TestServeListeningAfterEveryPort(t *testing.T) {
	dir := newTopic(t, "t", 1)
	s := startServe(t, dir, "--metrics-addr", "127.0.0.1:0")
	defer s.stop(t)
	for _, addr := range []string{s.addr, s.metrics} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("%s not bound when serve said it listens: %v", addr, err)
		}
		c.Close()
	}
}

// dump of the active segment's index of a running broker: its preallocated
// tail is normal, said as such, not a problem; once the broker stopped
// cleanly the index is trimmed and still no problem.
func TestDumpLiveIndex(t *testing.T) {
	dir := newTopic(t, "t", 1)
	s := startServe(t, dir)
	ok(t, "", "a\nb\nc\n", "produce", "--bootstrap-server", s.addr, "--topic", "t")
	files := []string{filepath.Join(dir, "t-0", "00000000000000000000.index"), filepath.Join(dir, "t-0", "00000000000000000000.timeindex")}
	for _, f := range files {
		r := strata(t, "", "", "dump", f)
		if r.code != 0 || strings.Contains(r.stdout, "problem") || strings.Contains(r.stdout, "not trimmed") ||
			!strings.Contains(r.stdout, "the active segment of a running broker, whose index is preallocated (normal") {
			t.Errorf("dump %s of a running broker: exit %d\n%s%s", filepath.Base(f), r.code, r.stdout, r.stderr)
		}
	}
	// A copy of the live index outside the data dir is judged as a file
	// alone: its untrimmed tail is a problem again.
	cp := filepath.Join(t.TempDir(), "00000000000000000000.index")
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := strata(t, "", "", "dump", cp); r.code != exitProblem || !strings.Contains(r.stdout, "not trimmed") {
		t.Errorf("dump of a copied untrimmed index: exit %d\n%s", r.code, r.stdout)
	}
	s.stop(t)
	for _, f := range files {
		r := strata(t, "", "", "dump", f)
		if r.code != 0 || strings.Contains(r.stdout, "problem") || strings.Contains(r.stdout, "preallocated") {
			t.Errorf("dump %s after a clean stop: exit %d\n%s%s", filepath.Base(f), r.code, r.stdout, r.stderr)
		}
	}
}
