package logmetrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/metrics"
)

func partition(t *testing.T, s metrics.Snapshot, topic string, i int) metrics.PartitionStats {
	t.Helper()
	for _, p := range s.Partitions {
		if p.Topic == topic && p.Partition == i {
			return p
		}
	}
	t.Fatalf("no partition %s-%d in %+v", topic, i, s.Partitions)
	return metrics.PartitionStats{}
}

func topicStats(s metrics.Snapshot, topic string) metrics.TopicStats {
	for _, ts := range s.Topics {
		if ts.Topic == topic {
			return ts
		}
	}
	return metrics.TopicStats{}
}

// A scripted workload through a Kafka listener: appends raise LEO, HW,
// size and bytes in; a fetch raises bytes out; a group's commit shows its
// lag, which falls as it commits further.
func TestWorkloadMovesMetrics(t *testing.T) {
	ctx := context.Background()
	b := logtest.New(t, logtest.Topic("orders", 2))
	rec := metrics.NewRecorder()
	srv, err := kafka.Listen("127.0.0.1:0", NewBackend(b, rec), kafka.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	Collect(b, rec)
	s0 := rec.Snapshot()
	if p := partition(t, s0, "orders", 0); p.EndOffset != 0 || p.Size != 0 {
		t.Fatalf("before any append: %+v", p)
	}

	prod, err := log.NewProducer(c, log.ProducerConfig{Partitioner: log.PartitionerManual})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := prod.Send(ctx, log.Record{Topic: "orders", Partition: 0, Value: []byte(strings.Repeat("x", 100+i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	Collect(b, rec)
	s1 := rec.Snapshot()
	p0 := partition(t, s1, "orders", 0)
	if p0.EndOffset != 10 || p0.HighWatermark != 10 || p0.Size <= 1000 || p0.Segments != 1 {
		t.Errorf("after 10 appends: %+v", p0)
	}
	if p1 := partition(t, s1, "orders", 1); p1.EndOffset != 0 {
		t.Errorf("partition 1 moved: %+v", p1)
	}
	ts := topicStats(s1, "orders")
	if ts.MessagesIn != 10 || ts.BytesIn != p0.Size {
		t.Errorf("traffic %+v; want 10 messages in and bytes in = the log size %d", ts, p0.Size)
	}
	if len(s1.Requests) == 0 || s1.Requests[0].Name != "Produce" || s1.Requests[0].Requests != 10 {
		t.Errorf("requests: %+v", s1.Requests)
	}

	cons, err := log.NewConsumer(c, log.ConsumerConfig{Topics: []string{"orders"}, Reset: log.ResetEarliest, MaxWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 10 {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	cons.Close()
	if out := topicStats(rec.Snapshot(), "orders").BytesOut; out < p0.Size {
		t.Errorf("bytes out %d after reading the whole partition of %d bytes", out, p0.Size)
	}

	// A group (in process: groups over the wire are another matter)
	// commits offset 4 of partition 0 (lag 6) and 0 of the empty partition 1.
	commit := func(off int64) {
		t.Helper()
		gc, err := log.NewConsumer(b, log.ConsumerConfig{Group: "billing", Topics: []string{"orders"}, Reset: log.ResetEarliest, MaxWait: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		for len(gc.Assignment()) == 0 {
			if _, err := gc.Poll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := gc.Seek("orders", 0, off); err != nil {
			t.Fatal(err)
		}
		if err := gc.Seek("orders", 1, 0); err != nil {
			t.Fatal(err)
		}
		if err := gc.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	commit(4)
	Collect(b, rec)
	lags := rec.Snapshot().GroupLags
	if len(lags) != 2 || lags[0] != (metrics.GroupLag{Group: "billing", Topic: "orders", Partition: 0, Committed: 4, EndOffset: 10, Lag: 6}) ||
		lags[1] != (metrics.GroupLag{Group: "billing", Topic: "orders", Partition: 1}) {
		t.Errorf("lags %+v", lags)
	}

	// The handler serves the same figures in the text format.
	hs := httptest.NewServer(Handler(b, rec))
	defer hs.Close()
	resp, err := hs.Client().Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`kafka_log_log_logendoffset{topic="orders",partition="0"} 10`,
		`kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 10`,
		`kafka_consumergroup_lag{group="billing",topic="orders",partition="0"} 6`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// TestBackendPassesBuiltProducer: a Backend has its broker's
// log.BuiltProducer as its own, so a log.Producer on it takes the broker's
// trusted path, and its records are stored.
func TestBackendPassesBuiltProducer(t *testing.T) {
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	be := NewBackend(b, metrics.NewRecorder())
	var c log.Client = be
	bp, ok := c.(log.BuiltProducer)
	if !ok || bp.BuiltProducerOf() != c {
		t.Fatalf("Backend does not pass log.BuiltProducer through: %v", ok)
	}
	pr, err := log.NewProducer(be, log.ProducerConfig{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := pr.Send(context.Background(), log.Record{Topic: "t", Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pr.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.EndOffset(); got != 5 {
		t.Fatalf("end offset %d, want 5", got)
	}
}
