package metrics_test

import (
	"os"
	"time"

	"github.com/strata-log/strata/metrics"
)

// A Recorder counts what the library pushes, holds what a poller sets, and
// writes both in the Prometheus text format.
func ExampleRecorder() {
	rec := metrics.NewRecorder()
	var h metrics.Hooks = rec // what log and kafka are given
	h.Produced("orders", 3, 240)
	h.Request(0, 2*time.Millisecond, false)
	rec.SetPartitions([]metrics.PartitionStats{{Topic: "orders", EndOffset: 3, HighWatermark: 3, Size: 240, Segments: 1, Replicas: 1, InSyncReplicas: 1}})

	s := rec.Snapshot()
	s.Requests = nil // keep the example's output short
	s.WritePrometheus(os.Stdout)
	// Output:
	// # HELP kafka_log_log_logstartoffset The log start offset of a partition.
	// # TYPE kafka_log_log_logstartoffset gauge
	// kafka_log_log_logstartoffset{topic="orders",partition="0"} 0
	// # HELP kafka_log_log_logendoffset The log end offset (LEO) of a partition: the offset of its next record.
	// # TYPE kafka_log_log_logendoffset gauge
	// kafka_log_log_logendoffset{topic="orders",partition="0"} 3
	// # HELP kafka_log_log_highwatermark The high watermark of a partition.
	// # TYPE kafka_log_log_highwatermark gauge
	// kafka_log_log_highwatermark{topic="orders",partition="0"} 3
	// # HELP kafka_log_log_size The bytes of a partition's segments.
	// # TYPE kafka_log_log_size gauge
	// kafka_log_log_size{topic="orders",partition="0"} 240
	// # HELP kafka_log_log_numlogsegments The number of segments of a partition.
	// # TYPE kafka_log_log_numlogsegments gauge
	// kafka_log_log_numlogsegments{topic="orders",partition="0"} 1
	// # HELP kafka_cluster_partition_replicascount The number of replicas of a partition.
	// # TYPE kafka_cluster_partition_replicascount gauge
	// kafka_cluster_partition_replicascount{topic="orders",partition="0"} 1
	// # HELP kafka_cluster_partition_insyncreplicascount The number of in-sync replicas of a partition.
	// # TYPE kafka_cluster_partition_insyncreplicascount gauge
	// kafka_cluster_partition_insyncreplicascount{topic="orders",partition="0"} 1
	// # HELP kafka_cluster_partition_underreplicated 1 if a partition's ISR is smaller than its replica set.
	// # TYPE kafka_cluster_partition_underreplicated gauge
	// kafka_cluster_partition_underreplicated{topic="orders",partition="0"} 0
	// # HELP kafka_server_replicamanager_partitioncount The number of partition replicas on this broker.
	// # TYPE kafka_server_replicamanager_partitioncount gauge
	// kafka_server_replicamanager_partitioncount 1
	// # HELP kafka_server_replicamanager_underreplicatedpartitions The number of under-replicated partitions this broker leads.
	// # TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
	// kafka_server_replicamanager_underreplicatedpartitions 0
	// # HELP kafka_server_brokertopicmetrics_messagesin_total Records appended to a topic.
	// # TYPE kafka_server_brokertopicmetrics_messagesin_total counter
	// kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 3
	// # HELP kafka_server_brokertopicmetrics_bytesin_total Record batch bytes appended to a topic.
	// # TYPE kafka_server_brokertopicmetrics_bytesin_total counter
	// kafka_server_brokertopicmetrics_bytesin_total{topic="orders"} 240
	// # HELP kafka_server_brokertopicmetrics_bytesout_total Record bytes fetched from a topic by consumers.
	// # TYPE kafka_server_brokertopicmetrics_bytesout_total counter
	// kafka_server_brokertopicmetrics_bytesout_total{topic="orders"} 0
	// # HELP kafka_server_brokertopicmetrics_replicationbytesout_total Record bytes fetched from a topic by follower replicas.
	// # TYPE kafka_server_brokertopicmetrics_replicationbytesout_total counter
	// kafka_server_brokertopicmetrics_replicationbytesout_total{topic="orders"} 0
}
