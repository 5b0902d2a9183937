package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kgo"
)

// serverVariants: Kafka clients against Strata's Kafka-protocol server
// (kafka.Listen over a log.Broker on a temporary data dir) and against
// kfake as its users run it (in memory, its default) and with DataDir:
// kgo producing n records of 100 B, kgo consuming 100 k of them, and
// `strata perf produce` (the command, built once) against the same server
// as kgo, so that its figure can be read next to kgo's. Client and server
// share the process, with an application's live heap (heap.go).
func serverVariants(e *env) []variant {
	const size = serverRecordSize
	n := serverRecords(e)
	var strataBin string
	var binDir string
	return []variant{
		{
			label: "kgo produce " + sizeName(size) + " to a Kafka server (" + kgoProduceDefaults + ")", cpuNote: "record (client + server)",
			limit: limitKgoProduce, liveHeap: true,
			systems: []system{
				{name: "strata server + kgo", baseline: true, durability: strataServerDurability,
					run: func(e *env) (sample, error) { return kgoProduceServer(e, strataServer, size, n) }},
				{name: "kfake + kgo", durability: kfakeMemDurability,
					run: func(e *env) (sample, error) { return kgoProduceServer(e, kfakeMemServer, size, n) }},
				{name: "kfake DataDir + kgo", durability: kfakeDurability,
					run: func(e *env) (sample, error) { return kgoProduceServer(e, kfakeServer, size, n) }},
				{name: "strata server + kgo, no compression", durability: strataServerDurability,
					run: func(e *env) (sample, error) {
						return kgoProduceServer(e, strataServer, size, n, kgo.ProducerBatchCompression(kgo.NoCompression()))
					}},
				{name: "strata server + strata perf produce", durability: strataServerDurability,
					run: func(e *env) (sample, error) { return perfProduceServer(e, strataBin, size, n) }},
				// The tool with kgo's default codec: like for like with the first row.
				{name: "strata server + strata perf produce, snappy", durability: strataServerDurability,
					run: func(e *env) (sample, error) {
						return perfProduceServer(e, strataBin, size, n, "--producer-props", "compression.type=snappy")
					}},
			},
			setup: func(e *env) error {
				if !e.wants("strata server + strata perf produce") && !e.wants("strata server + strata perf produce, snappy") {
					return nil
				}
				var err error
				if binDir, err = e.tempDir("strata-bin-"); err != nil {
					return err
				}
				strataBin = filepath.Join(binDir, "strata")
				// Built in the root module, whose go.sum has the command's
				// dependencies (Raft for cluster members), not this one.
				build := exec.Command("go", "build", "-o", strataBin, "./cmd/strata")
				build.Dir = ".."
				out, err := build.CombinedOutput()
				if err != nil {
					return fmt.Errorf("build cmd/strata: %v\n%s", err, out)
				}
				return nil
			},
			teardown: func() {
				if binDir != "" {
					os.RemoveAll(binDir)
				}
			},
		},
		{
			label:   fmt.Sprintf("kgo consume %s × %s from a Kafka server (%s)", si(float64(serverConsumeRecords(e))), sizeName(size), kgoConsumeDefaults),
			cpuNote: "record (client + server)",
			limit:   limitKgoConsume, liveHeap: true,
			systems: []system{
				{name: "strata server + kgo", baseline: true, durability: strataServerDurability,
					run: func(e *env) (sample, error) {
						return kgoConsumeServer(e, strataServer, size, serverConsumeRecords(e))
					}},
				{name: "kfake + kgo", durability: kfakeMemDurability,
					run: func(e *env) (sample, error) {
						return kgoConsumeServer(e, kfakeMemServer, size, serverConsumeRecords(e))
					}},
				{name: "kfake DataDir + kgo", durability: kfakeDurability,
					run: func(e *env) (sample, error) {
						return kgoConsumeServer(e, kfakeServer, size, serverConsumeRecords(e))
					}},
			},
		},
	}
}

// What the server cases' kgo clients run with: kgo's own defaults, none
// changed.
const (
	kgoProduceDefaults = "kgo defaults: linger 10 ms, snappy, acks=all, idempotent"
	kgoConsumeDefaults = "kgo defaults: fetch max 50 MiB, 1 MiB per partition, max wait 5 s"
)

const (
	strataServerDurability = "page cache (FlushMessages 0)"
	kfakeMemDurability     = "– (in memory: kfake's default, no DataDir)"
)

// serverRecordSize is the value size of the server cases and their limits.
const serverRecordSize = 100

// serverRecords is how many records the server's produce case and its
// limit send.
func serverRecords(e *env) int { return e.pick(1_000_000, 200_000, 500) }

// serverConsumeRecords is how many records the server's consume case and
// its limit read.
func serverConsumeRecords(e *env) int { return e.pick(100_000, 100_000, 500) }

// kafkaServer is a running Kafka-protocol server with topic "bench" of one
// partition.
type kafkaServer struct {
	addr  string
	close func()
}

