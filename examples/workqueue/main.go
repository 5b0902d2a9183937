// Command workqueue uses a topic as a work queue with a share group
// (Kafka's queues, KIP-932): workers of one share group take jobs from
// the same partitions, each job handed to one worker at a time and
// accepted once done. One worker is killed in the middle of a job: the
// jobs it held come back to the others once their lock expires (-lock),
// with their delivery count up, and every job is done exactly once. The
// killed worker stops polling but stays in the group until -max-poll
// (max.poll.interval.ms) has passed: the group's assignor may have given
// it a partition of its own, whose jobs wait for the others until then.
//
// By default the queue is a Broker in the process; with -brokers the same
// workers run over the Kafka protocol against any Kafka 4.2+ cluster (or
// `strata serve`), through kafka.Dial.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

func main() {
	dir := flag.String("dir", "", "data directory (empty: a temporary one)")
	var o options
	flag.StringVar(&o.brokers, "brokers", "", "a Kafka 4.2+ broker's host:port: run over the wire against it (empty: a Broker in the process)")
	flag.IntVar(&o.jobs, "jobs", 40, "jobs to enqueue")
	flag.IntVar(&o.workers, "workers", 3, "workers, the first of which is killed mid-job")
	flag.DurationVar(&o.lock, "lock", 2*time.Second, "how long a worker holds a job it took (share.record.lock.duration.ms)")
	flag.DurationVar(&o.work, "work", 20*time.Millisecond, "how long a job takes")
	flag.DurationVar(&o.maxPoll, "max-poll", 10*time.Second, "how long a worker that stopped polling stays in the group (max.poll.interval.ms; longer than -lock)")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "strata-workqueue")
		if err != nil {
			fmt.Fprintln(os.Stderr, "workqueue:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	o.dir = *dir
	if _, err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "workqueue:", err)
		os.Exit(1)
	}
}

type options struct {
	dir, brokers  string
	jobs, workers int
	lock, work    time.Duration
	maxPoll       time.Duration // 0: Kafka's default, 5 min
}

// done is a job done: by which worker, at which delivery.
type done struct {
	worker, delivery int
}

// result is what a run did, for its test.
type result struct {
	done   map[string][]done // by job
	killed []string          // the jobs the killed worker held
}

const topic, group = "jobs", "workers"

func run(ctx context.Context, out io.Writer, o options) (result, error) {
	out = &lockedWriter{w: out} // the workers print at once
	res := result{done: map[string][]done{}}
	b, err := queue(ctx, o)
	if err != nil {
		return res, err
	}
	defer b.Close()
	prod, err := log.NewProducer(b, log.ProducerConfig{})
	if err != nil {
		return res, err
	}
	for i := range o.jobs {
		if _, err := prod.Send(ctx, log.Record{Topic: topic, Key: fmt.Appendf(nil, "job-%d", i), Value: fmt.Appendf(nil, "payload %d", i)}); err != nil {
			return res, err
		}
	}
	if err := prod.Close(); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "enqueued %d jobs\n", o.jobs)

	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		left     = o.jobs
		finished = make(chan struct{})
	)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := make([]*log.ShareConsumer, o.workers)
	for w := range workers {
		c, err := log.NewShareConsumer(b, log.ShareConsumerConfig{Group: group, Topics: []string{topic}, MaxRecords: 5,
			MaxPollInterval: o.maxPoll, ClientID: fmt.Sprintf("worker-%d", w)})
		if err != nil {
			return res, err
		}
		workers[w] = c
	}
	// The other workers start once worker 0 holds jobs: on a busy machine
	// they could otherwise take every job before worker 0's first poll,
	// and nothing would be left to redo.
	holding := make(chan struct{})
	for w, c := range workers {
		wg.Go(func() {
			if w != 0 {
				select {
				case <-holding:
				case <-ctx.Done():
					return
				}
			}
			for {
				jobs, err := c.Poll(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					fmt.Fprintf(out, "worker %d: %v\n", w, err)
					continue
				}
				if w == 0 && len(jobs) > 0 {
					// Killed in the middle of its first job: it never
					// acknowledges what it holds.
					mu.Lock()
					for _, j := range jobs {
						res.killed = append(res.killed, string(j.Key))
					}
					mu.Unlock()
					fmt.Fprintf(out, "worker 0 killed in the middle of %s, holding %d jobs\n", jobs[0].Key, len(jobs))
					close(holding)
					return
				}
				for _, j := range jobs {
					time.Sleep(o.work) // the job
					if err := j.Accept(); err != nil {
						fmt.Fprintf(out, "worker %d: %v\n", w, err)
						continue
					}
					if err := c.Commit(ctx); err != nil {
						// Too late (its lock expired): another worker does it.
						fmt.Fprintf(out, "worker %d: %s: %v\n", w, j.Key, err)
						continue
					}
					mu.Lock()
					res.done[string(j.Key)] = append(res.done[string(j.Key)], done{worker: w, delivery: j.DeliveryCount})
					if j.DeliveryCount > 1 {
						fmt.Fprintf(out, "worker %d redid %s (delivery %d)\n", w, j.Key, j.DeliveryCount)
					}
					left--
					if left == 0 {
						close(finished)
					}
					mu.Unlock()
				}
			}
		})
	}
	select {
	case <-finished:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	var errs []error
	for _, c := range workers {
		// The killed worker's Close gives back nothing: its locks expired.
		if err := c.Close(context.Background()); err != nil && !errors.Is(err, share.ErrInvalidRecordState) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if err := parent.Err(); err != nil {
		return res, err
	}
	slices.Sort(res.killed)
	fmt.Fprintf(out, "all %d jobs done, %d of them redone after worker 0 was killed\n", len(res.done), len(res.killed))
	return res, nil
}

// client is what the program needs of the queue: a Broker in the process
// or a kafka.Client.
type client interface {
	log.Client
	log.ShareClient
	Close() error
}

// queue opens the Broker, or dials the cluster, and makes the topic and
// the group's configs: start from the first job, a short lock.
func queue(ctx context.Context, o options) (client, error) {
	gc := share.GroupConfig{AutoOffsetReset: "earliest", LockDuration: o.lock}
	if o.brokers != "" {
		cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{o.brokers}, ClientID: "workqueue"})
		if err != nil {
			return nil, err
		}
		if err := cl.CreateTopic(ctx, topic, log.TopicConfig{Partitions: 2}); err != nil && !errors.Is(err, log.ErrTopicExists) {
			cl.Close()
			return nil, err
		}
		if err := cl.SetShareGroupConfig(ctx, group, gc); err != nil {
			cl.Close()
			return nil, err
		}
		return cl, nil
	}
	b, err := log.Open(o.dir, log.Config{})
	if err != nil {
		return nil, err
	}
	if _, err := b.CreateTopic(topic, log.TopicConfig{Partitions: 2}); err != nil && !errors.Is(err, log.ErrTopicExists) {
		b.Close()
		return nil, err
	}
	if err := b.ShareCoordinator().SetGroupConfig(group, gc); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// lockedWriter serializes the workers' writes to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
