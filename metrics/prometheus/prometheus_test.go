package prometheus

import (
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-log/strata/metrics"
)

func find(t *testing.T, fams []*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// The figures of a Recorder reach a Prometheus registry under Kafka's
// names, and move as the workload does.
func TestCollector(t *testing.T) {
	rec := metrics.NewRecorder()
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(ForRecorder(rec))

	rec.SetPartitions([]metrics.PartitionStats{{Topic: "orders", Partition: 0, EndOffset: 3, HighWatermark: 3, Size: 210, Segments: 1, Replicas: 1, InSyncReplicas: 1}})
	rec.Produced("orders", 3, 210)
	rec.Request(0, 2*time.Millisecond, false)
	rec.Request(0, 40*time.Millisecond, false)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	leo := find(t, fams, "kafka_log_log_logendoffset")
	if leo.GetType() != dto.MetricType_GAUGE || len(leo.Metric) != 1 || leo.Metric[0].GetGauge().GetValue() != 3 ||
		label(leo.Metric[0], "topic") != "orders" || label(leo.Metric[0], "partition") != "0" {
		t.Errorf("LEO: %v", leo)
	}
	in := find(t, fams, "kafka_server_brokertopicmetrics_bytesin_total")
	if in.GetType() != dto.MetricType_COUNTER || in.Metric[0].GetCounter().GetValue() != 210 {
		t.Errorf("bytes in: %v", in)
	}
	h := find(t, fams, "kafka_network_requestmetrics_totaltime_seconds").Metric[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() < 0.041 || h.GetSampleSum() > 0.043 {
		t.Errorf("latency: count %d sum %g", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 0.05:
			want = 2
		case b.GetUpperBound() >= 0.0025:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}

	// More appends: LEO and bytes in rise.
	rec.SetPartitions([]metrics.PartitionStats{{Topic: "orders", Partition: 0, EndOffset: 8, HighWatermark: 8, Size: 560, Segments: 1, Replicas: 1, InSyncReplicas: 1}})
	rec.Produced("orders", 5, 350)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kafka_log_log_logendoffset The log end offset (LEO) of a partition: the offset of its next record.
# TYPE kafka_log_log_logendoffset gauge
kafka_log_log_logendoffset{partition="0",topic="orders"} 8
# HELP kafka_server_brokertopicmetrics_bytesin_total Record batch bytes appended to a topic.
# TYPE kafka_server_brokertopicmetrics_bytesin_total counter
kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 560
# HELP kafka_server_brokertopicmetrics_messagesin_total Records appended to a topic.
# TYPE kafka_server_brokertopicmetrics_messagesin_total counter
kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 8
`), "kafka_log_log_logendoffset", "kafka_server_brokertopicmetrics_bytesin_total", "kafka_server_brokertopicmetrics_messagesin_total"); err != nil {
		t.Error(err)
	}
}

// The registry's text output and strata serve's own (WritePrometheus)
// name the same families.
func TestSameFamiliesAsTextExposition(t *testing.T) {
	rec := metrics.NewRecorder()
	rec.SetPartitions([]metrics.PartitionStats{{Topic: "a", Partition: 0, Replicas: 1, InSyncReplicas: 1}})
	rec.SetGroupLags([]metrics.GroupLag{{Group: "g", Topic: "a", Partition: 0, Committed: 1, EndOffset: 2, Lag: 1}})
	rec.Produced("a", 1, 10)
	rec.Fetched("a", 10, false)
	rec.Request(1, time.Millisecond, true)
	rec.Fsync(time.Millisecond)
	rec.Purgatory("Fetch", 2)
	reg := prom.NewPedanticRegistry()
	reg.MustRegister(ForRecorder(rec))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := rec.Snapshot().WritePrometheus(&text); err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if !strings.Contains(text.String(), "# TYPE "+f.GetName()+" ") {
			t.Errorf("%s is registered but not in the text exposition", f.GetName())
		}
	}
	if n := strings.Count(text.String(), "# TYPE "); n != len(fams) {
		t.Errorf("text exposition has %d families, the registry %d", n, len(fams))
	}
}
