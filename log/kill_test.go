package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

const (
	killChildEnv     = "STRATA_KILL_CHILD_DIR"
	killIdemChildEnv = "STRATA_KILL_IDEM_CHILD_DIR"
	killIdemStartEnv = "STRATA_KILL_IDEM_START"
)

// TestMain runs the child of TestSIGKILL when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
	}
	if dir := os.Getenv(killIdemChildEnv); dir != "" {
		killIdemChild(dir)
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

// The batches of TestSIGKILLIdempotentRetry's producer: batch i holds
// 1 + i%3 records, values "b<i>-r<j>".
const killIdemPID, killIdemEpoch = 5, 0

func killIdemBatch(i int) []byte {
	seq := 0
	for j := 0; j < i; j++ {
		seq += 1 + j%3
	}
	var bd batch.Builder
	ts := time.Now().UnixMilli()
	bd.Reset(ts)
	bd.SetProducer(killIdemPID, killIdemEpoch, int32(seq))
	for j := 0; j < 1+i%3; j++ {
		bd.Append(ts, nil, []byte(fmt.Sprintf("b%d-r%d-%s", i, j, strings.Repeat("y", i%100))), nil)
	}
	return bytes.Clone(bd.Bytes())
}

// killIdemChild is the child of TestSIGKILLIdempotentRetry: an idempotent
// producer's batches from the one numbered by killIdemStartEnv on, appended
// with FlushMessages 1; it prints "send i" before each append and
// "ack i base" after.
func killIdemChild(dir string) {
	start, err := strconv.Atoi(os.Getenv(killIdemStartEnv))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	b, err := Open(dir, Config{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	tp, err := b.Topic("i")
	if errors.Is(err, ErrUnknownTopic) {
		tp, err = b.CreateTopic("i", TopicConfig{FlushMessages: 1, SegmentBytes: 4 << 10})
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	p, _ := tp.Partition(0)
	out := bufio.NewWriter(os.Stdout)
	for i := start; ; i++ {
		fmt.Fprintln(out, "send", i)
		out.Flush()
		base, _, err := p.AppendBatch(killIdemBatch(i))
		if err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(2)
		}
		fmt.Fprintln(out, "ack", i, base)
		out.Flush()
	}
}

// TestSIGKILLIdempotentRetry kills an idempotent producer's broker process
// between an append and its acknowledgement, at random, in a loop; after
// each kill the batches of the producer's window (the last 5) are sent
// again to the reopened (recovered) log: the acknowledged ones are answered
// with their offsets, the one in doubt is stored once whether or not it
// reached the disk before the kill.
func TestSIGKILLIdempotentRetry(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 2))
	dir := t.TempDir()
	bases := map[int]int64{} // batch → its base offset, acknowledged or retried
	kills := 6
	if testing.Short() {
		kills = 2
	}
	next, inLog, lost := 0, 0, 0
	for k := 0; k < kills; k++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), killIdemChildEnv+"="+dir, killIdemStartEnv+"="+strconv.Itoa(next))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		lastSent := next - 1
		read := func(line string) {
			f := strings.Fields(line)
			require.NotEmpty(t, f)
			require.NotEqual(t, "error", f[0], "child said %q", line)
			i, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			switch f[0] {
			case "send":
				lastSent = i
			case "ack":
				base, err := strconv.ParseInt(f[2], 10, 64)
				require.NoError(t, err)
				bases[i] = base
			}
		}
		want := 20 + rng.IntN(200)
		for acks := 0; acks < want && sc.Scan(); {
			read(sc.Text())
			if strings.HasPrefix(sc.Text(), "ack") {
				acks++
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] != "error" {
				read(sc.Text())
			}
		}
		cmd.Wait()
		require.Greater(t, lastSent, next, "kill %d: the child sent nothing", k)

		b, err := Open(dir, Config{})
		require.NoError(t, err, "kill %d", k)
		p, err := b.Partition("i", 0)
		require.NoError(t, err)
		for i := max(0, lastSent-4); i <= lastSent; i++ {
			end := p.EndOffset()
			base, _, err := p.AppendBatch(killIdemBatch(i))
			require.NoError(t, err, "kill %d: retry of batch %d", k, i)
			if old, ok := bases[i]; ok {
				require.Equal(t, old, base, "kill %d: batch %d answered at another offset", k, i)
			} else {
				require.LessOrEqual(t, base, end, "kill %d: batch %d", k, i)
				bases[i] = base
				if base < end {
					inLog++ // appended before the kill, never acknowledged
				} else {
					lost++
				}
			}
		}
		next = lastSent + 1
		require.NoError(t, b.Close())
	}

	t.Logf("batches in doubt at a kill: %d found in the log (answered as duplicates), %d not (appended)", inLog, lost)
	b, err := Open(dir, Config{})
	require.NoError(t, err)
	defer b.Close()
	p, err := b.Partition("i", 0)
	require.NoError(t, err)
	recs, err := p.Read(0, 1<<30)
	require.NoError(t, err)
	var want []string
	for i := 0; i < next; i++ {
		for j := 0; j < 1+i%3; j++ {
			want = append(want, fmt.Sprintf("b%d-r%d-%s", i, j, strings.Repeat("y", i%100)))
		}
	}
	got := make([]string, len(recs))
	for j, r := range recs {
		got[j] = string(r.Value)
		require.EqualValues(t, j, r.Offset)
	}
	require.Equal(t, want, got, "every batch stored once, in order")
	for i := 0; i < next; i++ {
		require.Equal(t, fmt.Sprintf("b%d-r0-%s", i, strings.Repeat("y", i%100)), got[bases[i]], "batch %d's answer", i)
	}
}
