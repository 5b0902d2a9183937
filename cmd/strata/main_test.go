package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output of this run")

// strataBin is the strata command built once for the whole test run.
var strataBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		// A fuzzing worker runs only the fuzz target, in-process: no binary.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "strata-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = filepath.Join(dir, "strata")
	build := []string{"build", "-o", strataBin}
	if raceEnabled {
		build = append(build, "-race")
	}
	out, err := exec.Command("go", append(build, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one run of the binary left.
type result struct {
	stdout, stderr string
	code           int
}

// strata runs the binary in dir (the package directory when "") with stdin
// and args.
func strata(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(strataBin, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run strata %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// ok runs the binary and fails the test unless it exits 0.
func ok(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	r := strata(t, dir, stdin, args...)
	if r.code != 0 {
		t.Fatalf("strata %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// copyDir copies the tree at src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestUsage(t *testing.T) {
	r := strata(t, "", "")
	if r.code != exitUsage || !strings.Contains(r.stderr, "Usage: strata <command>") {
		t.Errorf("no arguments: exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
	}
	out := ok(t, "", "", "--help")
	for _, c := range commands() {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("--help does not list %s:\n%s", c.name, out)
		}
		help := strata(t, "", "", c.name, "--help")
		if help.code != 0 || !strings.HasPrefix(help.stdout, "Usage: strata "+c.name) || strings.Count(help.stdout, "Usage:") != 1 {
			t.Errorf("strata %s --help: exit %d, stdout %q", c.name, help.code, help.stdout)
		}
	}
	r = strata(t, "", "", "frobnicate")
	if r.code != exitUsage || !strings.Contains(r.stderr, "unknown command \"frobnicate\"\n") {
		t.Errorf("unknown command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = strata(t, "", "", "topcs") // a typo: the command it is most likely one of
	if r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "topcs" (did you mean topics?)`) {
		t.Errorf("a typo of a command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = strata(t, "", "", "dump", "--no-such-flag")
	if r.code != exitUsage || !strings.Contains(r.stderr, "unknown flag --no-such-flag\n") {
		t.Errorf("unknown flag: exit %d, stderr %q", r.code, r.stderr)
	}
}
