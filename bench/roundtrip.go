package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// roundTripVariants: one test's whole use of a Kafka fixture — start it,
// produce roundTripRecords records of 100 B with kgo, consume them with a
// second kgo client, close everything — again and again, timed one by one.
// The test's live heap is in the process (heap.go).
func roundTripVariants(e *env) []variant {
	rounds := e.pick(300, 100, 3)
	return []variant{{
		label: fmt.Sprintf("Kafka fixture round trip: up, kgo produces %d × 100 B, consumes them, closes (kgo defaults; Produce + Flush)", roundTripRecords),
		unit:  "round trips", cpuNote: "round trip",
		liveHeap: true,
		systems: []system{
			{name: "strata kafkatest.New + Cleanup", baseline: true, durability: "– (in-memory FS; listens on 127.0.0.1)",
				run: func(e *env) (sample, error) { return repeatTimed(rounds, kafkatestRoundTrip) }},
			{name: "kfake.NewCluster(1 broker) + Close", durability: "– (in memory; listens on 127.0.0.1)",
				run: func(e *env) (sample, error) { return repeatTimed(rounds, kfakeRoundTrip) }},
		},
	}}
}

// roundTripRecords is how many records one round trip produces and
// consumes.
const roundTripRecords = 100

// repeatTimed calls f n times and times each call.
func repeatTimed(n int, f func() error) (sample, error) {
	runtime.GC()
	ds := make([]time.Duration, n)
	sw := startStopwatch()
	for i := range ds {
		t0 := time.Now()
		if err := f(); err != nil {
			return sample{}, err
		}
		ds[i] = time.Since(t0)
	}
	smp := sw.sample(int64(n), 0)
	smp.P50, smp.P99 = percentiles(ds)
	return smp, nil
}

func kafkatestRoundTrip() error {
	tb := &fixtureTB{}
	return tb.run(func() {
		c := kafkatest.New(tb, kafkatest.Topic("bench", 1))
		if err := kgoProduceConsume(c.Addr(), roundTripRecords); err != nil {
			tb.Fatalf("%v", err)
		}
	})
}

func kfakeRoundTrip() error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "bench"))
	if err != nil {
		return fmt.Errorf("kfake: %w", err)
	}
	defer c.Close()
	return kgoProduceConsume(c.ListenAddrs()[0], roundTripRecords)
}

// kgoProduceConsume produces n records of 100 B to topic "bench" at addr
// with one kgo client (Produce + Flush) and consumes them from the start
// with another, as a test of a Kafka application does.
func kgoProduceConsume(addr string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	if err := kgoProduce(ctx, addr, serverRecordSize, n); err != nil {
		return err
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("kgo: %w", err)
	}
	defer cons.Close()
	return kgoConsume(ctx, cons, n)
}
