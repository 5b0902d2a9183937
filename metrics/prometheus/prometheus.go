// Package prometheus registers Strata's metrics with a Prometheus
// registry of the program's own (github.com/prometheus/client_golang). It
// is a module of its own, so that Strata's core pulls in no Prometheus.
//
//	rec := metrics.NewRecorder()
//	b, _ := log.Open(dir, log.Config{Metrics: rec})
//	srv, _ := kafka.Listen(addr, b, kafka.Config{Metrics: rec})
//	reg.MustRegister(prometheus.NewCollector(func() metrics.Snapshot {
//		logmetrics.Collect(b, rec) // the polled gauges, fresh at each scrape
//		return rec.Snapshot()
//	}))
//
// The metric names and labels are metrics.Snapshot.Families': Kafka's JMX
// names as the Prometheus JMX exporter writes them (kafka_log_log_size,
// kafka_server_brokertopicmetrics_bytesin_total, ...), the same that
// `strata serve --metrics-addr` serves.
package prometheus

import (
	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/metrics"
)

// Collector is a prometheus.Collector of a Strata snapshot. It is an
// unchecked collector (Describe sends nothing): the families it reports
// depend on the topics and groups that exist at each scrape.
type Collector struct {
	snapshot func() metrics.Snapshot
}

var _ prom.Collector = (*Collector)(nil)

// NewCollector returns a Collector that calls snapshot at every scrape.
func NewCollector(snapshot func() metrics.Snapshot) *Collector {
	return &Collector{snapshot: snapshot}
}

// ForRecorder returns a Collector of r's figures as they are (for
// programs that set r's polled gauges themselves).
func ForRecorder(r *metrics.Recorder) *Collector { return NewCollector(r.Snapshot) }

// Describe implements prometheus.Collector: nothing, as an unchecked
// collector.
func (c *Collector) Describe(chan<- *prom.Desc) {}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prom.Metric) {
	for _, f := range c.snapshot().Families() {
		descs := map[string]*prom.Desc{} // by label names: a family's samples share them
		for _, s := range f.Samples {
			names := make([]string, len(s.Labels))
			values := make([]string, len(s.Labels))
			key := ""
			for i, l := range s.Labels {
				names[i], values[i] = l.Name, l.Value
				key += l.Name + "\x00"
			}
			d := descs[key]
			if d == nil {
				d = prom.NewDesc(f.Name, f.Help, names, nil)
				descs[key] = d
			}
			switch f.Type {
			case metrics.Counter:
				ch <- prom.MustNewConstMetric(d, prom.CounterValue, s.Value, values...)
			case metrics.Gauge:
				ch <- prom.MustNewConstMetric(d, prom.GaugeValue, s.Value, values...)
			case metrics.HistogramType:
				buckets := make(map[float64]uint64, len(metrics.LatencyBuckets))
				var cum uint64
				for i, bound := range metrics.LatencyBuckets {
					cum += s.Hist.Counts[i]
					buckets[bound.Seconds()] = cum
				}
				ch <- prom.MustNewConstHistogram(d, s.Hist.Count, s.Hist.Sum.Seconds(), buckets, values...)
			}
		}
	}
}
