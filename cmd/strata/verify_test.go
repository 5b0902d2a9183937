package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyGood(t *testing.T) {
	r := strata(t, "", "", "verify", "testdata/data")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and no problems", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "2 partitions, 4 segments, 12 batches, 1978 bytes") || !strings.Contains(r.stderr, "everything checks out") {
		t.Errorf("summary: %q", r.stderr)
	}
	// One partition's directory.
	r = strata(t, "", "", "verify", "testdata/data/events-1")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "1 partitions, 2 segments, 6 batches") {
		t.Errorf("a partition dir: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// One goroutine or several: the same output.
	for _, jobs := range []string{"1", "4"} {
		r = strata(t, "", "", "verify", "--jobs", jobs, "testdata/data")
		if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "2 partitions, 4 segments, 12 batches, 1978 bytes") {
			t.Errorf("--jobs %s: exit %d, stdout %q, stderr %q", jobs, r.code, r.stdout, r.stderr)
		}
	}
	r = strata(t, "", "", "verify", "--quiet", "testdata/data")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("--quiet: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestVerifyDamaged(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	p0, p1 := filepath.Join(dir, "events-0"), filepath.Join(dir, "events-1")
	flipValueByte(t, p0)
	// An offset-index entry pointing into the middle of a batch.
	patch(t, filepath.Join(p1, "00000000000000000000.index"), 12, []byte{0, 0, 1, 64})
	// The second segment of events-1 loses its tail.
	if err := os.Truncate(filepath.Join(p1, "00000000000000000012.log"), 300); err != nil {
		t.Fatal(err)
	}
	// A leftover index without its .log.
	if err := os.WriteFile(filepath.Join(p1, "00000000000000000099.index"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := strata(t, dir, "", "verify", ".")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	if !strings.Contains(r.stderr, "7 problem(s)") {
		t.Errorf("summary %q", r.stderr)
	}
	golden(t, "verify_damaged", r.stdout)
	if r1 := strata(t, dir, "", "verify", "--jobs", "1", "."); r1.stdout != r.stdout || r1.code != r.code {
		t.Errorf("--jobs 1 differs from the default:\n%s\nvs\n%s", r1.stdout, r.stdout)
	}
}

func TestVerifyMissingSegmentAndIndexes(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	p0 := filepath.Join(dir, "events-0")
	// Remove the first segment's .log but keep a later one: offsets 0..11
	// are gone; the second segment's indexes are missing.
	for _, f := range []string{"00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
		"00000000000000000012.index", "00000000000000000012.timeindex"} {
		if err := os.Remove(filepath.Join(p0, f)); err != nil {
			t.Fatal(err)
		}
	}
	// A segment that does not follow the one before it: copy the second
	// segment of events-1 under a later name.
	p1 := filepath.Join(dir, "events-1")
	data, err := os.ReadFile(filepath.Join(p1, "00000000000000000012.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		src, _ := os.ReadFile(filepath.Join(p1, "00000000000000000012"+ext))
		if ext == ".log" {
			src = data
		}
		if err := os.WriteFile(filepath.Join(p1, "00000000000000000030"+ext), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := strata(t, dir, "", "verify", ".")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	golden(t, "verify_missing", r.stdout)
}

func TestVerifyBadInput(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{[]string{"verify"}, exitUsage, "want one data dir"},
		{[]string{"verify", "a", "b"}, exitUsage, "want one data dir"},
		{[]string{"verify", "--jobs", "0", "testdata/data"}, exitUsage, "--jobs must be at least 1"},
		{[]string{"verify", filepath.Join(empty, "nope")}, exitProblem, "no such file or directory"},
		{[]string{"verify", "main.go"}, exitProblem, "is not a directory"},
		{[]string{"verify", empty}, exitProblem, "no partition directories"},
	} {
		r := strata(t, "", "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.out) {
			t.Errorf("strata %v: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.out)
		}
	}
}

func TestVerifyProgress(t *testing.T) {
	r := strata(t, "", "", "verify", "--progress", "testdata/data")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// The data is small: the first batch checked prints the line.
	if !strings.Contains(r.stderr, "verify: ") || !strings.Contains(r.stderr, "% 0 of 0 MB, at testdata/data/events-") {
		t.Errorf("no progress line in stderr: %q", r.stderr)
	}
}

func TestVerifyDataDirFiles(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	// topics.json names events-1, which is gone; orders-0 is in no topic.
	if err := os.Rename(filepath.Join(dir, "events-1"), filepath.Join(dir, "orders-0")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "log-start-offset-checkpoint"), []byte("0\n3\nevents 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := strata(t, dir, "", "verify", ".")
	if r.code != exitProblem {
		t.Errorf("exit %d, want %d", r.code, exitProblem)
	}
	golden(t, "verify_dir_files", r.stdout)

	// A topics.json of a later version is not checked, and said so.
	if err := os.WriteFile(filepath.Join(dir, "topics.json"), []byte(`{"version": 2, "topics": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "log-start-offset-checkpoint"))
	r = strata(t, dir, "", "verify", ".")
	if r.code != 0 || !strings.Contains(r.stderr, "note: topics.json: version 2 is not one this strata knows") {
		t.Errorf("topics.json version 2: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	os.Remove(filepath.Join(dir, "topics.json"))
	r = strata(t, dir, "", "verify", ".")
	if r.code != exitProblem || r.stdout != "topics.json: missing: the broker would open no topics, and ignore every partition directory\n" {
		t.Errorf("no topics.json: exit %d, stdout %q", r.code, r.stdout)
	}
}

// Compressed batches of every codec (kgo's and sarama's) are decompressed
// and their records checked: the dir checks out. One flagged gzip whose
// payload is not gzip is a problem.
func TestVerifyCompressed(t *testing.T) {
	dir, part := compressedSegment(t)
	r := strata(t, "", "", "verify", dir)
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "8 compressed batches (decompressed, every record checked)") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(gzipFlagged)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(part, "00000000000000000000.log"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r = strata(t, "", "", "verify", dir)
	if r.code != exitProblem || !strings.Contains(r.stdout, "batch at byte 0 (offsets 0..0)") {
		t.Errorf("gzip-flagged batch that is not gzip: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A file verify cannot read is a problem like any other, and the walk goes
// on to the next segment.
func TestVerifyUnreadable(t *testing.T) {
	dir := copyDir(t, "testdata/data")
	bad := filepath.Join(dir, "events-0", "00000000000000000000.log")
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(bad, 0o755); err != nil { // a .log that is a directory
		t.Fatal(err)
	}
	r := strata(t, dir, "", "verify", ".")
	if r.code != exitProblem || !strings.Contains(r.stdout, "events-0/00000000000000000000.log: byte 0: read ") ||
		!strings.Contains(r.stdout, "is a directory") || !strings.Contains(r.stderr, "4 segments") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
