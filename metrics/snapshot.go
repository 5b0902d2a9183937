package metrics

import "time"

// Snapshot is every figure of a Recorder at one scrape.
type Snapshot struct {
	Requests    []RequestStats // APIs with at least one request, by key
	Topics      []TopicStats   // topics with traffic, by name
	Fsync       Histogram
	Purgatories []PurgatoryStats
	Cleaner     CleanerStats
	ISRShrinks  int64
	ISRExpands  int64
	Partitions  []PartitionStats // polled
	GroupLags   []GroupLag       // polled
}

// Histogram is a latency distribution over LatencyBuckets: Counts[i] is
// the number of observations in (LatencyBuckets[i-1], LatencyBuckets[i]],
// the last one those above every bound (not cumulative).
type Histogram struct {
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// RequestStats are the figures of one Kafka API.
type RequestStats struct {
	API      int16
	Name     string
	Requests int64
	Errors   int64
	Latency  Histogram
	// RequestBytes and ResponseBytes are the bytes of the requests and of
	// their responses, frames whole.
	RequestBytes, ResponseBytes int64
}

// TopicStats are the traffic counters of one topic.
type TopicStats struct {
	Topic               string
	MessagesIn          int64
	BytesIn             int64
	BytesOut            int64
	ReplicationBytesOut int64
}

// PurgatoryStats is the size of one purgatory.
type PurgatoryStats struct {
	Name string
	Size int
}

// CleanerStats are the log cleaner's totals.
type CleanerStats struct {
	Passes       int64
	BytesRead    int64
	BytesWritten int64
	Time         Histogram
}

// PartitionStats are the polled gauges of one partition.
type PartitionStats struct {
	Topic          string
	Partition      int
	StartOffset    int64 // log start offset
	EndOffset      int64 // LEO
	HighWatermark  int64
	Size           int64 // bytes of its segments
	Segments       int
	Replicas       int // assigned replicas (1 on a standalone broker)
	InSyncReplicas int // ISR size (1 on a standalone broker)
	// Follower: this broker holds a follower's replica. Its log gauges
	// are reported; its replica gauges (replicas, ISR, under-replicated)
	// are the leader's to report, as in Kafka, and are left out.
	Follower bool
}

// UnderReplicated reports whether the ISR is smaller than the replica set,
// for a partition this broker leads.
func (p PartitionStats) UnderReplicated() bool { return !p.Follower && p.InSyncReplicas < p.Replicas }

// GroupLag is a consumer group's committed offset of one partition and how
// far it is behind the partition's end offset.
type GroupLag struct {
	Group     string
	Topic     string
	Partition int
	Committed int64
	EndOffset int64
	Lag       int64 // max(0, EndOffset - Committed)
}
