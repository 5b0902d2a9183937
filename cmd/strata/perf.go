package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/log"
)

const perfHelp = `
Measures throughput and latency against a Kafka-protocol broker
(--bootstrap-server: strata serve, Apache Kafka, ...) or on a data dir
directly (--data-dir), as kafka-producer-perf-test.sh
and kafka-consumer-perf-test.sh do. Every --reporting-interval a line gives
the records/s, MB/s and latency percentiles of that interval; at the end a
summary gives those of the whole run.

  strata perf produce --bootstrap-server ADDR|--data-dir DIR --topic T
                      --num-records N --record-size B [--throughput R] [--producer-props acks=1 linger.ms=5 ...]
  strata perf consume --bootstrap-server ADDR|--data-dir DIR --topic T [--num-records N] [--group G]

produce: the latency of a record is from its Send to its acknowledgement.
--producer-props takes acks, compression.type, enable.idempotence,
linger.ms, batch.size, buffer.memory and request.timeout.ms; the defaults are Kafka's producer's
(idempotent, acks=all, 5 batches in flight, linger.ms 5) but batch.size,
1 MB as kgo's (Kafka's Java client: 16 KiB; give batch.size=16384 to
compare with its perf test). consume: reads from the start of the log; the latency is
that of each Poll. The topic must exist (strata topics create).
--producer.config and --consumer.config read Kafka's properties files as
produce and consume do (a property not used is a warning).`

func runPerf(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("want produce or consume: strata perf produce|consume [flags]")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stdout, "Usage: strata perf produce|consume --bootstrap-server ADDR|--data-dir DIR --topic T [flags]")
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, strings.TrimSpace(perfHelp))
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "Commands:")
		fmt.Fprintln(e.stdout, "  produce  measure produce throughput and latency (kafka-producer-perf-test.sh)")
		fmt.Fprintln(e.stdout, "  consume  measure consume throughput and latency (kafka-consumer-perf-test.sh)")
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "Run 'strata perf produce --help' or 'strata perf consume --help' for their flags.")
		return errHelp
	case "produce":
		return runPerfProduce(e, args[1:])
	case "consume":
		return runPerfConsume(e, args[1:])
	}
	return usagef("unknown perf test %q: want produce or consume", args[0])
}

// latencies collects latencies: of an interval (for its line) the sum and
// maximum of all and at most maxWindowSamples of them (for percentiles),
// and of the whole run a sample (for the summary): every n-th of the
// expected number, as Kafka's perf test keeps (0: every one). Keeping every
// latency of an interval would grow without bound at millions of records
// a second and make the interval line sort them all, slowing what is
// measured.
type latencies struct {
	mu         sync.Mutex
	count      int64 // records in the run
	adds       int64 // latencies in the run
	bytes      int64
	window     []time.Duration // every winEach-th latency of the interval
	winEach    int64
	winAdds    int64
	winSum     time.Duration
	winMax     time.Duration
	winCount   int64
	winBytes   int64
	winStart   time.Time
	sample     []time.Duration
	sampleEach int64
	sum, max   time.Duration
	start      time.Time
}

func newLatencies(expected int64) *latencies {
	now := time.Now()
	return &latencies{sampleEach: max(1, expected/500_000), winEach: 1, start: now, winStart: now}
}

// maxWindowSamples bounds the latencies an interval keeps: past it, every
// other one kept is dropped and the rate of keeping halves.
const maxWindowSamples = 1 << 16

