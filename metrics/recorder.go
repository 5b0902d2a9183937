package metrics

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds of every latency histogram.
var LatencyBuckets = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// maxAPI bounds the Kafka API keys a Recorder counts (Kafka's go up to
// about 90); a request with a larger key is not counted.
const maxAPI = 128

// histogram is a lock-free latency histogram over LatencyBuckets.
type histogram struct {
	counts [17]atomic.Uint64 // len(LatencyBuckets) + the +Inf bucket
	sum    atomic.Int64      // nanoseconds
}

func (h *histogram) observe(d time.Duration) {
	i, _ := slices.BinarySearch(LatencyBuckets, d)
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

func (h *histogram) snapshot() Histogram {
	s := Histogram{Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	return s
}

type apiStats struct {
	requests, errors            atomic.Int64
	requestBytes, responseBytes atomic.Int64
	latency                     histogram
}

type topicStats struct {
	messagesIn, bytesIn, bytesOut, replicationBytesOut atomic.Int64
}

// Recorder is the in-memory Hooks: it counts what is pushed, holds the
// gauges a poller sets, and gives a consistent-enough Snapshot of both (each
// figure is read atomically; figures are not read at one instant). The zero
// value is not ready: use NewRecorder.
type Recorder struct {
	requests [maxAPI]apiStats

	// topics is read without a lock (and without allocating, unlike a
	// sync.Map keyed by any): a new topic copies the map under topicsMu.
	topics   atomic.Pointer[map[string]*topicStats]
	topicsMu sync.Mutex

	fsync histogram

	purgMu    sync.Mutex
	purgatory map[string]int

	cleanerPasses, cleanerRead, cleanerWritten atomic.Int64
	cleanerTime                                histogram

	isrShrinks, isrExpands atomic.Int64

	gaugesMu   sync.RWMutex
	partitions []PartitionStats
	lags       []GroupLag
}

var _ Hooks = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{purgatory: map[string]int{}}
}

// Request implements Hooks.
func (r *Recorder) Request(api int16, d time.Duration, failed bool) {
	if api < 0 || api >= maxAPI {
		return
	}
	s := &r.requests[api]
	s.requests.Add(1)
	if failed {
		s.errors.Add(1)
	}
	s.latency.observe(d)
}

func (r *Recorder) topic(name string) *topicStats {
	if m := r.topics.Load(); m != nil {
		if t := (*m)[name]; t != nil {
			return t
		}
	}
	r.topicsMu.Lock()
	defer r.topicsMu.Unlock()
	old := r.topics.Load()
	if old != nil {
		if t := (*old)[name]; t != nil {
			return t
		}
	}
	m := make(map[string]*topicStats, 1)
	if old != nil {
		m = maps.Clone(*old)
	}
	t := &topicStats{}
	m[name] = t
	r.topics.Store(&m)
	return t
}

// RequestBytes implements Hooks.
func (r *Recorder) RequestBytes(api int16, request, response int64) {
	if api < 0 || api >= maxAPI {
		return
	}
	s := &r.requests[api]
	s.requestBytes.Add(request)
	s.responseBytes.Add(response)
}

// Produced implements Hooks.
func (r *Recorder) Produced(topic string, records, bytes int64) {
	t := r.topic(topic)
	t.messagesIn.Add(records)
	t.bytesIn.Add(bytes)
}

// Fetched implements Hooks.
func (r *Recorder) Fetched(topic string, bytes int64, replica bool) {
	t := r.topic(topic)
	if replica {
		t.replicationBytesOut.Add(bytes)
	} else {
		t.bytesOut.Add(bytes)
	}
}

// Fsync implements Hooks.
func (r *Recorder) Fsync(d time.Duration) { r.fsync.observe(d) }

// Purgatory implements Hooks.
func (r *Recorder) Purgatory(name string, size int) {
	r.purgMu.Lock()
	r.purgatory[name] = size
	r.purgMu.Unlock()
}

// Cleaned implements Hooks.
func (r *Recorder) Cleaned(topic string, partition int, bytesRead, bytesWritten int64, d time.Duration) {
	r.cleanerPasses.Add(1)
	r.cleanerRead.Add(bytesRead)
	r.cleanerWritten.Add(bytesWritten)
	r.cleanerTime.observe(d)
}

// ISRChanged implements Hooks.
func (r *Recorder) ISRChanged(topic string, partition int, isrSize int, shrink bool) {
	if shrink {
		r.isrShrinks.Add(1)
	} else {
		r.isrExpands.Add(1)
	}
}

// SetPartitions replaces the polled per-partition gauges: a partition not in
// ps (a deleted topic's) is no longer reported.
func (r *Recorder) SetPartitions(ps []PartitionStats) {
	ps = slices.Clone(ps)
	r.gaugesMu.Lock()
	r.partitions = ps
	r.gaugesMu.Unlock()
}

// SetGroupLags replaces the polled consumer group offsets and lags.
func (r *Recorder) SetGroupLags(ls []GroupLag) {
	ls = slices.Clone(ls)
	r.gaugesMu.Lock()
	r.lags = ls
	r.gaugesMu.Unlock()
}

// Snapshot returns every figure, sorted (requests by API key, topics and
// partitions by name and number, lags by group, topic, partition).
func (r *Recorder) Snapshot() Snapshot {
	var s Snapshot
	for api := range r.requests {
		a := &r.requests[api]
		n := a.requests.Load()
		if n == 0 {
			continue
		}
		s.Requests = append(s.Requests, RequestStats{
			API: int16(api), Name: APIName(int16(api)),
			Requests: n, Errors: a.errors.Load(), Latency: a.latency.snapshot(),
			RequestBytes: a.requestBytes.Load(), ResponseBytes: a.responseBytes.Load(),
		})
	}
	if m := r.topics.Load(); m != nil {
		for name, t := range *m {
			s.Topics = append(s.Topics, TopicStats{
				Topic: name, MessagesIn: t.messagesIn.Load(), BytesIn: t.bytesIn.Load(),
				BytesOut: t.bytesOut.Load(), ReplicationBytesOut: t.replicationBytesOut.Load(),
			})
		}
	}
	slices.SortFunc(s.Topics, func(a, b TopicStats) int { return cmpString(a.Topic, b.Topic) })
	s.Fsync = r.fsync.snapshot()
	r.purgMu.Lock()
	for name, n := range r.purgatory {
		s.Purgatories = append(s.Purgatories, PurgatoryStats{Name: name, Size: n})
	}
	r.purgMu.Unlock()
	slices.SortFunc(s.Purgatories, func(a, b PurgatoryStats) int { return cmpString(a.Name, b.Name) })
	s.Cleaner = CleanerStats{
		Passes: r.cleanerPasses.Load(), BytesRead: r.cleanerRead.Load(),
		BytesWritten: r.cleanerWritten.Load(), Time: r.cleanerTime.snapshot(),
	}
	s.ISRShrinks, s.ISRExpands = r.isrShrinks.Load(), r.isrExpands.Load()
	r.gaugesMu.RLock()
	s.Partitions = slices.Clone(r.partitions)
	s.GroupLags = slices.Clone(r.lags)
	r.gaugesMu.RUnlock()
	slices.SortFunc(s.Partitions, func(a, b PartitionStats) int {
		if c := cmpString(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	slices.SortFunc(s.GroupLags, func(a, b GroupLag) int {
		if c := cmpString(a.Group, b.Group); c != 0 {
			return c
		}
		if c := cmpString(a.Topic, b.Topic); c != 0 {
			return c
		}
		return a.Partition - b.Partition
	})
	return s
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// apiNames are the Kafka APIs Strata serves or will.
var apiNames = map[int16]string{
	0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
	9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
	13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
	17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
	22: "InitProducerId", 32: "DescribeConfigs", 36: "SaslAuthenticate",
	42: "DeleteGroups", 60: "DescribeCluster",
}

// APIName is the name of a Kafka API key as Kafka's request metrics label
// it ("Produce"), or "Api<key>" for one Strata does not know.
func APIName(api int16) string {
	if n, ok := apiNames[api]; ok {
		return n
	}
	return "Api" + strconv.Itoa(int(api))
}
