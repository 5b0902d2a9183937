// Package metrics is how Strata reports what Kafka's broker metrics report,
// with no dependency: a push interface (Hooks) that the library's hot paths
// call, a no-op default (Nop), and Recorder, an in-memory implementation that
// also holds the gauges a poller sets (per-partition offsets and sizes,
// consumer group lag) and writes everything in the Prometheus text format.
//
// Two kinds of figures:
//
//   - Pushed, as they happen: requests and their latency by API, records and
//     bytes in and out per topic, fsyncs and their latency, purgatory sizes,
//     cleaner passes, ISR shrinks and expands. These are Hooks calls, made by
//     package kafka (requests), package log (fsync, purgatory, cleaner) and
//     package replica (ISR); see Hooks for who calls what.
//   - Polled, on a scrape or a timer: per partition log start offset, log end
//     offset (LEO), high watermark, size and segment count; ISR and replica
//     counts; each consumer group's committed offsets and lag. These are read
//     from what the library already exposes (Partition.EndOffset, ...) by
//     package metrics/logmetrics (a standalone *log.Broker) or
//     metrics/replicametrics (a cluster member, a *replica.Broker), which
//     set them with Recorder.SetPartitions and Recorder.SetGroupLags.
//
// A Recorder is safe for concurrent use; its Hooks methods take no lock on
// the per-request path (a topic's counters are found in a copy-on-write map), and
// allocate nothing once a topic has been seen.
//
// Metric names follow Kafka's JMX names as the Prometheus JMX exporter
// writes them (kafka_log_log_size, kafka_server_brokertopicmetrics_bytesin_total,
// ...); WritePrometheus lists them all. The Prometheus client adapter, for
// programs that register with their own registry, is the separate module
// github.com/strata-log/strata/metrics/prometheus, so the core pulls in no
// Prometheus.
package metrics
