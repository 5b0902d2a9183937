package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/strata-log/strata/log"
)

// The txn case (issue 27): transactional produce against idempotent
// produce in the same run, in the process (log.Producer on a Broker), one
// partition, 100 B records. The transactional producer commits a
// transaction every txnBatch records; the target is at least 0.8× the
// idempotent producer's records/s.

const (
	txnRecordSize = 100
	txnBatch      = 1_000
)

func txnRecords(e *env) int { return e.pick(500_000, 100_000, 2*txnBatch) }

func txnVariants(e *env) []variant {
	n := txnRecords(e)
	return []variant{{
		label:   fmt.Sprintf("produce %s, transactions of %d records vs idempotent", sizeName(txnRecordSize), txnBatch),
		cpuNote: "record",
		systems: []system{
			{name: "strata Producer, idempotent (acks=all)", baseline: true,
				durability: "page cache (FlushMessages 0: fsync on roll and Close)",
				run:        func(e *env) (sample, error) { return strataTxnProduce(e, n, false) }},
			{name: fmt.Sprintf("strata Producer, transactional (%d records per commit)", txnBatch),
				durability: "page cache, as the records (__transaction_state follows the broker's flush policy)",
				run:        func(e *env) (sample, error) { return strataTxnProduce(e, n, true) }},
		},
	}}
}

// strataTxnProduce sends n records with Producer.SendAsync and times them
// until all are acknowledged: with transactional, in transactions of
// txnBatch records, each committed before the next begins (the
// InitTransactions before the clock starts); without, one Flush at the end.
func strataTxnProduce(e *env, n int, transactional bool) (sample, error) {
	dir, err := e.tempDir("strata-txn-")
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
	cfg := log.ProducerConfig{Idempotent: true, Acks: log.AcksAll}
	if transactional {
		cfg.TransactionalID = "bench-txn"
	}
	prod, err := log.NewProducer(b, cfg)
	if err != nil {
		return sample{}, err
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	if transactional {
		if err := prod.InitTransactions(ctx); err != nil {
			return sample{}, fmt.Errorf("strata: init transactions: %w", err)
		}
	}
	value := payload(txnRecordSize)
	var failed atomic.Int64
	done := func(_ log.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	sw := startStopwatch()
	if transactional {
		for sent := 0; sent < n; {
			if err := prod.BeginTransaction(); err != nil {
				return sample{}, fmt.Errorf("strata: begin transaction: %w", err)
			}
			for k := 0; k < txnBatch && sent < n; k++ {
				prod.SendAsync(log.Record{Topic: "bench", Value: value}, done)
				sent++
			}
			if err := prod.CommitTransaction(ctx); err != nil {
				return sample{}, fmt.Errorf("strata: commit transaction: %w", err)
			}
		}
	} else {
		for range n {
			prod.SendAsync(log.Record{Topic: "bench", Value: value}, done)
		}
		if err := prod.Flush(ctx); err != nil {
			return sample{}, fmt.Errorf("strata: flush: %w", err)
		}
	}
	smp := sw.sample(int64(n), txnRecordSize)
	if k := failed.Load(); k > 0 {
		return sample{}, fmt.Errorf("strata: %d sends failed", k)
	}
	return smp, nil
}
