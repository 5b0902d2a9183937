package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/strata-log/strata/log"
)

// strataProduceConsume sends n records with Producer.SendAsync (default
// config) while a Consumer (no group) polls them.
func strataProduceConsume(e *env, size, n int) (sample, error) {
	dir, err := e.tempDir("strata-produce-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return sample{}, err
	}
	defer b.Close()
	if _, err := b.CreateTopic("bench", log.TopicConfig{}); err != nil {
		return sample{}, err
	}
	prod, err := log.NewProducer(b, log.ProducerConfig{})
	if err != nil {
		return sample{}, err
	}
	defer prod.Close()
	cons, err := log.NewConsumer(b, log.ConsumerConfig{Topics: []string{"bench"}})
	if err != nil {
		return sample{}, err
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	value := payload(size)
	return timeProduceConsume(ctx, cancel, "strata", n, size,
		func(failed *atomic.Int64) {
			prod.SendAsync(log.Record{Topic: "bench", Value: value}, func(_ log.Record, err error) {
				if err != nil {
					failed.Add(1)
				}
			})
		},
		prod.Flush,
		func(ctx context.Context) error { return strataConsume(ctx, cons, n) })
}

// strataConsume polls cons until it has n records.
func strataConsume(ctx context.Context, cons *log.Consumer, n int) error {
	got := 0
	for got < n {
		recs, err := cons.Poll(ctx)
		if err != nil {
			return fmt.Errorf("strata: consumed %d of %d: %w", got, n, err)
		}
		got += len(recs)
	}
	return nil
}
