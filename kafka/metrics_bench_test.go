package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/metrics"
)

// The cost of Config.Metrics on the server's produce and fetch paths: the
// same work with the hooks nil and set to a metrics.Recorder (the server's
// and the broker's), as sub-benchmarks, so that -count N interleaves them:
//
//	go test -c -o /tmp/kafka.test ./kafka/
//	for i in 1 2 3 4 5 6; do /tmp/kafka.test -test.run '^$' -test.bench BenchmarkMetrics; done
//
// (-count 6 would run each sub-benchmark six times in a row, not
// interleaved). cpu-ns/op is the process's CPU time (every goroutine:
// client, server and broker) per op, which other load on the machine
// changes much less than the wall clock.

var metricsHooks = []struct {
	name  string
	hooks func() metrics.Hooks
}{
	{"hooks=nil", func() metrics.Hooks { return nil }},
	{"hooks=recorder", func() metrics.Hooks { return metrics.NewRecorder() }},
}

// metricsServer serves a broker with topic "t" and the hooks h, in memory
// or on the real disk (where fetches go out with sendfile).
func metricsServer(b *testing.B, h metrics.Hooks, onDisk bool) (*Server, *log.Broker) {
	opts := []logtest.Option{logtest.WithConfig(log.Config{Metrics: h}),
		logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1, SegmentBytes: 1 << 30, MaxIndexBytes: 1 << 20})}
	if !onDisk {
		opts = append(opts, logtest.InMemory())
	}
	br := logtest.New(b, opts...)
	s, err := Listen("127.0.0.1:0", br, Config{Metrics: h})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, br
}

// BenchmarkMetricsProduce is BenchmarkProduce (100 records of 100 B a
// request, acks=1, 16 in flight on one connection) with and without hooks.
func BenchmarkMetricsProduce(b *testing.B) {
	vals := make([]string, 100)
	for i := range vals {
		vals[i] = string(make([]byte, 100))
	}
	recs := records(vals...)
	for _, mh := range metricsHooks {
		b.Run(mh.name, func(b *testing.B) {
			s, _ := metricsServer(b, mh.hooks(), false)
			c := dial(b, s.Addr())
			frame := c.f.AppendRequest(nil, produceReq(9, 1, "t", 0, recs), 0)
			b.SetBytes(int64(len(recs)))
			b.ReportAllocs()
			c0 := cpuTime()
			const window = 16
			inFlight := 0
			for b.Loop() {
				c.write(frame)
				if inFlight++; inFlight == window {
					if _, err := c.frame(); err != nil {
						b.Fatal(err)
					}
					inFlight--
				}
			}
			for ; inFlight > 0; inFlight-- {
				if _, err := c.frame(); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, c0)
		})
	}
}

// BenchmarkMetricsFetch is BenchmarkFetch (1 MiB a request from a seeded
// partition) with and without hooks, on the real disk: the records go out
// with sendfile, as a served broker's do. The "batch=1" variants fetch one
// batch of one 100 B record a request, where the per-request work (and so
// the hooks' share) is largest.
func BenchmarkMetricsFetch(b *testing.B) {
	for _, size := range []struct {
		name         string
		batches, per int // seeded batches and records per batch
		value        int
		maxBytes     int32
	}{
		{"1MiB", 64, 100, 1000, 1 << 20},
		{"batch=1", 1000, 1, 100, 1},
	} {
		for _, mh := range metricsHooks {
			b.Run(size.name+"/"+mh.name, func(b *testing.B) {
				s, br := metricsServer(b, mh.hooks(), true)
				p, _ := br.Partition("t", 0)
				val := make([]byte, size.value)
				for range size.batches {
					recs := make([]log.Record, size.per)
					for i := range recs {
						recs[i].Value = val
					}
					if _, err := p.Append(recs...); err != nil {
						b.Fatal(err)
					}
				}
				c := dial(b, s.Addr())
				req := fetchReq(12, "t", 0, 0, 0)
				req.MinBytes, req.MaxBytes, req.Topics[0].Partitions[0].PartitionMaxBytes = 0, size.maxBytes, size.maxBytes
				resp := c.do(req).(*kmsg.FetchResponse)
				n := len(resp.Topics[0].Partitions[0].RecordBatches)
				if n < int(min(size.maxBytes, 1<<19)) {
					b.Fatalf("fetched %d bytes", n)
				}
				frame := c.f.AppendRequest(nil, req, 0)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				c0 := cpuTime()
				for b.Loop() {
					c.write(frame)
					if _, err := c.frame(); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, c0)
			})
		}
	}
}

// reportCPU reports the process's CPU time per op since c0.
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkMetricsHookPath is the work the hooks add to one request, alone:
// the clock read when the frame is read, the failure check of the
// response, the traffic (Produced or Fetched), the response's size and the
// report once written. Its ns/op over a request's cost in
// BenchmarkMetricsProduce and BenchmarkMetricsFetch bounds the hooks'
// share of them below the noise of those end-to-end figures.
func BenchmarkMetricsHookPath(b *testing.B) {
	rec := metrics.NewRecorder()
	s := &Server{cfg: Config{Metrics: rec}}
	c := &conn{s: s}
	recs := records(make([]string, 100)...)
	preq := produceReq(9, 1, "t", 0, recs)
	presp := preq.ResponseKind().(*kmsg.ProduceResponse)
	presp.Topics = []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{}}}}
	fresp := kmsg.NewPtrFetchResponse()
	fresp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{}}}}
	topic := string([]byte("t")) // as decoded from a request
	for _, tc := range []struct {
		name string
		key  int16
		resp kmsg.Response
		work func()
	}{
		{"produce", produceKey, presp, func() { s.cfg.Metrics.Produced(topic, batchRecords(recs), int64(len(recs))) }},
		{"fetch", fetchKey, fresp, func() { s.cfg.Metrics.Fetched(topic, 1<<20, false) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := &pending{h: header{key: tc.key}, out: make([][]byte, 3)}
			b.ReportAllocs()
			for b.Loop() {
				c.frameAt, c.frameLen = time.Now(), 100
				p.obs.start, p.obs.reqBytes = c.frameAt, c.frameLen
				tc.work()
				p.obs.failed = responseFailed(tc.resp)
				c.report(p, responseBytes(p))
			}
		})
	}
}
