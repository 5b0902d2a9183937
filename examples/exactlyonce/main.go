// Command exactlyonce consumes, transforms and produces exactly once, with
// Strata's transactional Producer (KIP-98): it reads the records of topic
// "in" as a member of group "exactlyonce", writes each one upper-cased to
// topic "out", and commits the group's offsets in the same transaction as
// the records it wrote. Killed at any moment and started again, it goes on
// from the last committed transaction: the records of the transaction it
// was in are aborted (READ_COMMITTED readers never see them) and written
// again, so every input record is in "out" exactly once for such readers.
//
//	go run ./examples/exactlyonce -dir /tmp/eo -seed 1000
//
// runs it on a broker in this process, over the data directory /tmp/eo;
// with -bootstrap host:port it runs over the Kafka protocol against any
// Kafka cluster (or `strata serve`) instead. -seed N first writes N input
// records if "in" is empty. -crash-after K stops the process abruptly
// (os.Exit, no Close: as a kill) in the middle of its K-th transaction,
// after its records are sent and before it commits.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

const (
	inTopic  = "in"
	outTopic = "out"
	groupID  = "exactlyonce"
	txnID    = "exactlyonce-upper"
)

// client is what the program needs: a log.Broker and a kafka.Client are
// both one.
type client interface {
	log.TxnClient
	CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error
}

type options struct {
	seed       int
	crashAfter int           // 0: never
	idle       time.Duration // stop once nothing came for this long and the input is consumed
}

func main() {
	dir := flag.String("dir", "./strata-exactlyonce", "data directory of the broker in this process")
	bootstrap := flag.String("bootstrap", "", "host:port of a Kafka broker; empty: a broker in this process over -dir")
	seed := flag.Int("seed", 0, "write this many input records first, if the input is empty")
	crash := flag.Int("crash-after", 0, "exit abruptly in the middle of this transaction (0: never)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := options{seed: *seed, crashAfter: *crash, idle: 2 * time.Second}
	var err error
	if *bootstrap != "" {
		var c *kafka.Client
		if c, err = kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{*bootstrap}, ClientID: "exactlyonce"}); err == nil {
			_, err = run(ctx, os.Stdout, c, opts)
			c.Close()
		}
	} else {
		var b *log.Broker
		if b, err = log.Open(*dir, log.Config{}); err == nil {
			_, err = run(ctx, os.Stdout, b, opts)
			b.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "exactlyonce:", err)
		os.Exit(1)
	}
}

