package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceVariants: n records produced asynchronously and consumed by a
// concurrent consumer, one partition (one stream subject), timed from the
// first send to the last record consumed.
func produceVariants(e *env) []variant {
	var vs []variant
	for _, size := range []int{100, 1024} {
		n := e.pick(500_000, 100_000, 500)
		if size == 1024 {
			n = e.pick(200_000, 40_000, 300)
		}
		vs = append(vs, variant{
			label: "produce+consume " + sizeName(size), cpuNote: "record", liveHeap: true,
			limit: limitPageCache,
			systems: []system{
				{name: "strata Producer+Consumer", baseline: true,
					durability: "page cache (FlushMessages 0: fsync on roll and Close)",
					run:        func(e *env) (sample, error) { return strataProduceConsume(e, size, n) }},
				{name: "NATS JetStream (embedded, file)", durability: natsDurability,
					run: func(e *env) (sample, error) { return natsProduceConsume(e, size, n) }},
				{name: "kfake + kgo", durability: kfakeDurability,
					run: func(e *env) (sample, error) { return kfakeProduceConsume(e, size, n) }},
				// Not a default: what Kafka's 16 KiB batch.size would
				// cost (Strata's default is kgo's 1 MB), in the same run.
				{name: "strata Producer+Consumer, BatchBytes 16 KiB",
					durability: "page cache (FlushMessages 0: fsync on roll and Close)",
					run: func(e *env) (sample, error) {
						return strataProduceConsumeWith(e, size, n, log.ProducerConfig{BatchBytes: 16 << 10}, [][]byte{payload(size)})
					}},
			},
		})
	}
	return vs
}

// consumeTimeout bounds any one produce+consume run.
const consumeTimeout = 2 * time.Minute

// natsProduceConsume publishes n messages with PublishAsync while an
// ordered consumer reads them.
func natsProduceConsume(e *env, size, n int) (sample, error) {
	dir, err := e.tempDir("nats-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	ns, err := startNATS(dir, "bench", false)
	if err != nil {
		return sample{}, err
	}
	defer ns.close()
	var pubErrs atomic.Int64
	js, err := jetstream.New(ns.nc, jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) {
		pubErrs.Add(1)
	}))
	if err != nil {
		return sample{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "bench", jetstream.OrderedConsumerConfig{})
	if err != nil {
		return sample{}, err
	}
	var got atomic.Int64
	done := make(chan struct{})
	value := payload(size)

	sw := startStopwatch()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return sample{}, err
	}
	defer cc.Stop()
	// Block while the window of unacknowledged publishes is full, as the
	// other producers do (its default gives up after 200 ms).
	stall := jetstream.WithStallWait(consumeTimeout)
	for range n {
		if _, err := js.PublishAsync("bench", value, stall); err != nil {
			return sample{}, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return sample{}, fmt.Errorf("nats: publish: %w", ctx.Err())
	}
	select {
	case <-done:
	case <-ctx.Done():
		return sample{}, fmt.Errorf("nats: consumed %d of %d: %w", got.Load(), n, ctx.Err())
	}
	smp := sw.sample(int64(n), size)
	if k := pubErrs.Load(); k > 0 {
		return sample{}, fmt.Errorf("nats: %d publishes failed", k)
	}
	return smp, nil
}

// kfakeProduceConsume produces n records with kgo's async Produce while a
// second kgo client consumes them.
func kfakeProduceConsume(e *env, size, n int) (sample, error) {
	return kfakeProduceConsumeWith(e, size, n, [][]byte{payload(size)})
}

// timeProduceConsume times one produce+consume run: n calls of send (which
// counts failed records in failed), flush, and consume (reading the n
// records, run concurrently from the start). cancel ends consume if flush
// fails.
func timeProduceConsume(ctx context.Context, cancel context.CancelFunc, system string, n, size int,
	send func(failed *atomic.Int64), flush func(context.Context) error, consume func(context.Context) error) (sample, error) {
	var failed atomic.Int64
	consumed := make(chan error, 1)
	sw := startStopwatch()
	go func() { consumed <- consume(ctx) }()
	for range n {
		send(&failed)
	}
	if err := flush(ctx); err != nil {
		cancel()
		<-consumed
		return sample{}, fmt.Errorf("%s: flush: %w", system, err)
	}
	if err := <-consumed; err != nil {
		return sample{}, err
	}
	smp := sw.sample(int64(n), size)
	if k := failed.Load(); k > 0 {
		return sample{}, fmt.Errorf("%s: %d sends failed", system, k)
	}
	return smp, nil
}

// kgoConsume polls cl until it has n records.
func kgoConsume(ctx context.Context, cl *kgo.Client, n int) error {
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kgo: consumed %d of %d: %w", got, n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return fmt.Errorf("kgo: fetch: %w", ferr)
		}
		got += fs.NumRecords()
	}
	return nil
}
