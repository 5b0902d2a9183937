package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecorderCounts(t *testing.T) {
	r := NewRecorder()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				r.Produced("orders", 10, 1000)
				r.Fetched("orders", 500, false)
				r.Request(0, 3*time.Millisecond, false)
			}
		})
	}
	wg.Wait()
	r.Fetched("orders", 7, true)
	r.Request(1, 2*time.Second, true)
	r.Fsync(200 * time.Microsecond)
	r.Purgatory("Fetch", 3)
	r.ISRChanged("orders", 0, 1, true)
	s := r.Snapshot()
	if len(s.Topics) != 1 || s.Topics[0] != (TopicStats{"orders", 4000, 400000, 200000, 7}) {
		t.Errorf("topics: %+v", s.Topics)
	}
	if len(s.Requests) != 2 || s.Requests[0].Name != "Produce" || s.Requests[0].Requests != 400 || s.Requests[0].Latency.Count != 400 {
		t.Fatalf("requests: %+v", s.Requests)
	}
	// 3 ms is in (2.5 ms, 5 ms]: bucket 5.
	if got := s.Requests[0].Latency.Counts[5]; got != 400 {
		t.Errorf("3 ms requests in the 5 ms bucket: %d, want 400 (%v)", got, s.Requests[0].Latency.Counts)
	}
	if s.Requests[1].Name != "Fetch" || s.Requests[1].Errors != 1 {
		t.Errorf("fetch: %+v", s.Requests[1])
	}
	if s.Fsync.Count != 1 || s.Fsync.Sum != 200*time.Microsecond || s.Fsync.Counts[1] != 1 {
		t.Errorf("fsync: %+v", s.Fsync)
	}
	if len(s.Purgatories) != 1 || s.Purgatories[0].Size != 3 || s.ISRShrinks != 1 {
		t.Errorf("purgatory %+v, shrinks %d", s.Purgatories, s.ISRShrinks)
	}
}

func TestWritePrometheus(t *testing.T) {
	r := NewRecorder()
	r.SetPartitions([]PartitionStats{
		{Topic: "b", Partition: 1, EndOffset: 5, HighWatermark: 5, Size: 300, Segments: 1, Replicas: 3, InSyncReplicas: 2},
		{Topic: "a", Partition: 0, EndOffset: 7, HighWatermark: 6, Size: 400, Segments: 2, Replicas: 1, InSyncReplicas: 1},
	})
	r.SetGroupLags([]GroupLag{{Group: `g"1`, Topic: "a", Partition: 0, Committed: 4, EndOffset: 7, Lag: 3}})
	r.Produced("a", 7, 400)
	r.Request(0, 50*time.Microsecond, false)
	r.Request(0, 20*time.Second, false)
	var sb strings.Builder
	if err := r.Snapshot().WritePrometheus(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{
		"# TYPE kafka_log_log_logendoffset gauge\n" +
			"kafka_log_log_logendoffset{topic=\"a\",partition=\"0\"} 7\n" +
			"kafka_log_log_logendoffset{topic=\"b\",partition=\"1\"} 5\n",
		"kafka_log_log_size{topic=\"a\",partition=\"0\"} 400\n",
		"kafka_log_log_numlogsegments{topic=\"a\",partition=\"0\"} 2\n",
		"kafka_cluster_partition_underreplicated{topic=\"b\",partition=\"1\"} 1\n",
		"kafka_server_replicamanager_underreplicatedpartitions 1\n",
		"# TYPE kafka_server_brokertopicmetrics_bytesin_total counter\nkafka_server_brokertopicmetrics_bytesin_total{topic=\"a\"} 400\n",
		"kafka_server_brokertopicmetrics_messagesin_total{topic=\"a\"} 7\n",
		"# TYPE kafka_network_requestmetrics_totaltime_seconds histogram\n" +
			"kafka_network_requestmetrics_totaltime_seconds_bucket{request=\"Produce\",le=\"0.0001\"} 1\n",
		"kafka_network_requestmetrics_totaltime_seconds_bucket{request=\"Produce\",le=\"10\"} 1\n" +
			"kafka_network_requestmetrics_totaltime_seconds_bucket{request=\"Produce\",le=\"+Inf\"} 2\n" +
			"kafka_network_requestmetrics_totaltime_seconds_sum{request=\"Produce\"} 20.00005\n" +
			"kafka_network_requestmetrics_totaltime_seconds_count{request=\"Produce\"} 2\n",
		"kafka_consumergroup_lag{group=\"g\\\"1\",topic=\"a\",partition=\"0\"} 3\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks\n%s\n--- output:\n%s", want, out)
		}
	}
	// Pushed broker-wide figures are absent until something reports one.
	for _, absent := range []string{"logflush", "logcleaner", "isrshrinks"} {
		if strings.Contains(out, absent) {
			t.Errorf("%s reported before any was pushed:\n%s", absent, out)
		}
	}
	r.Fsync(3 * time.Millisecond)
	r.Cleaned("a", 0, 100, 60, time.Second)
	sb.Reset()
	r.Snapshot().WritePrometheus(&sb)
	for _, want := range []string{
		"kafka_log_logflushstats_logflush_seconds_count 1\n",
		"kafka_log_logflushstats_logflush_seconds_bucket{le=\"0.005\"} 1\n",
		"kafka_log_logcleaner_written_bytes_total 60\n",
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	out = sb.String()
	// Every line is a comment or "name{labels} value".
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "# ") && strings.Count(l, " ") < 1 {
			t.Errorf("bad line %q", l)
		}
	}
}

func TestNopAndAPIName(t *testing.T) {
	var h Hooks = Nop{}
	h.Request(0, time.Second, false)
	if APIName(3) != "Metadata" || APIName(99) != "Api99" {
		t.Errorf("APIName: %q %q", APIName(3), APIName(99))
	}
	NewRecorder().Request(-1, 0, false) // out of range: ignored, no panic
	NewRecorder().Request(maxAPI, 0, false)
}

func TestRequestBytes(t *testing.T) {
	r := NewRecorder()
	r.Request(1, time.Millisecond, false)
	r.RequestBytes(1, 100, 5000)
	r.RequestBytes(1, 50, 0)
	r.RequestBytes(-1, 1, 1) // out of range: ignored
	s := r.Snapshot()
	if len(s.Requests) != 1 || s.Requests[0].RequestBytes != 150 || s.Requests[0].ResponseBytes != 5000 {
		t.Fatalf("requests: %+v", s.Requests)
	}
	var sb strings.Builder
	s.WritePrometheus(&sb)
	for _, want := range []string{
		"kafka_network_requestmetrics_requestbytes_total{request=\"Fetch\"} 150\n",
		"kafka_network_requestmetrics_responsebytes_total{request=\"Fetch\"} 5000\n",
	} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, sb.String())
		}
	}
}

func TestRecorderAllocatesNothingOnceSeen(t *testing.T) {
	r := NewRecorder()
	r.Produced("orders", 1, 1)
	name := string([]byte("orders")) // not a constant, as a request's topic is not
	if n := testing.AllocsPerRun(100, func() {
		r.Produced(name, 1, 100)
		r.Fetched(name, 100, true)
		r.Request(0, time.Millisecond, false)
		r.RequestBytes(0, 10, 10)
		r.Fsync(time.Millisecond)
	}); n != 0 {
		t.Errorf("%v allocs per run, want 0", n)
	}
}
