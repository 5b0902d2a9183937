package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// server is a strata serve process.
type server struct {
	cmd     *exec.Cmd
	addr    string      // the Kafka listener
	metrics string      // the metrics listener, if asked for
	logs    chan string // all of stderr, once it closes
}

// startServe starts strata serve on dir and waits for it to print the
// addresses it bound.
func startServe(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	cmd, _, stdout, stderr := start(t, append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0"}, args...)...)
	s := &server{cmd: cmd, logs: make(chan string, 1)}
	go func() { // drained all along, so that logging never blocks serve
		b, _ := io.ReadAll(stderr)
		s.logs <- string(b)
	}()
	out := readUntil(t, stdout, "listening on ")
	s.addr = lineValue(out, "listening on ")
	if slices.Contains(args, "--metrics-addr") {
		// A standalone broker prints it before "listening on" (every port
		// bound first), a cluster member after.
		if !strings.Contains(out, "metrics on ") {
			out = readUntil(t, stdout, "metrics on ")
		}
		s.metrics = lineValue(out, "metrics on ")
	}
	go io.Copy(io.Discard, stdout) // nothing more is expected; never block the server
	return s
}

// lineValue returns the rest of the line of out that holds prefix.
func lineValue(out, prefix string) string {
	rest := out[strings.LastIndex(out, prefix)+len(prefix):]
	line, _, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(line)
}

// stop sends SIGTERM and checks that serve exits 0 having logged its
// shutdown.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	logs := <-s.logs
	if code := exitCodeOf(s.cmd.Wait()); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM; stderr:\n%s", code, logs)
	}
	if !strings.Contains(logs, "shutting down") {
		t.Errorf("serve did not log its shutdown:\n%s", logs)
	}
}

