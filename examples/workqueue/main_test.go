package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// TestWorkQueue runs the program in virtual time: every job is done
// exactly once; the jobs the killed worker held are done by the others,
// at delivery 2, once their lock expired. The killed worker keeps
// heartbeating until MaxPollInterval (Kafka's default, 5 min here): in
// about one run of three the assignor gives it a partition of its own
// (3 workers, 2 partitions), done by the others only after it left.
func TestWorkQueue(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		const jobs, lock = 40, 2 * time.Second
		start := time.Now()
		res, err := run(context.Background(), &out, options{dir: dir, jobs: jobs, workers: 3, lock: lock, work: 20 * time.Millisecond})
		require.NoError(t, err, "%s", out.String())
		checkRun(t, res, jobs, out.String())
		require.GreaterOrEqual(t, time.Since(start), lock, "redone only after the lock expired")
		require.Contains(t, out.String(), "worker 0 killed in the middle of")
		require.Contains(t, out.String(), fmt.Sprintf("all %d jobs done", jobs))
	})
}

// TestWorkQueueOverTheWire runs the program with -brokers against a
// Strata server in the test, in real time: the same workers over
// kafka.Dial, every job done exactly once, the killed worker's jobs
// redone at delivery 2 once their lock expired (1 s), its partition, if
// it had one of its own, taken over once it left (-max-poll 3 s).
func TestWorkQueueOverTheWire(t *testing.T) {
	b, err := log.Open(t.TempDir(), log.Config{})
	require.NoError(t, err)
	defer b.Close()
	s, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{})
	require.NoError(t, err)
	defer s.Close()
	var out bytes.Buffer
	const jobs = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := run(ctx, &out, options{brokers: s.Addr(), jobs: jobs, workers: 3, lock: time.Second, maxPoll: 3 * time.Second, work: time.Millisecond})
	require.NoError(t, err, "%s", out.String())
	checkRun(t, res, jobs, out.String())
}

// checkRun: every job done once, none by the killed worker, those it held
// at their second delivery.
func checkRun(t *testing.T, res result, jobs int, out string) {
	t.Helper()
	require.Len(t, res.done, jobs, "%s", out)
	for i := range jobs {
		d := res.done[fmt.Sprintf("job-%d", i)]
		require.Len(t, d, 1, "job-%d done once", i)
		require.NotEqual(t, 0, d[0].worker, "the killed worker finished nothing")
	}
	require.NotEmpty(t, res.killed)
	for _, j := range res.killed {
		require.Equal(t, 2, res.done[j][0].delivery, "%s redone at its second delivery", j)
	}
}
