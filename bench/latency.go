package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// latencyVariants: one record at a time through a Kafka server, from a
// kgo producer's send to a kgo consumer's poll returning it; the next is
// sent when the last was both acknowledged and consumed. Client and server
// share the process, with an application's live heap (heap.go).
func latencyVariants(e *env) []variant {
	const size = serverRecordSize
	rounds := e.pick(20_000, 5_000, 20)
	return []variant{{
		label: "kgo produce → consume latency, " + sizeName(size) + " one at a time (" + kgoLatencySettings + ")",
		unit:  "round trips", cpuNote: "round trip (client + server)",
		liveHeap: true,
		systems: []system{
			{name: "strata server + kgo", baseline: true, durability: strataServerDurability,
				run: func(e *env) (sample, error) { return kgoLatency(e, strataServer, size, rounds) }},
			{name: "strata kafkatest + kgo", durability: "– (in-memory FS)",
				run: func(e *env) (sample, error) { return kgoLatency(e, kafkatestServer, size, rounds) }},
			{name: "kfake + kgo", durability: kfakeMemDurability,
				run: func(e *env) (sample, error) { return kgoLatency(e, kfakeMemServer, size, rounds) }},
			{name: "kfake DataDir + kgo", durability: kfakeDurability,
				run: func(e *env) (sample, error) { return kgoLatency(e, kfakeServer, size, rounds) }},
		},
	}}
}

// kgoLatencySettings is what the latency case changes in kgo's defaults.
const kgoLatencySettings = "kgo: ProduceSync, linger 0 (default 10 ms); else defaults: snappy, acks=all, idempotent, fetch max wait 5 s"

// kgoLatency starts a server, a kgo producer (linger 0, ProduceSync) and a
// kgo consumer polling from the start, sends rounds/10 records untimed to
// warm both up, then times rounds records, each from the send until the
// consumer has it and the producer has its acknowledgement, and apart the
// part until the acknowledgement (AckP50, AckP99).
func kgoLatency(e *env, start func(*env) (*kafkaServer, error), size, rounds int) (sample, error) {
	s, err := start(e)
	if err != nil {
		return sample{}, err
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
	if err != nil {
		return sample{}, fmt.Errorf("kgo: %w", err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return sample{}, fmt.Errorf("kgo: %w", err)
	}
	defer cons.Close()
	value := payload(size)
	one := func() (all, ack time.Duration, err error) {
		t0 := time.Now()
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			return 0, 0, fmt.Errorf("kgo: produce: %w", err)
		}
		ack = time.Since(t0)
		if err := kgoConsume(ctx, cons, 1); err != nil {
			return 0, 0, err
		}
		return time.Since(t0), ack, nil
	}
	for range rounds/10 + 1 {
		if _, _, err := one(); err != nil {
			return sample{}, err
		}
	}
	lat, acks := make([]time.Duration, rounds), make([]time.Duration, rounds)
	sw := startStopwatch()
	for i := range lat {
		if lat[i], acks[i], err = one(); err != nil {
			return sample{}, err
		}
	}
	smp := sw.sample(int64(rounds), size)
	smp.P50, smp.P99 = percentiles(lat)
	smp.AckP50, smp.AckP99 = percentiles(acks)
	return smp, nil
}
