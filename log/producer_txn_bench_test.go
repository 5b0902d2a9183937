package log

import (
	"context"
	"testing"
	"time"
)

// BenchmarkTxnProduce is the bench module's txn case in the package, for
// profiles: 100 B records through a Producer on a Broker in a temp dir,
// idempotent (one Flush at the end) or in transactions of 1,000 records,
// each committed before the next begins. ns/op is per record.
func BenchmarkTxnProduce(b *testing.B) {
	for _, transactional := range []bool{false, true} {
		name := "idempotent"
		if transactional {
			name = "transactional"
		}
		b.Run(name, func(b *testing.B) {
			br, err := Open(b.TempDir(), Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if _, err := br.CreateTopic("bench", TopicConfig{}); err != nil {
				b.Fatal(err)
			}
			cfg := ProducerConfig{Idempotent: true, Acks: AcksAll}
			if transactional {
				cfg.TransactionalID = "bench-txn"
			}
			prod, err := NewProducer(br, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer prod.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if transactional {
				if err := prod.InitTransactions(ctx); err != nil {
					b.Fatal(err)
				}
			}
			value := make([]byte, 100)
			done := func(_ Record, err error) {
				if err != nil {
					b.Error(err)
				}
			}
			b.SetBytes(100)
			b.ReportAllocs()
			b.ResetTimer()
			if !transactional {
				for range b.N {
					prod.SendAsync(Record{Topic: "bench", Value: value}, done)
				}
				if err := prod.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				return
			}
			for sent := 0; sent < b.N; {
				if err := prod.BeginTransaction(); err != nil {
					b.Fatal(err)
				}
				for k := 0; k < 1000 && sent < b.N; k++ {
					prod.SendAsync(Record{Topic: "bench", Value: value}, done)
					sent++
				}
				if err := prod.CommitTransaction(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTxnCommit is the cost of a transaction apart from its records:
// one 100 B record per transaction, each committed before the next begins
// (AddPartitionsToTxn, the batch, EndTxn, its marker and the coordinator's
// three records). ns/op is per transaction.
func BenchmarkTxnCommit(b *testing.B) {
	br, err := Open(b.TempDir(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if _, err := br.CreateTopic("bench", TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	prod, err := NewProducer(br, ProducerConfig{TransactionalID: "bench-txn"})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := prod.InitTransactions(ctx); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	done := func(_ Record, err error) {
		if err != nil {
			b.Error(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := prod.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		prod.SendAsync(Record{Topic: "bench", Value: value}, done)
		if err := prod.CommitTransaction(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