func (l *latencies) add(records, bytes int64, lat time.Duration) {
	l.mu.Lock()
	l.count += records
	l.bytes += bytes
	l.winCount += records
	l.winBytes += bytes
	if l.winAdds%l.winEach == 0 {
		if len(l.window) == maxWindowSamples {
			for i := range len(l.window) / 2 {
				l.window[i] = l.window[2*i+1]
			}
			l.window = l.window[:len(l.window)/2]
			l.winEach *= 2
		}
		l.window = append(l.window, lat)
	}
	l.winAdds++
	l.winSum += lat
	l.winMax = max(l.winMax, lat)
	if l.adds%l.sampleEach == 0 {
		l.sample = append(l.sample, lat)
	}
	l.adds++
	l.sum += lat
	l.max = max(l.max, lat)
	l.mu.Unlock()
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// line prints the interval's figures and starts the next interval.
func (l *latencies) line(w io.Writer, verb string) {
	l.mu.Lock()
	now := time.Now()
	el := now.Sub(l.winStart).Seconds()
	win := slices.Clone(l.window)
	n, b := l.winCount, l.winBytes
	sum, mx, adds := l.winSum, l.winMax, l.winAdds
	l.window, l.winCount, l.winBytes, l.winStart = l.window[:0], 0, 0, now
	l.winEach, l.winAdds, l.winSum, l.winMax = 1, 0, 0, 0
	l.mu.Unlock()
	slices.Sort(win)
	avg := time.Duration(0)
	if adds > 0 {
		avg = sum / time.Duration(adds)
	}
	fmt.Fprintf(w, "%d records %s, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 99th.\n",
		n, verb, float64(n)/el, float64(b)/1e6/el, msOf(avg), msOf(mx), msOf(percentile(win, 0.5)), msOf(percentile(win, 0.99)))
}

// summary prints the whole run's figures.
func (l *latencies) summary(w io.Writer, verb string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el := time.Since(l.start).Seconds()
	s := slices.Clone(l.sample)
	slices.Sort(s)
	avg := time.Duration(0)
	if l.adds > 0 {
		avg = l.sum / time.Duration(l.adds)
	}
	fmt.Fprintf(w, "%d records %s, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.\n",
		l.count, verb, float64(l.count)/el, float64(l.bytes)/1e6/el, msOf(avg), msOf(l.max),
		msOf(percentile(s, 0.5)), msOf(percentile(s, 0.95)), msOf(percentile(s, 0.99)), msOf(percentile(s, 0.999)))
}

// reporter prints l's interval line every interval until stop is called,
// which waits for it.
func startReporter(w io.Writer, l *latencies, interval time.Duration, verb string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.line(w, verb)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func runPerfProduce(e *env, args []string) (err error) {
	fs := newFlags(e, "perf produce", "--bootstrap-server ADDR|--data-dir DIR --topic T --num-records N --record-size B [flags]", perfHelp)
	var t target
	t.register(fs)
	topic := fs.String("topic", "", "`NAME` of the topic (required)")
	numRecords := fs.Int64("num-records", 0, "`N` records to send (required)")
	recordSize := fs.Int("record-size", 100, "`B` bytes of each record's value")
	throughput := fs.Float64("throughput", -1, "`R`: at most R records/s; -1: as fast as possible")
	interval := fs.Int("reporting-interval", 5000, "`MS` between interval lines")
	var props stringList
	fs.Var(&props, "producer-props", "`KEY=VALUE` producer setting (acks, compression.type, enable.idempotence, linger.ms, batch.size, buffer.memory, request.timeout.ms); repeatable")
	configFile := fs.String("producer.config", "", "`FILE`: Kafka producer properties (Java properties file), as produce's --producer.config; --producer-props win over it")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	for _, p := range pos { // Kafka's --producer-props takes several words
		props = append(props, p)
	}
	if *topic == "" || *numRecords <= 0 {
		return usagef("--topic and a positive --num-records are required")
	}
	if *recordSize < 0 || *interval <= 0 {
		return usagef("--record-size must not be negative and --reporting-interval must be positive")
	}
	// Kafka's producer defaults: idempotent with acks=all (since Kafka
	// 3.0), so up to 5 batches in flight per partition; an acks other
	// than all without enable.idempotence turns idempotence off, as there.
	cfg := log.ProducerConfig{Acks: log.AcksAll, Idempotent: true, Logger: warnLogger(e)}
	idemSet := false
	if *configFile != "" {
		fileProps := clientProps{kind: "producer", file: *configFile}
		fp, err := fileProps.read()
		if err != nil {
			return err
		}
		applyConnection(&t, fp)
		if idemSet, err = applyProducerConfig(&cfg, &fileProps, fp); err != nil {
			return err
		}
		warnUnused(e, "perf", fp, producerPropertyNames)
	}
	for _, kv := range props {
		if strings.HasPrefix(kv, "enable.idempotence=") {
			idemSet = true
		}
		if err := setProducerProp(&cfg, kv); err != nil {
			return usagef("--producer-props %s: %v", kv, err)
		}
	}
	if cfg.Acks != log.AcksAll && !idemSet {
		cfg.Idempotent = false
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	if _, err := c.topicPartitions(*topic); err != nil {
		return err
	}
	prod, err := log.NewProducer(c, cfg)
	if err != nil {
		return err
	}
	value := make([]byte, *recordSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte('A' + rng.IntN(26))
	}
	lat := newLatencies(*numRecords)
	var (
		errMu    sync.Mutex
		firstErr error
		failed   int64
	)
	ctx, stopSignals := interruptible()
	defer stopSignals()
	stop := startReporter(e.stdout, lat, time.Duration(*interval)*time.Millisecond, "sent")
	start := time.Now()
	interrupted := false
	for i := range *numRecords {
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		sent := time.Now()
		prod.SendAsync(log.Record{Topic: *topic, Value: value}, func(r log.Record, err error) {
			if err != nil {
				errMu.Lock()
				failed++
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				return
			}
			lat.add(1, int64(len(r.Value)), time.Since(sent))
		})
		if *throughput > 0 {
			// Pace the sends: record i is due at start + i/R.
			if ahead := time.Duration(float64(i+1)/(*throughput)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	cerr := prod.Close()
	stop()
	lat.summary(e.stdout, "sent")
	if firstErr != nil {
		return fmt.Errorf("%d records failed; the first: %w", failed, firstErr)
	}
	if cerr == nil && interrupted {
		return errInterrupted
	}
	return cerr
}

// setProducerProp applies one of Kafka's producer settings.
func setProducerProp(c *log.ProducerConfig, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("want KEY=VALUE")
	}
	n, nerr := strconv.Atoi(v)
	switch k {
	case "acks":
		a, err := parseAcks(v)
		c.Acks = a
		return err
	case "linger.ms":
		c.Linger = time.Duration(n) * time.Millisecond
		if nerr == nil && n == 0 {
			c.Linger = -1 // Kafka's 0: send at once
		}
	case "batch.size":
		c.BatchBytes = n
	case "buffer.memory":
		c.BufferBytes = n
	case "request.timeout.ms", "delivery.timeout.ms":
		c.Timeout = time.Duration(n) * time.Millisecond
	case "compression.type":
		codec, err := parseCompression(v)
		if err != nil {
			return fmt.Errorf("compression.type %w", err)
		}
		c.Compression = codec
		return nil
	case "enable.idempotence":
		b, err := strconv.ParseBool(v)
		c.Idempotent = b
		return err
	default:
		return fmt.Errorf("unknown producer setting %q (known: acks, compression.type, enable.idempotence, linger.ms, batch.size, buffer.memory, request.timeout.ms)", k)
	}
	if nerr != nil || n < 0 {
		return fmt.Errorf("%s: want a non-negative number", k)
	}
	return nil
}

func runPerfConsume(e *env, args []string) (err error) {
	fs := newFlags(e, "perf consume", "--bootstrap-server ADDR|--data-dir DIR --topic T [--num-records N] [flags]", perfHelp)
	var t target
	t.register(fs)
	topic := fs.String("topic", "", "`NAME` of the topic (required)")
	numRecords := fs.Int64("num-records", 0, "`N` records to read; 0: to the end of the log")
	fs.Int64Var(numRecords, "messages", 0, "`N`: the same as --num-records (Kafka's flag)")
	group := fs.String("group", "", "`GROUP` to consume as: the test reads from the start (the group's committed offsets are not used) and commits the positions it reached at the end, as kafka-consumer-perf-test.sh's consumer does on close")
	interval := fs.Int("reporting-interval", 5000, "`MS` between interval lines")
	fetchBytes := fs.Int("fetch-size", 0, "`B`: the most bytes of one poll (default 50 MiB)")
	configFile := fs.String("consumer.config", "", "`FILE`: Kafka consumer properties (Java properties file), as consume's --consumer.config")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	var ccfg log.ConsumerConfig
	if *configFile != "" {
		fileProps := clientProps{kind: "consumer", file: *configFile}
		fp, err := fileProps.read()
		if err != nil {
			return err
		}
		applyConnection(&t, fp)
		if ccfg, _, err = consumerConfig(&fileProps, fp); err != nil {
			return err
		}
		warnUnused(e, "perf", fp, consumerPropertyNames)
		if *group == "" {
			*group = ccfg.Group
		}
	}
	if *topic == "" || *numRecords < 0 || *interval <= 0 {
		return usagef("--topic is required, --num-records must not be negative, --reporting-interval must be positive")
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	n, err := c.topicPartitions(*topic)
	if err != nil {
		return err
	}
	var available int64
	ends, err := endOffsets(c, *topic, n)
	if err != nil {
		return err
	}
	for i := range n {
		start, err := c.ListOffset(context.Background(), log.TopicPartition{Topic: *topic, Partition: i}, log.EarliestOffset)
		if err != nil {
			return err
		}
		available += ends[i] - start
	}
	want := available
	if *numRecords > 0 {
		if *numRecords > available {
			return fmt.Errorf("--num-records %d: the topic holds %d records", *numRecords, available)
		}
		want = *numRecords
	}
	ccfg.Topics, ccfg.Group, ccfg.Reset, ccfg.ClientID, ccfg.Logger = []string{*topic}, *group, log.ResetEarliest, "strata-perf", warnLogger(e)
	if *fetchBytes != 0 {
		ccfg.MaxBytes = *fetchBytes
	}
	if ccfg.MaxWait == 0 {
		ccfg.MaxWait = 10 * time.Millisecond
	}
	cons, err := log.NewConsumer(c, ccfg)
	if err != nil {
		return err
	}
	defer cons.Close()
	lat := newLatencies(0) // a latency per poll: few enough to keep them all
	stop := startReporter(e.stdout, lat, time.Duration(*interval)*time.Millisecond, "consumed")
	ctx, stopSignals := interruptible()
	defer stopSignals()
	var got int64
	for got < want {
		t0 := time.Now()
		recs, err := cons.Poll(ctx)
		if ctx.Err() != nil {
			stop()
			lat.summary(e.stdout, "consumed")
			return errInterrupted
		}
		if err != nil {
			stop()
			return err
		}
		var n int64
		for i := range recs {
			if got+n == want {
				break
			}
			n++
			lat.addBytes(int64(len(recs[i].Key) + len(recs[i].Value)))
		}
		got += n
		lat.add(n, 0, time.Since(t0))
		if len(recs) == 0 && caughtUp(cons, *topic, ends) {
			break
		}
	}
	stop()
	lat.summary(e.stdout, "consumed")
	if *group != "" {
		// Kafka's perf consumer commits on close (enable.auto.commit):
		// the group then shows in `groups describe`, with its lag.
		if err := cons.Commit(ctx); err != nil {
			return fmt.Errorf("commit the positions of group %q: %w", *group, err)
		}
	}
	return nil
}

// addBytes counts bytes without a latency sample.
func (l *latencies) addBytes(n int64) {
	l.mu.Lock()
	l.bytes += n
	l.winBytes += n
	l.mu.Unlock()
}
