// Package replicametrics feeds a metrics.Recorder from a cluster member, a
// *replica.Broker: Collect polls each partition replica the member holds
// (its offsets, size and segments) and, for the partitions it leads, the
// replicas and the ISR as the cluster's metadata has them, from which the
// under-replicated partitions follow. The pushed figures come from the
// member itself, given the same Recorder:
//
//	rec := metrics.NewRecorder()
//	b, _ := replica.Start(replica.Config{..., Metrics: rec}) // ISR changes, flushes, requests, traffic
//	http.Handle("/metrics", replicametrics.Handler(b, rec))
//
// As in Kafka, the replica gauges (replicas, in-sync replicas,
// under-replicated) are the leader's: a follower reports only the log
// gauges of its replica.
package replicametrics

import (
	"net/http"

	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/replica"
)

// Collect sets r's polled gauges from b: every partition replica b holds.
// A partition removed while Collect runs is skipped.
func Collect(b *replica.Broker, r *metrics.Recorder) {
	img := b.Image()
	var ps []metrics.PartitionStats
	for _, name := range img.Topics() {
		t, ok := img.Topic(name)
		if !ok {
			continue
		}
		for _, st := range t.Partitions {
			p, err := b.Partition(name, st.Partition)
			if err != nil {
				continue // no replica here
			}
			ps = append(ps, metrics.PartitionStats{
				Topic: name, Partition: st.Partition,
				StartOffset: p.StartOffset(), EndOffset: p.EndOffset(), HighWatermark: p.HighWatermark(),
				Size: p.Size(), Segments: p.Segments(),
				Replicas: len(st.Replicas), InSyncReplicas: len(st.ISR),
				Follower: st.Leader != b.ID(),
			})
		}
	}
	r.SetPartitions(ps)
}

// Handler serves r in the Prometheus text format, collecting b's gauges
// first, on every request.
func Handler(b *replica.Broker, r *metrics.Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		Collect(b, r)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		r.Snapshot().WritePrometheus(w) // an error is the client's going away
	})
}
