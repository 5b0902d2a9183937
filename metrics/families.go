package metrics

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Type is the kind of a metric family, as Prometheus has them.
type Type int

const (
	Counter Type = iota
	Gauge
	HistogramType // values in seconds
)

func (t Type) String() string { return [...]string{"counter", "gauge", "histogram"}[t] }

// Label is one label of a sample.
type Label struct{ Name, Value string }

// Sample is one value of a family: Value for counters and gauges, Hist for
// histograms.
type Sample struct {
	Labels []Label
	Value  float64
	Hist   *Histogram
}

// Family is a named metric and its samples. Names follow Kafka's JMX
// names as the Prometheus JMX exporter writes them; the Prometheus adapter
// and WritePrometheus both take them from Families, so the names are
// defined once.
type Family struct {
	Name, Help string
	Type       Type
	Samples    []Sample
}

func tp(topic string, partition int) []Label {
	return []Label{{"topic", topic}, {"partition", strconv.Itoa(partition)}}
}

// Families returns s as metric families. A family with no samples is
// left out, and so are the pushed broker-wide figures (fsync, cleaner, ISR
// changes) while nothing has reported one: absent, not zero, until the
// library's hooks are wired and something happens. The partition count and
// under-replicated partitions are always there.
func (s Snapshot) Families() []Family {
	var fs []Family
	add := func(name, help string, t Type, samples []Sample) {
		if len(samples) > 0 {
			fs = append(fs, Family{Name: name, Help: help, Type: t, Samples: samples})
		}
	}
	perPartition := func(name, help string, v func(PartitionStats) float64) {
		var ss []Sample
		for _, p := range s.Partitions {
			ss = append(ss, Sample{Labels: tp(p.Topic, p.Partition), Value: v(p)})
		}
		add(name, help, Gauge, ss)
	}
	// The replica gauges are the leader's: a follower's replica has none.
	perLed := func(name, help string, v func(PartitionStats) float64) {
		var ss []Sample
		for _, p := range s.Partitions {
			if !p.Follower {
				ss = append(ss, Sample{Labels: tp(p.Topic, p.Partition), Value: v(p)})
			}
		}
		add(name, help, Gauge, ss)
	}
	perPartition("kafka_log_log_logstartoffset", "The log start offset of a partition.", func(p PartitionStats) float64 { return float64(p.StartOffset) })
	perPartition("kafka_log_log_logendoffset", "The log end offset (LEO) of a partition: the offset of its next record.", func(p PartitionStats) float64 { return float64(p.EndOffset) })
	perPartition("kafka_log_log_highwatermark", "The high watermark of a partition.", func(p PartitionStats) float64 { return float64(p.HighWatermark) })
	perPartition("kafka_log_log_size", "The bytes of a partition's segments.", func(p PartitionStats) float64 { return float64(p.Size) })
	perPartition("kafka_log_log_numlogsegments", "The number of segments of a partition.", func(p PartitionStats) float64 { return float64(p.Segments) })
	perLed("kafka_cluster_partition_replicascount", "The number of replicas of a partition.", func(p PartitionStats) float64 { return float64(p.Replicas) })
	perLed("kafka_cluster_partition_insyncreplicascount", "The number of in-sync replicas of a partition.", func(p PartitionStats) float64 { return float64(p.InSyncReplicas) })
	perLed("kafka_cluster_partition_underreplicated", "1 if a partition's ISR is smaller than its replica set.", func(p PartitionStats) float64 { return b2f(p.UnderReplicated()) })
	under := 0
	for _, p := range s.Partitions {
		if p.UnderReplicated() {
			under++
		}
	}
	add("kafka_server_replicamanager_partitioncount", "The number of partition replicas on this broker.", Gauge, []Sample{{Value: float64(len(s.Partitions))}})
	add("kafka_server_replicamanager_underreplicatedpartitions", "The number of under-replicated partitions this broker leads.", Gauge, []Sample{{Value: float64(under)}})
	if s.ISRShrinks+s.ISRExpands > 0 {
		add("kafka_server_replicamanager_isrshrinks_total", "ISR shrinks.", Counter, []Sample{{Value: float64(s.ISRShrinks)}})
		add("kafka_server_replicamanager_isrexpands_total", "ISR expansions.", Counter, []Sample{{Value: float64(s.ISRExpands)}})
	}

	perTopic := func(name, help string, v func(TopicStats) int64) {
		var ss []Sample
		for _, t := range s.Topics {
			ss = append(ss, Sample{Labels: []Label{{"topic", t.Topic}}, Value: float64(v(t))})
		}
		add(name, help, Counter, ss)
	}
	perTopic("kafka_server_brokertopicmetrics_messagesin_total", "Records appended to a topic.", func(t TopicStats) int64 { return t.MessagesIn })
	perTopic("kafka_server_brokertopicmetrics_bytesin_total", "Record batch bytes appended to a topic.", func(t TopicStats) int64 { return t.BytesIn })
	perTopic("kafka_server_brokertopicmetrics_bytesout_total", "Record bytes fetched from a topic by consumers.", func(t TopicStats) int64 { return t.BytesOut })
	perTopic("kafka_server_brokertopicmetrics_replicationbytesout_total", "Record bytes fetched from a topic by follower replicas.", func(t TopicStats) int64 { return t.ReplicationBytesOut })

	var reqs, errs, lat, inB, outB []Sample
	for _, r := range s.Requests {
		l := []Label{{"request", r.Name}}
		reqs = append(reqs, Sample{Labels: l, Value: float64(r.Requests)})
		errs = append(errs, Sample{Labels: l, Value: float64(r.Errors)})
		if r.RequestBytes+r.ResponseBytes > 0 {
			inB = append(inB, Sample{Labels: l, Value: float64(r.RequestBytes)})
			outB = append(outB, Sample{Labels: l, Value: float64(r.ResponseBytes)})
		}
		h := r.Latency
		lat = append(lat, Sample{Labels: l, Hist: &h})
	}
	add("kafka_network_requestmetrics_requests_total", "Requests answered, by API.", Counter, reqs)
	add("kafka_network_requestmetrics_errors_total", "Requests answered with an error, by API.", Counter, errs)
	add("kafka_network_requestmetrics_totaltime_seconds", "Time from reading a request to having answered it, by API.", HistogramType, lat)
	add("kafka_network_requestmetrics_requestbytes_total", "Bytes of the requests read, by API.", Counter, inB)
	add("kafka_network_requestmetrics_responsebytes_total", "Bytes of the responses written, by API.", Counter, outB)

	var purg []Sample
	for _, p := range s.Purgatories {
		purg = append(purg, Sample{Labels: []Label{{"delayedoperation", p.Name}}, Value: float64(p.Size)})
	}
	add("kafka_server_delayedoperationpurgatory_purgatorysize", "Delayed operations waiting in a purgatory.", Gauge, purg)

	if s.Fsync.Count > 0 {
		fsync := s.Fsync
		add("kafka_log_logflushstats_logflush_seconds", "fsyncs of log files and their latency.", HistogramType, []Sample{{Hist: &fsync}})
	}
	if s.Cleaner.Passes > 0 {
		ct := s.Cleaner.Time
		add("kafka_log_logcleaner_passes_total", "Passes of the log cleaner over a partition.", Counter, []Sample{{Value: float64(s.Cleaner.Passes)}})
		add("kafka_log_logcleaner_read_bytes_total", "Bytes the log cleaner read.", Counter, []Sample{{Value: float64(s.Cleaner.BytesRead)}})
		add("kafka_log_logcleaner_written_bytes_total", "Bytes the log cleaner wrote.", Counter, []Sample{{Value: float64(s.Cleaner.BytesWritten)}})
		add("kafka_log_logcleaner_cleanertime_seconds", "Time of one cleaner pass.", HistogramType, []Sample{{Hist: &ct}})
	}

	var cur, lag []Sample
	for _, g := range s.GroupLags {
		l := append([]Label{{"group", g.Group}}, tp(g.Topic, g.Partition)...)
		cur = append(cur, Sample{Labels: l, Value: float64(g.Committed)})
		lag = append(lag, Sample{Labels: l, Value: float64(g.Lag)})
	}
	add("kafka_consumergroup_current_offset", "A consumer group's committed offset of a partition.", Gauge, cur)
	add("kafka_consumergroup_lag", "How far a consumer group's committed offset is behind the log end offset.", Gauge, lag)
	return fs
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// WritePrometheus writes s in the Prometheus text exposition format
// (version 0.0.4), what a /metrics endpoint serves.
func (s Snapshot) WritePrometheus(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, f := range s.Families() {
		bw.WriteString("# HELP " + f.Name + " " + f.Help + "\n")
		bw.WriteString("# TYPE " + f.Name + " " + f.Type.String() + "\n")
		for _, sm := range f.Samples {
			if f.Type != HistogramType {
				writeSample(bw, f.Name, sm.Labels, sm.Value)
				continue
			}
			var cum uint64
			for i, n := range sm.Hist.Counts {
				cum += n
				le := "+Inf"
				if i < len(LatencyBuckets) {
					le = strconv.FormatFloat(LatencyBuckets[i].Seconds(), 'g', -1, 64)
				}
				writeSample(bw, f.Name+"_bucket", append(sm.Labels[:len(sm.Labels):len(sm.Labels)], Label{"le", le}), float64(cum))
			}
			writeSample(bw, f.Name+"_sum", sm.Labels, sm.Hist.Sum.Seconds())
			writeSample(bw, f.Name+"_count", sm.Labels, float64(sm.Hist.Count))
		}
	}
	return bw.Flush()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func writeSample(w *bufio.Writer, name string, labels []Label, v float64) {
	w.WriteString(name)
	if len(labels) > 0 {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l.Name + `="` + labelEscaper.Replace(l.Value) + `"`)
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	w.WriteByte('\n')
}
