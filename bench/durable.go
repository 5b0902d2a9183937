package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kgo"
)

// durableSenders is how many goroutines send synchronously at once in the
// durable case: each waits for its record's acknowledgement, which comes
// only after an fsync, before it sends the next.
const durableSenders = 64

// durableVariants: acknowledged-only-when-fsynced produce with many
// concurrent synchronous senders, for a fixed time.
func durableVariants(e *env) []variant {
	d := e.pickDur(4*time.Second, time.Second, 100*time.Millisecond)
	var vs []variant
	for _, size := range []int{100, 1024} {
		vs = append(vs, variant{
			label:   fmt.Sprintf("durable produce %s, %d senders", sizeName(size), durableSenders),
			cpuNote: "record",
			limit:   limitFsync, liveHeap: true,
			systems: []system{
				{name: "strata FlushMessages 1", baseline: true,
					durability: "fsync before ack (FlushMessages 1; concurrent appends share an fsync)",
					run:        func(e *env) (sample, error) { return strataDurable(e, size, d, 0) }},
				{name: "strata FlushMessages 1, Linger -1",
					durability: "fsync before ack (as above; the producer does not linger)",
					run:        func(e *env) (sample, error) { return strataDurable(e, size, d, -1) }},
				{name: "NATS JetStream SyncAlways", durability: natsSyncDurability,
					run: func(e *env) (sample, error) { return natsDurable(e, size, d) }},
				{name: "kfake SyncWrites + kgo", durability: kfakeSyncDurability,
					run: func(e *env) (sample, error) { return kfakeDurable(e, size, d) }},
			},
		})
	}
	return vs
}

// sendFor runs durableSenders goroutines calling send until d has passed
// and returns how many sends of size bytes succeeded and how long it took,
// to the last acknowledgement. The first error stops every sender.
func sendFor(d time.Duration, size int, send func(ctx context.Context) error) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sw := startStopwatch()
	deadline := sw.start.Add(d)
	for range durableSenders {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := send(ctx); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	return sw.sample(acked.Load(), size), first
}

func strataDurable(e *env, size int, d, linger time.Duration) (sample, error) {
	dir, err := e.tempDir("strata-durable-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return sample{}, err
	}
	defer b.Close()
	if _, err := b.CreateTopic("bench", log.TopicConfig{FlushMessages: 1}); err != nil {
		return sample{}, err
	}
	prod, err := log.NewProducer(b, log.ProducerConfig{Linger: linger})
	if err != nil {
		return sample{}, err
	}
	defer prod.Close()
	value := payload(size)
	smp, err := sendFor(d, size, func(ctx context.Context) error {
		_, err := prod.Send(ctx, log.Record{Topic: "bench", Value: value})
		return err
	})
	if err != nil {
		return sample{}, fmt.Errorf("strata: %w", err)
	}
	return smp, nil
}

func natsDurable(e *env, size int, d time.Duration) (sample, error) {
	dir, err := e.tempDir("nats-durable-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	ns, err := startNATS(dir, "bench", true)
	if err != nil {
		return sample{}, err
	}
	defer ns.close()
	value := payload(size)
	smp, err := sendFor(d, size, func(ctx context.Context) error {
		_, err := ns.js.Publish(ctx, "bench", value)
		return err
	})
	if err != nil {
		return sample{}, fmt.Errorf("nats: %w", err)
	}
	return smp, nil
}

func kfakeDurable(e *env, size int, d time.Duration) (sample, error) {
	dir, err := e.tempDir("kfake-durable-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	c, err := startKfake(dir, "bench", true)
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	cl, err := kgoClient(c, kgo.DefaultProduceTopic("bench"))
	if err != nil {
		return sample{}, err
	}
	defer cl.Close()
	value := payload(size)
	smp, err := sendFor(d, size, func(ctx context.Context) error {
		return cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr()
	})
	if err != nil {
		return sample{}, fmt.Errorf("kgo: %w", err)
	}
	return smp, nil
}
