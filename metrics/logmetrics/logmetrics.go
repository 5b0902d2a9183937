// Package logmetrics feeds a metrics.Recorder from a standalone
// *log.Broker: Collect polls what the broker exposes (each partition's
// offsets, size and segments; each consumer group's committed offsets, for
// lag), and Handler serves it all on /metrics. The pushed figures come from
// the library itself, given the same Recorder:
//
//	rec := metrics.NewRecorder()
//	b, _ := log.Open(dir, log.Config{Metrics: rec})                  // flushes, purgatory, cleaner
//	srv, _ := kafka.Listen(addr, b, kafka.Config{Metrics: rec})      // requests, traffic
//	http.Handle("/metrics", logmetrics.Handler(b, rec))
//
// Backend wraps a broker whose server is not given the hooks (a
// kafka.Server built elsewhere) so that produce and fetch traffic is
// counted on its way through, with Produce and Fetch latency as the broker
// saw them; a server given the hooks counts all of it itself, and must not
// also be given a Backend of the same Recorder.
package logmetrics

import (
	"context"
	"encoding/binary"
	"net/http"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/metrics"
)

// Kafka API keys.
const (
	apiProduce = 0
	apiFetch   = 1
)

// Collect sets r's polled gauges from b: every partition of every topic,
// and the lag of every consumer group with committed offsets. A topic
// deleted while Collect runs is skipped.
func Collect(b *log.Broker, r *metrics.Recorder) {
	var ps []metrics.PartitionStats
	var tps []log.TopicPartition
	ends := map[log.TopicPartition]int64{}
	for _, name := range b.Topics() {
		n, err := b.Partitions(context.Background(), name)
		if err != nil {
			continue
		}
		for i := range n {
			p, err := b.Partition(name, i)
			if err != nil {
				continue
			}
			st := metrics.PartitionStats{
				Topic: name, Partition: i,
				StartOffset: p.StartOffset(), EndOffset: p.EndOffset(), HighWatermark: p.HighWatermark(),
				Size: p.Size(), Segments: p.Segments(),
				Replicas: 1, InSyncReplicas: 1, // a standalone broker is the only replica
			}
			ps = append(ps, st)
			tp := log.TopicPartition{Topic: name, Partition: i}
			tps = append(tps, tp)
			ends[tp] = st.EndOffset
		}
	}
	r.SetPartitions(ps)
	var lags []metrics.GroupLag
	if gc := b.GroupCoordinator(); gc != nil {
		for _, g := range gc.Groups() {
			for tp, off := range gc.Committed(g, tps) {
				end := ends[tp]
				lags = append(lags, metrics.GroupLag{
					Group: g, Topic: tp.Topic, Partition: tp.Partition,
					Committed: off, EndOffset: end, Lag: max(0, end-off),
				})
			}
		}
	}
	r.SetGroupLags(lags)
}

// Handler serves r in the Prometheus text format, collecting b's gauges
// first, on every request.
func Handler(b *log.Broker, r *metrics.Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		Collect(b, r)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		r.Snapshot().WritePrometheus(w) // an error is the client's going away
	})
}

// Backend is a *log.Broker for kafka.Listen that reports its produce and
// fetch traffic to Hooks. Every method of the broker is promoted, so the
// server sees the same broker with two methods counted. As a log.Client it
// passes the broker's log.BuiltProducer through, so a log.Producer on a
// Backend sends its batches by the broker's trusted path, uncounted as
// ProduceBatch is.
type Backend struct {
	*log.Broker
	hooks    metrics.Hooks
	requests bool // report Request for Produce and Fetch
}

// NewBackend wraps b: produce and fetch traffic, and Produce and Fetch
// latency as the broker saw them, go to h.
func NewBackend(b *log.Broker, h metrics.Hooks) *Backend {
	return &Backend{Broker: b, hooks: h, requests: true}
}

// NewBackendTraffic wraps b reporting only the traffic (records and bytes),
// for a server that reports its requests to h itself.
func NewBackendTraffic(b *log.Broker, h metrics.Hooks) *Backend {
	return &Backend{Broker: b, hooks: h}
}

// Produce appends a batch through the broker and reports it.
func (b *Backend) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	start := time.Now()
	base, err := b.Broker.Produce(ctx, tp, batch, acks)
	if b.requests {
		b.hooks.Request(apiProduce, time.Since(start), err != nil)
	}
	if err == nil {
		b.hooks.Produced(tp.Topic, batchRecords(batch), int64(len(batch)))
	}
	return base, err
}

var _ log.BuiltProducer = (*Backend)(nil)

// ProduceBuilt appends a batch a log.Producer built through the broker's
// trusted path (see log.BuiltProducer).
func (b *Backend) ProduceBuilt(ctx context.Context, tp log.TopicPartition, bb log.BuiltBatch, acks log.Acks) (log.ProduceResult, error) {
	return b.Broker.ProduceBuilt(ctx, tp, bb, acks)
}

// BuiltProducerOf returns b: the capability is the Backend's, not only
// its broker's.
func (b *Backend) BuiltProducerOf() log.Client { return b }

// batchRecords is the records count of a Kafka record batch header (bytes
// 57-60), or 0 for bytes too short to be one.
func batchRecords(batch []byte) int64 {
	if len(batch) < 61 {
		return 0
	}
	return int64(int32(binary.BigEndian.Uint32(batch[57:61])))
}

// Fetch reads through the broker and reports the record bytes returned.
func (b *Backend) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	start := time.Now()
	res, err := b.Broker.Fetch(ctx, req)
	failed := err != nil
	for i := range res.Partitions {
		p := &res.Partitions[i]
		if p.Err != nil {
			failed = true
		}
		if n := p.Records.Len(); n > 0 {
			b.hooks.Fetched(p.Topic, n, req.ReplicaID > 0)
		}
	}
	if b.requests {
		b.hooks.Request(apiFetch, time.Since(start), failed)
	}
	return res, err
}
