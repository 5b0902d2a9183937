package logtest_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

func TestFixture(t *testing.T) {
	for _, mem := range []bool{false, true} {
		var opts []logtest.Option
		if mem {
			opts = append(opts, logtest.InMemory())
		}
		opts = append(opts, logtest.Topic("orders", 3),
			logtest.Seed("orders", log.Record{Partition: 2, Value: []byte("a")}, log.Record{Partition: 2, Value: []byte("b")}),
			logtest.Seed("events", log.Record{Value: []byte("x")}))
		b := logtest.New(t, opts...)
		require.Equal(t, []string{"events", "orders"}, b.Topics())
		p, err := b.Partition("orders", 2)
		require.NoError(t, err)
		recs, err := p.Read(0, 1<<20)
		require.NoError(t, err)
		require.Len(t, recs, 2)
		require.Equal(t, "b", string(recs[1].Value))
		p, err = b.Partition("events", 0)
		require.NoError(t, err)
		require.EqualValues(t, 1, p.EndOffset())
	}
}

// BenchmarkFixtureStartStop starts an in-memory fixture with one topic of
// one partition and closes it, as a unit test does; compare with
// `cd bench && go run . -case fixture`, which runs kfake beside it.
func BenchmarkFixtureStartStop(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		tb := &fakeTB{TB: b}
		logtest.New(tb, logtest.InMemory(), logtest.Topic("t", 1))
		tb.cleanup()
	}
}

// BenchmarkFixtureStartStopTempDir is BenchmarkFixtureStartStop on the
// default data dir, a temporary directory on the OS's file system.
func BenchmarkFixtureStartStopTempDir(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		tb := &fakeTB{TB: b}
		logtest.New(tb, logtest.Topic("t", 1))
		tb.cleanup()
	}
}

// fakeTB runs the fixture's cleanups when the benchmark says, not at its end.
type fakeTB struct {
	testing.TB
	fns []func()
}

func (f *fakeTB) Cleanup(fn func()) { f.fns = append(f.fns, fn) }
func (f *fakeTB) cleanup() {
	for i := len(f.fns) - 1; i >= 0; i-- {
		f.fns[i]()
	}
	f.fns = nil
}

// TestGroupMinSessionTimeoutAlone: a broker configured with only
// GroupMinSessionTimeout opens (its maximum is Kafka's default, 30 min).
func TestGroupMinSessionTimeoutAlone(t *testing.T) {
	b := logtest.New(t, logtest.InMemory(), logtest.WithConfig(log.Config{GroupMinSessionTimeout: 10 * time.Second}))
	require.NotNil(t, b.GroupCoordinator())
}

// TestNoGoroutineLeft: a fixture's start and stop leave no goroutine behind,
// whichever of its lazily started parts the test used (a long poll starts
// the timing wheel's, a Producer its sender), and whether it is Discarded
// (InMemory, the temporary directory) or Closed (OnFS).
func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, tc := range []struct {
		name string
		opt  logtest.Option
	}{{"in memory", logtest.InMemory()}, {"temp dir", logtest.WithConfig(log.Config{})}, {"on fs", logtest.OnFS(vfs.NewMem())}} {
		t.Run(tc.name, func(t *testing.T) {
			b := logtest.New(t, tc.opt, logtest.Topic("t", 2))
			// A long poll on both partitions: the record, wherever the
			// producer puts it, completes it.
			parked := make(chan error, 1)
			go func() {
				resp, err := b.Fetch(t.Context(), log.FetchRequest{Partitions: []log.FetchPartition{
					{TopicPartition: log.TopicPartition{Topic: "t", Partition: 0}},
					{TopicPartition: log.TopicPartition{Topic: "t", Partition: 1}},
				}, MaxWait: time.Minute})
				if err == nil {
					if n := resp.Partitions[0].Records.Len() + resp.Partitions[1].Records.Len(); n == 0 {
						err = fmt.Errorf("fetched nothing: %+v", resp)
					}
					resp.Release()
				}
				parked <- err
			}()
			p, err := log.NewProducer(b, log.ProducerConfig{})
			require.NoError(t, err)
			_, err = p.Send(t.Context(), log.Record{Topic: "t", Value: []byte("v")})
			require.NoError(t, err)
			require.NoError(t, p.Close())
			require.NoError(t, <-parked)
		})
	}
	leaktest.Wait(t, before)
}

// TestIdleFixtureRunsNoGoroutine: a fixture whose topics hold no record
// runs no goroutine (the broker's loops start with the first record).
func TestIdleFixtureRunsNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	logtest.New(t, logtest.InMemory(), logtest.Topic("t", 3))
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}
