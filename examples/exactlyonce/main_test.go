package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/log"
)

// The test runs the program as a child process (this test binary, told so
// by the environment), so that it can be stopped abruptly.
func TestMain(m *testing.M) {
	if os.Getenv("EXACTLYONCE_CHILD") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), "EXACTLYONCE_CHILD=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// TestExactlyOnce: the program is stopped in the middle of a transaction
// twice (os.Exit after its records are written and its offsets sent), then
// killed with SIGKILL while it runs, then run to the end; a READ_COMMITTED
// reader of "out" finds every input record exactly once, upper-cased,
// although the log holds the aborted transactions' records too.
func TestExactlyOnce(t *testing.T) {
	const n = 300
	dir := t.TempDir()
	for _, crash := range []string{"2", "5"} {
		out, err := child(t, "-dir", dir, "-seed", fmt.Sprint(n), "-crash-after", crash).Output()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "the run must crash: %v\n%s", err, out)
		require.Equal(t, 3, ee.ExitCode(), "%s", out)
		require.Contains(t, string(out), "crashing in the middle of a transaction")
	}

	// A kill -9 once it has committed a few transactions.
	cmd := child(t, "-dir", dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "transaction 3:") {
			break
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	out, err := child(t, "-dir", dir).Output()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "input consumed")

	b, err := log.Open(dir, log.Config{})
	require.NoError(t, err)
	defer b.Close()
	committed := readAll(t, b, log.ReadCommitted)
	want := map[string]int{}
	for i := range n {
		want[fmt.Sprintf("RECORD-%d", i)] = 1
	}
	require.Equal(t, want, committed, "each input exactly once")
	all := readAll(t, b, log.ReadUncommitted)
	total := 0
	for _, c := range all {
		total += c
	}
	require.Greater(t, total, n, "the aborted transactions' records are in the log too")
}

// readAll reads topic out to its end at isolation and counts each value.
func readAll(t *testing.T, b *log.Broker, isolation log.IsolationLevel) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{outTopic}, Isolation: isolation, MaxWait: 50 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	n, err := b.Partitions(ctx, outTopic)
	require.NoError(t, err)
	counts := map[string]int{}
	for {
		done := true
		for i := range n {
			end, err := b.ListOffset(ctx, log.TopicPartition{Topic: outTopic, Partition: i}, log.LatestOffset)
			require.NoError(t, err)
			pos, err := c.Position(outTopic, i)
			require.NoError(t, err)
			done = done && pos >= end
		}
		if done {
			return counts
		}
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			counts[string(r.Value)]++
		}
	}
}