func dial(t *testing.T, addr string) *kafka.Client {
	t.Helper()
	c, err := kafka.Dial(context.Background(), kafka.DialConfig{Seeds: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAll reads n records of topic from the start through c.
func readAll(t *testing.T, c log.Client, topic string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := log.NewConsumer(c, log.ConsumerConfig{Topics: []string{topic}, Reset: log.ResetEarliest, MaxWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < n {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d records: %v", len(got), n, err)
		}
		for _, r := range recs {
			got = append(got, fmt.Sprintf("%d/%d:%s=%s", r.Partition, r.Offset, r.Key, r.Value))
		}
	}
	return got
}

// serve as a process: a Kafka client produces to a topic and reads the
// records back; SIGTERM stops it cleanly; served again, the records are
// still there, and appending continues after them.
func TestServeRestart(t *testing.T) {
	dir := newTopic(t, "events", 2)
	s := startServe(t, dir, "--log-format", "json")
	c := dial(t, s.addr)
	ctx := context.Background()
	prod, err := log.NewProducer(c, log.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := prod.Send(ctx, log.Record{Topic: "events", Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "v%d", i)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, c, "events", 20)
	c.Close()
	s.stop(t)

	// The data dir was closed cleanly: verify finds nothing wrong.
	ok(t, "", "", "verify", dir)

	s = startServe(t, dir)
	c = dial(t, s.addr)
	after := readAll(t, c, "events", 20)
	if strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("after restart:\n%v\nbefore:\n%v", after, before)
	}
	tp := log.TopicPartition{Topic: "events", Partition: 0}
	end, err := c.ListOffset(context.Background(), tp, log.LatestOffset)
	if err != nil {
		t.Fatal(err)
	}
	prod, err = log.NewProducer(c, log.ProducerConfig{Partitioner: log.PartitionerManual})
	if err != nil {
		t.Fatal(err)
	}
	r, err := prod.Send(ctx, log.Record{Topic: "events", Partition: 0, Value: []byte("after restart")})
	if err != nil {
		t.Fatal(err)
	}
	prod.Close()
	if r.Offset != end {
		t.Errorf("first record after restart at offset %d, want the old end offset %d", r.Offset, end)
	}
	s.stop(t)
}

// /metrics on --metrics-addr: appends through the listener raise the log
// end offset, bytes in, the Produce requests' counts and bytes, and (with
// a flush on every append) the flush count.
func TestServeMetrics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ok(t, "", "", "topics", "--data-dir", dir, "create", "--topic", "m", "--partitions", "1", "--config", "flush.messages=1")
	s := startServe(t, dir, "--metrics-addr", "127.0.0.1:0")
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + s.metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
			t.Fatalf("GET /metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := scrape(); !strings.Contains(m, `kafka_log_log_logendoffset{topic="m",partition="0"} 0`) || strings.Contains(m, "bytesin_total") || strings.Contains(m, "logflush") {
		t.Fatalf("before appends:\n%s", m)
	}
	c := dial(t, s.addr)
	prod, _ := log.NewProducer(c, log.ProducerConfig{})
	for i := range 5 {
		if _, err := prod.Send(context.Background(), log.Record{Topic: "m", Value: fmt.Appendf(nil, "value %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()
	wants := []string{
		`kafka_log_log_logendoffset{topic="m",partition="0"} 5`,
		`kafka_log_log_highwatermark{topic="m",partition="0"} 5`,
		`kafka_server_brokertopicmetrics_messagesin_total{topic="m"} 5`,
		`kafka_network_requestmetrics_totaltime_seconds_count{request="Produce"} 5`,
		`kafka_network_requestmetrics_errors_total{request="Produce"} 0`,
		`kafka_log_logflushstats_logflush_seconds_count 5`,
	}
	// The server reports a request once its response is written, so the
	// last one may be reported just after the client has its answer: from
	// outside the process, scrape until it is (or 5 s have passed).
	var m string
	for deadline := time.Now().Add(5 * time.Second); ; {
		m = scrape()
		missing := slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(m, w) })
		if !missing || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(m, want) {
			t.Errorf("after 5 appends /metrics lacks %q:\n%s", want, m)
		}
	}
	for _, want := range []string{
		`kafka_server_brokertopicmetrics_bytesin_total{topic="m"} `,
		`kafka_network_requestmetrics_requestbytes_total{request="Produce"} `,
		`kafka_network_requestmetrics_responsebytes_total{request="Produce"} `,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("no %q:\n%s", want, m)
		}
	}
	s.stop(t)
}

func TestServeBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve"}, exitUsage, "--data-dir is required"},
		{[]string{"serve", "--data-dir", dir, "--log-format", "xml"}, exitUsage, `--log-format "xml"`},
		{[]string{"serve", "--data-dir", dir, "--log-level", "loud"}, exitUsage, `--log-level "loud"`},
		{[]string{"serve", "--data-dir", dir, "--override", "log.segment.bytes=lots"}, exitUsage, "segment.bytes"},
		{[]string{"serve", "--data-dir", dir, "--override", "no.such.setting=1"}, exitUsage, `unknown setting "no.such.setting"`},
		{[]string{"serve", "--data-dir", dir, "--listen", "256.0.0.1:1"}, exitProblem, "listen"},
		{[]string{"serve", "--data-dir", dir, "extra"}, exitUsage, "unexpected arguments"},
	} {
		r := strata(t, "", "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	// A data dir in use by a running serve.
	s := startServe(t, dir)
	r := strata(t, "", "", "serve", "--data-dir", dir, "--listen", "127.0.0.1:0")
	if r.code != exitProblem || !strings.Contains(r.stderr, "in use") {
		t.Errorf("second serve on the same dir: exit %d, stderr %q", r.code, r.stderr)
	}
	s.stop(t)
}

// --auto-create-topics: a client's Metadata that allows auto-creation
// creates the topic, with --num-partitions partitions.
func TestServeAutoCreateTopics(t *testing.T) {
	s := startServe(t, t.TempDir(), "--auto-create-topics", "--num-partitions", "3")
	a, err := dialAdmin(&target{bootstrap: s.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	if _, err := a.do(req, 7); err != nil {
		t.Fatal(err)
	}
	out := ok(t, "", "", "topics", "--bootstrap-server", s.addr, "describe", "--topic", "auto")
	if !strings.HasPrefix(out, "Topic: auto\tPartitionCount: 3\t") {
		t.Errorf("auto-created topic:\n%s", out)
	}
	s.stop(t)
}