// run processes the input until it is all consumed (committed) and nothing
// more came for opts.idle, and returns how many transactions it committed.
func run(ctx context.Context, out io.Writer, c client, opts options) (int, error) {
	for _, t := range []string{inTopic, outTopic} {
		err := c.CreateTopicContext(ctx, t, log.TopicConfig{Partitions: 3})
		if err != nil && !errors.Is(err, log.ErrTopicExists) {
			return 0, fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	if err := seed(ctx, c, opts.seed); err != nil {
		return 0, err
	}

	p, err := log.NewProducer(c, log.ProducerConfig{TransactionalID: txnID, TransactionTimeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	defer p.Close()
	// Fence the previous instance and wait for its transaction to end
	// (aborted if it was open, completed if it was committing) before
	// the group's committed offsets are read.
	if err := p.InitTransactions(ctx); err != nil {
		return 0, err
	}
	// Small polls, so that a run is many transactions; the shortest
	// session a broker allows by default, so that a restarted instance
	// does not wait long for the killed one to leave the group.
	cons, err := log.NewConsumer(c, log.ConsumerConfig{Group: groupID, Topics: []string{inTopic},
		Isolation: log.ReadCommitted, MaxWait: 200 * time.Millisecond, MaxBytes: 2048, PartitionMaxBytes: 1024,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second, ClientID: "exactlyonce"})
	if err != nil {
		return 0, err
	}
	defer cons.Close()

	committed, idleSince := 0, time.Now()
	for {
		recs, err := cons.Poll(ctx)
		if err != nil {
			return committed, err
		}
		if len(recs) == 0 {
			done, err := consumed(ctx, c)
			if err != nil {
				return committed, err
			}
			if done && time.Since(idleSince) >= opts.idle {
				fmt.Fprintf(out, "input consumed: %d transactions committed\n", committed)
				return committed, nil
			}
			continue
		}
		idleSince = time.Now()
		if err := transform(ctx, p, cons, recs, committed+1 == opts.crashAfter); err != nil {
			// Abort, and read again from the group's committed offsets.
			fmt.Fprintf(out, "transaction failed, aborted: %v\n", err)
			if aerr := p.AbortTransaction(ctx); aerr != nil {
				return committed, errors.Join(err, aerr)
			}
			if err := rewind(ctx, c, cons); err != nil {
				return committed, err
			}
			continue
		}
		committed++
		fmt.Fprintf(out, "transaction %d: %d records\n", committed, len(recs))
	}
}

// transform writes recs upper-cased in one transaction with the
// consumer's new positions; crash exits in its middle.
func transform(ctx context.Context, p *log.Producer, cons *log.Consumer, recs []log.Record, crash bool) error {
	if err := p.BeginTransaction(); err != nil {
		return err
	}
	offsets := map[log.TopicPartition]int64{}
	errs := make(chan error, len(recs))
	for _, r := range recs {
		p.SendAsync(log.Record{Topic: outTopic, Key: r.Key, Value: bytes.ToUpper(r.Value)}, func(_ log.Record, err error) { errs <- err })
		offsets[log.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
	}
	for range recs {
		if err := <-errs; err != nil {
			return err
		}
	}
	if err := p.SendOffsetsToTransaction(ctx, offsets, cons.GroupMetadata()); err != nil {
		return err
	}
	if crash {
		fmt.Println("crashing in the middle of a transaction")
		os.Exit(3) // no Close, no commit: as a kill -9
	}
	return p.CommitTransaction(ctx)
}

// rewind moves the consumer back to the group's committed offsets (or
// the start) of its partitions.
func rewind(ctx context.Context, c client, cons *log.Consumer) error {
	tps := cons.Assignment()
	committed, err := c.FetchOffsets(ctx, groupID, tps)
	if err != nil {
		return err
	}
	for _, tp := range tps {
		off, ok := committed[tp]
		if !ok {
			off = 0
		}
		if err := cons.Seek(tp.Topic, tp.Partition, off); err != nil {
			return err
		}
	}
	return nil
}

// consumed reports whether the group's committed offsets reach the end
// of every partition of the input.
func consumed(ctx context.Context, c client) (bool, error) {
	n, err := c.Partitions(ctx, inTopic)
	if err != nil {
		return false, err
	}
	tps := make([]log.TopicPartition, n)
	for i := range tps {
		tps[i] = log.TopicPartition{Topic: inTopic, Partition: i}
	}
	committed, err := c.FetchOffsets(ctx, groupID, tps)
	if err != nil {
		return false, err
	}
	for _, tp := range tps {
		end, err := c.ListOffset(ctx, tp, log.LatestOffset)
		if err != nil {
			return false, err
		}
		if committed[tp] < end {
			return false, nil
		}
	}
	return true, nil
}

// seed writes n input records "record-0"... if the input is empty.
func seed(ctx context.Context, c client, n int) error {
	if n == 0 {
		return nil
	}
	parts, err := c.Partitions(ctx, inTopic)
	if err != nil {
		return err
	}
	for i := range parts {
		end, err := c.ListOffset(ctx, log.TopicPartition{Topic: inTopic, Partition: i}, log.LatestOffset)
		if err != nil || end > 0 {
			return err
		}
	}
	p, err := log.NewProducer(c, log.ProducerConfig{Idempotent: true})
	if err != nil {
		return err
	}
	defer p.Close()
	for i := range n {
		// One Send at a time: a batch a record, read a few at a time.
		r := log.Record{Topic: inTopic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "record-%d", i)}
		if _, err := p.Send(ctx, r); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}
