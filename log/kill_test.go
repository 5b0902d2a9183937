package log

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

const killChildEnv = "STRATA_KILL_CHILD_DIR"

// TestMain runs the child of TestSIGKILL when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
	}
	os.Exit(m.Run())
}

// killChild is the child of TestSIGKILL: it appends forever with
// FlushMessages 1 and prints "offset value" for every acknowledged record.
func killChild(dir string) {
	b, err := Open(dir, Config{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	tp, err := b.Topic("t")
	if errors.Is(err, ErrUnknownTopic) {
		tp, err = b.CreateTopic("t", TopicConfig{FlushMessages: 1, SegmentBytes: 64 << 10})
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	p, _ := tp.Partition(0)
	out := bufio.NewWriter(os.Stdout)
	run := os.Getpid()
	for i := 0; ; i++ {
		v := fmt.Sprintf("%d-%d-%s", run, i, strings.Repeat("x", i%200))
		off, err := p.Append(Record{Value: []byte(v)})
		if err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(2)
		}
		fmt.Fprintln(out, off, v)
		out.Flush()
	}
}

// TestSIGKILL kills a child process that appends with FlushMessages 1 at
// random moments, in a loop, and checks after each kill that every offset it
// acknowledged is there with its value, and that the log goes on from there.
func TestSIGKILL(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 1))
	dir := t.TempDir()
	acked := map[int64]string{}
	kills := 6
	if testing.Short() {
		kills = 2
	}
	for k := 0; k < kills; k++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		want := 50 + rng.IntN(400)
		n := 0
		for n < want && sc.Scan() {
			line := sc.Text()
			f := strings.SplitN(line, " ", 2)
			require.Len(t, f, 2, "child said %q", line)
			require.NotEqual(t, "error", f[0], "child said %q", line)
			off, err := strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err)
			acked[off] = f[1]
			n++
		}
		require.Equal(t, want, n, "child ended early: %v", sc.Err())
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		// Whatever it printed before dying was acknowledged too.
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 2)
			if len(f) == 2 {
				if off, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					acked[off] = f[1]
				}
			}
		}
		cmd.Wait()

		b, err := Open(dir, Config{FS: vfs.Default})
		require.NoError(t, err, "kill %d", k)
		p, err := b.Partition("t", 0)
		require.NoError(t, err)
		recs, err := p.Read(0, 1<<30)
		require.NoError(t, err)
		got := map[int64]string{}
		for _, r := range recs {
			got[r.Offset] = string(r.Value)
		}
		for off, v := range acked {
			require.Equal(t, v, got[off], "kill %d: acknowledged offset %d", k, off)
		}
		require.EqualValues(t, len(recs), p.EndOffset())
		require.NoError(t, b.Close())
	}
}
