package main

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/log"
)

// strataProduceConsume sends n records with Producer.SendAsync (default
// config) while a Consumer (no group) polls them.
func strataProduceConsume(e *env, size, n int) (sample, error) {
	return strataProduceConsumeWith(e, size, n, log.ProducerConfig{}, [][]byte{payload(size)})
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