// strataServer serves a log.Broker on a fresh data dir.
func strataServer(e *env) (*kafkaServer, error) {
	dir, err := e.tempDir("strata-server-")
	if err != nil {
		return nil, err
	}
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if _, err := b.CreateTopic("bench", log.TopicConfig{Partitions: 1}); err != nil {
		b.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	srv, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{})
	if err != nil {
		b.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &kafkaServer{addr: srv.Addr(), close: func() {
		srv.Close()
		b.Close()
		os.RemoveAll(dir)
	}}, nil
}

// kfakeMemServer is a one-broker kfake cluster as its users start it: in
// memory (no DataDir).
func kfakeMemServer(*env) (*kafkaServer, error) {
	c, err := startKfake("", "bench", false)
	if err != nil {
		return nil, err
	}
	return &kafkaServer{addr: c.ListenAddrs()[0], close: c.Close}, nil
}

// kafkatestServer is Strata's Kafka test fixture (kafkatest.New: a broker
// on the in-memory FS behind kafka.Listen on 127.0.0.1:0), started outside
// a test; close runs its cleanups.
func kafkatestServer(*env) (*kafkaServer, error) {
	tb := &fixtureTB{}
	var addr string
	if err := tb.start(func() { addr = kafkatest.New(tb, kafkatest.Topic("bench", 1)).Addr() }); err != nil {
		return nil, err
	}
	return &kafkaServer{addr: addr, close: tb.cleanup}, nil
}

// kfakeServer is a one-broker kfake cluster persisting to a fresh dir.
func kfakeServer(e *env) (*kafkaServer, error) {
	dir, err := e.tempDir("kfake-server-")
	if err != nil {
		return nil, err
	}
	c, err := startKfake(dir, "bench", false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &kafkaServer{addr: c.ListenAddrs()[0], close: func() {
		c.Close()
		os.RemoveAll(dir)
	}}, nil
}

// kgoProduce sends n records of size bytes with kgo's async Produce and
// flushes; opts come after the defaults.
func kgoProduce(ctx context.Context, addr string, size, n int, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench")}, opts...)...)
	if err != nil {
		return fmt.Errorf("kgo: %w", err)
	}
	defer cl.Close()
	value := payload(size)
	var failed atomic.Int64
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("kgo: flush: %w", err)
	}
	if k := failed.Load(); k > 0 {
		return fmt.Errorf("kgo: %d records failed", k)
	}
	return nil
}

func kgoProduceServer(e *env, start func(*env) (*kafkaServer, error), size, n int, opts ...kgo.Opt) (sample, error) {
	s, err := start(e)
	if err != nil {
		return sample{}, err
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	sw := startStopwatch()
	if err := kgoProduce(ctx, s.addr, size, n, opts...); err != nil {
		return sample{}, err
	}
	return sw.sample(int64(n), size), nil
}

// kgoConsumeServer fills the server with n records (not timed), then times
// consumeReads fresh kgo consumers, one after the other, each reading them
// all from the start (one read of 100 k records lasts a few tens of
// milliseconds: too short alone to time on a shared machine).
func kgoConsumeServer(e *env, start func(*env) (*kafkaServer, error), size, n int) (sample, error) {
	s, err := start(e)
	if err != nil {
		return sample{}, err
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	if err := kgoProduce(ctx, s.addr, size, n); err != nil {
		return sample{}, err
	}
	reads := consumeReads(e)
	sw := startStopwatch()
	for range reads {
		cons, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return sample{}, fmt.Errorf("kgo: %w", err)
		}
		err = kgoConsume(ctx, cons, n)
		cons.Close()
		if err != nil {
			return sample{}, err
		}
	}
	return sw.sample(int64(reads*n), size), nil
}

// consumeReads is how many consumers read the records in one run of the
// consume case.
func consumeReads(e *env) int { return e.pick(10, 5, 1) }

// perfSummary is the summary line of strata perf produce.
var perfSummary = regexp.MustCompile(`^(\d+) records sent, ([0-9.]+) records/sec`)

// perfProduceServer runs `strata perf produce` (defaults: acks=1) against
// a Strata server and reads its summary. CPU is not measured: the command
// is another process.
func perfProduceServer(e *env, bin string, size, n int, extra ...string) (sample, error) {
	if bin == "" {
		return sample{}, fmt.Errorf("strata perf: the command was not built")
	}
	s, err := strataServer(e)
	if err != nil {
		return sample{}, err
	}
	defer s.close()
	args := append([]string{"perf", "produce", "--bootstrap-server", s.addr, "--topic", "bench",
		"--num-records", strconv.Itoa(n), "--record-size", strconv.Itoa(size), "--reporting-interval", "600000"}, extra...)
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return sample{}, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	var records int64
	var rate float64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := perfSummary.FindStringSubmatch(sc.Text()); m != nil {
			records, _ = strconv.ParseInt(m[1], 10, 64)
			rate, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if err := cmd.Wait(); err != nil {
		return sample{}, fmt.Errorf("strata perf produce: %w", err)
	}
	if records != int64(n) || rate <= 0 {
		return sample{}, fmt.Errorf("strata perf produce: summary says %d records at %.0f/s, want %d", records, rate, n)
	}
	el := time.Duration(float64(records) / rate * float64(time.Second))
	return sample{Records: records, Bytes: records * int64(size), Elapsed: el}, nil
}
