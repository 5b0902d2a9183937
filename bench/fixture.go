package main

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/floor"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kfake"
)

// fixtureVariants: a unit-test fixture with one topic of one partition,
// started and stopped, again and again.
func fixtureVariants(e *env) []variant {
	n := fixtureStarts(e)
	kfake := system{name: "kfake.NewCluster(1 broker) + Close", durability: "– (in memory; listens on 127.0.0.1)",
		run: func(e *env) (sample, error) { return repeat(n, kfakeFixture) }}
	return []variant{{
		label: "fixture start + stop, 1 topic", unit: "starts", cpuNote: "start",
		systems: []system{
			{name: "strata logtest.New(InMemory) + Cleanup", baseline: true, durability: "– (in-memory FS)",
				run: func(e *env) (sample, error) { return repeat(n, strataFixture) }},
			kfake,
		},
	}, {
		// Like with like: both listen on 127.0.0.1:0 and serve the Kafka
		// protocol; × Strata of kfake's row is kfake's starts/s over
		// kafkatest's.
		label: "Kafka fixture start + stop, 1 topic", unit: "starts", cpuNote: "start",
		limit: limitListener,
		systems: []system{
			{name: "strata kafkatest.New + Cleanup", baseline: true, durability: "– (in-memory FS; listens on 127.0.0.1)",
				run: func(e *env) (sample, error) { return repeat(n, kafkaFixture) }},
			kfake,
			// kafkatest's floor with Strata's broker: its work and a
			// bare listener's, one after the other as in kafkatest.New,
			// with no Kafka server around the listener.
			{name: "logtest.New(InMemory) + a bare listener, no server", durability: "– (in-memory FS; listens on 127.0.0.1)",
				run: func(e *env) (sample, error) { return repeat(n, brokerAndListener) }},
		},
	}}
}

// fixtureStarts is how many starts one run of the fixture case times.
func fixtureStarts(e *env) int { return e.pick(2_000, 300, 10) }

func repeat(n int, f func() error) (sample, error) {
	runtime.GC()
	cpu0, start := processCPU(), time.Now()
	for range n {
		if err := f(); err != nil {
			return sample{}, err
		}
	}
	return sample{Records: int64(n), Elapsed: time.Since(start), CPU: processCPU() - cpu0}, nil
}

func strataFixture() error {
	tb := &fixtureTB{}
	err := tb.run(func() { logtest.New(tb, logtest.InMemory(), logtest.Topic("t", 1)) })
	return err
}

// kafkaFixture starts and stops kafkatest's fixture as a test does, asking
// it for the address a Kafka client would be given.
func kafkaFixture() error {
	tb := &fixtureTB{}
	return tb.run(func() {
		c := kafkatest.New(tb, kafkatest.Topic("t", 1))
		if c.Addr() == "" {
			tb.Fatalf("kafkatest: no address")
		}
	})
}

// brokerAndListener starts and stops logtest's fixture and, inside it, a
// bare listener with its accept goroutine (limits_kafka.go).
func brokerAndListener() error {
	tb := &fixtureTB{}
	return tb.run(func() {
		logtest.New(tb, logtest.InMemory(), logtest.Topic("t", 1))
		if err := floor.Listener(); err != nil {
			tb.Fatalf("listener: %v", err)
		}
	})
}

func kfakeFixture() error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// fixtureTB is the part of testing.TB that logtest.New uses, so that the
// fixture can be started outside a test: Fatal ends the run with an error
// and Cleanup functions run when it ends, last first, as in a test.
type fixtureTB struct {
	testing.TB // nil: any other method panics
	cleanups   []func()
	errs       []string
}

type fatal struct{}

func (t *fixtureTB) Helper()          {}
func (t *fixtureTB) Name() string     { return "bench" }
func (t *fixtureTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (t *fixtureTB) Errorf(format string, args ...any) {
	t.errs = append(t.errs, fmt.Sprintf(format, args...))
}
func (t *fixtureTB) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	panic(fatal{})
}

// start calls f as the start of a test body and returns what failed; on
// failure the cleanups registered so far have run, otherwise the caller
// runs them with cleanup.
func (t *fixtureTB) start(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatal); !ok {
				panic(r)
			}
		}
		if len(t.errs) > 0 {
			t.cleanup()
			err = fmt.Errorf("fixture: %v", t.errs)
		}
	}()
	f()
	return nil
}

// cleanup runs the cleanups, last first, as a test's end does.
func (t *fixtureTB) cleanup() {
	for _, c := range slices.Backward(t.cleanups) {
		c()
	}
	t.cleanups = nil
}

// run calls f as a test body, then the cleanups, and returns what failed.
func (t *fixtureTB) run(f func()) (err error) {
	defer func() {
		t.cleanup()
		if r := recover(); r != nil {
			if _, ok := r.(fatal); !ok {
				panic(r)
			}
		}
		if len(t.errs) > 0 {
			err = fmt.Errorf("fixture: %v", t.errs)
		}
	}()
	f()
	return nil
}
