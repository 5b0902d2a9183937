package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-log/strata/log"
)

// start runs the binary with pipes to its stdin and from its stdout and
// stderr.
func start(t *testing.T, args ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout, stderr *bufio.Reader) {
	t.Helper()
	cmd = exec.Command(strataBin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stdin, bufio.NewReader(out), bufio.NewReader(errOut)
}

// readUntil reads lines from r until one contains want, and returns them.
func readUntil(t *testing.T, r *bufio.Reader, want string) string {
	t.Helper()
	var all strings.Builder
	for {
		line, err := r.ReadString('\n')
		all.WriteString(line)
		if strings.Contains(line, want) {
			return all.String()
		}
		if err != nil {
			t.Fatalf("output ended (%v) before %q:\n%s", err, want, all.String())
		}
	}
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// SIGINT while produce waits for more lines on stdin: what it acknowledged
// is in the log and the data dir is closed cleanly.
func TestProduceInterrupted(t *testing.T) {
	dir := newTopic(t, "t", 1)
	cmd, stdin, _, stderr := start(t, "produce", "--data-dir", dir, "--topic", "t", "--verbose")
	for i := range 3 {
		fmt.Fprintf(stdin, "record %d\n", i)
	}
	readUntil(t, stderr, "line 3: partition 0 offset 2")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stderr)
	if code := exitCodeOf(cmd.Wait()); code != exitInterrupted || !strings.Contains(string(rest), "interrupted; stopped cleanly") {
		t.Errorf("exit %d, stderr %q", code, rest)
	}
	if _, err := os.Stat(filepath.Join(dir, ".strata_cleanshutdown")); err != nil {
		t.Errorf("the data dir was not closed cleanly: %v", err)
	}
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.EndOffset() != 3 {
		t.Errorf("end offset %d, want 3", p.EndOffset())
	}
}

// SIGINT in the middle of a perf run: it stops, prints the summary and
// closes the data dir cleanly.
func TestPerfInterrupted(t *testing.T) {
	dir := newTopic(t, "t", 1)
	cmd, _, stdout, _ := start(t, "perf", "produce", "--data-dir", dir, "--topic", "t",
		"--num-records", "1000000000", "--record-size", "10", "--throughput", "20000", "--reporting-interval", "10")
	readUntil(t, stdout, "records sent, ")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	if code := exitCodeOf(cmd.Wait()); code != exitInterrupted {
		t.Errorf("exit %d, want %d", code, exitInterrupted)
	}
	if !strings.Contains(string(rest), "ms 99.9th.") {
		t.Errorf("no summary after the interrupt:\n%s", rest)
	}
	if _, err := os.Stat(filepath.Join(dir, ".strata_cleanshutdown")); err != nil {
		t.Errorf("the data dir was not closed cleanly: %v", err)
	}
}
