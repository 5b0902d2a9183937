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
	var sendErrs atomic.Int64
	consumed := make(chan error, 1)

	sw := startStopwatch()
	go func() { consumed <- strataConsume(ctx, cons, n) }()
	for range n {
		prod.SendAsync(log.Record{Topic: "bench", Value: value}, func(_ log.Record, err error) {
			if err != nil {
				sendErrs.Add(1)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		cancel()
		<-consumed
		return sample{}, fmt.Errorf("strata: flush: %w", err)
	}
	if err := <-consumed; err != nil {
		return sample{}, err
	}
	smp := sw.sample(int64(n), size)
	if k := sendErrs.Load(); k > 0 {
		return sample{}, fmt.Errorf("strata: %d sends failed", k)
	}
	return smp, nil
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
