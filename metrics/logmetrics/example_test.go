package logmetrics_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/metrics/logmetrics"
)

// Serve a broker over the Kafka protocol with its traffic counted, and read
// the figures as /metrics would serve them (logmetrics.Handler).
func ExampleNewBackend() {
	dir, _ := os.MkdirTemp("", "strata-metrics-example")
	defer os.RemoveAll(dir)
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic("orders", log.TopicConfig{}); err != nil {
		panic(err)
	}
	rec := metrics.NewRecorder()
	srv, err := kafka.Listen("127.0.0.1:0", logmetrics.NewBackend(b, rec), kafka.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx := context.Background()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{srv.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	p, _ := log.NewProducer(c, log.ProducerConfig{})
	for _, v := range []string{"one", "two", "three"} {
		if _, err := p.Send(ctx, log.Record{Topic: "orders", Value: []byte(v)}); err != nil {
			panic(err)
		}
	}
	p.Close()

	logmetrics.Collect(b, rec) // what Handler does at every scrape
	var sb strings.Builder
	rec.Snapshot().WritePrometheus(&sb)
	for _, line := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(line, "kafka_log_log_logendoffset") || strings.HasPrefix(line, "kafka_server_brokertopicmetrics_messagesin") ||
			strings.HasPrefix(line, "kafka_network_requestmetrics_requests_total") {
			fmt.Println(line)
		}
	}
	// Output:
	// kafka_log_log_logendoffset{topic="orders",partition="0"} 3
	// kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 3
	// kafka_network_requestmetrics_requests_total{request="Produce"} 3
}

// The library pushes its figures to the Recorder it is given: the broker
// its flushes, purgatory and cleaner passes, the server every request and
// the traffic. Handler (or Collect) adds the polled gauges.
func Example_hooks() {
	dir, _ := os.MkdirTemp("", "strata-metrics-example")
	defer os.RemoveAll(dir)
	rec := metrics.NewRecorder()
	b, err := log.Open(dir, log.Config{Metrics: rec})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic("orders", log.TopicConfig{FlushMessages: 1}); err != nil {
		panic(err)
	}
	srv, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{Metrics: rec})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx := context.Background()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{srv.Addr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	p, _ := log.NewProducer(c, log.ProducerConfig{})
	for _, v := range []string{"one", "two", "three"} {
		if _, err := p.Send(ctx, log.Record{Topic: "orders", Value: []byte(v)}); err != nil {
			panic(err)
		}
	}
	p.Close()

	logmetrics.Collect(b, rec)
	var sb strings.Builder
	rec.Snapshot().WritePrometheus(&sb)
	for _, line := range strings.Split(sb.String(), "\n") {
		if strings.HasPrefix(line, "kafka_log_log_logendoffset") || strings.HasPrefix(line, "kafka_server_brokertopicmetrics_messagesin") ||
			strings.HasPrefix(line, "kafka_log_logflushstats_logflush_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// kafka_log_log_logendoffset{topic="orders",partition="0"} 3
	// kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 3
	// kafka_log_logflushstats_logflush_seconds_count 3
}
