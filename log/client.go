package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/tp"
)

// TopicPartition names one partition of a topic.
type TopicPartition = tp.TopicPartition

// Errors of consumer groups (see package group).
var (
	ErrRebalanceInProgress = group.ErrRebalanceInProgress
	ErrUnknownMember       = group.ErrUnknownMember
	ErrIllegalGeneration   = group.ErrIllegalGeneration
)

// Acks says when a produce is acknowledged.
type Acks int

const (
	// AcksAll waits until every in-sync replica has the records (on a
	// standalone broker: appended, and fsynced if the topic's flush policy
	// says so). It is the zero value: the safe default.
	AcksAll Acks = iota
	// AcksLeader waits until the leader has appended the records.
	AcksLeader
	// AcksNone does not wait.
	AcksNone
)

func (a Acks) String() string {
	switch a {
	case AcksAll:
		return "all"
	case AcksLeader:
		return "leader"
	case AcksNone:
		return "none"
	}
	return "Acks(?)"
}

// Special offsets for ListOffset, as Kafka's ListOffsets.
const (
	EarliestOffset int64 = -2 // the log start offset
	LatestOffset   int64 = -1 // the end offset (high watermark)
)

// Client is what producers and consumers need from a broker: the data
// plane and the consumer-group part. *Broker (a standalone node) implements
// it, and so do a cluster member and a Kafka-protocol client.
type Client interface {
	DataClient
	GroupClient
}

// DataClient is the data plane of a Client: metadata, produce, fetch and
// offsets.
type DataClient interface {
	// Partitions returns the number of partitions of topic
	// (ErrUnknownTopic).
	Partitions(ctx context.Context, topic string) (int, error)
	// ProduceBatch appends one record batch, encoded by
	// segment/batch.Builder with base offset 0 (as a Kafka client sends
	// it), to a partition and answers what Kafka's Produce answers. The
	// batch may be modified. AcksAll and AcksLeader return once the batch
	// is appended (and fsynced when the topic's FlushMessages requires it;
	// in a cluster, AcksAll once the high watermark covers it).
	ProduceBatch(ctx context.Context, tp TopicPartition, batch []byte, acks Acks) (ProduceResult, error)
	// Produce is ProduceBatch answering only the base offset.
	Produce(ctx context.Context, tp TopicPartition, batch []byte, acks Acks) (baseOffset int64, err error)
	// Fetch returns record batches of the requested partitions, none at
	// or past the bound of the request's isolation (the high watermark for
	// a consumer, the end offset for a replica), waiting up to MaxWait for
	// MinBytes readable below it. A request no broker could serve is
	// ErrInvalidRequest; errors of one partition are in its
	// FetchedPartition. The caller releases the response's records
	// (FetchResponse.Release).
	Fetch(ctx context.Context, req FetchRequest) (FetchResponse, error)
	// ListOffset returns EarliestOffset, LatestOffset, LatestStableOffset,
	// or for a timestamp in ms the first offset whose record is at least
	// that recent.
	ListOffset(ctx context.Context, tp TopicPartition, at int64) (int64, error)
	// InitProducerID gives an idempotent producer its identity, as Kafka's
	// InitProducerId without a transactional id: a producer id never given
	// before by this broker or cluster (across restarts and crashes too),
	// with epoch 0. The producer bumps the epoch itself (KIP-360) and asks
	// again when the epoch would pass math.MaxInt16.
	InitProducerID(ctx context.Context) (ProducerID, error)
}

// ProducerID is an idempotent producer's identity: the producer id and
// epoch its batches carry (Kafka's ProducerIdAndEpoch).
type ProducerID struct {
	ID    int64
	Epoch int16
}

// ProduceResult is the answer to a produce of one batch: the fields of
// Kafka's Produce response for a partition.
type ProduceResult struct {
	// BaseOffset is the offset given to the batch's first record.
	BaseOffset int64
	// LogAppendTime is the broker's timestamp (ms) of the batch when the
	// topic stamps batches at append (Kafka's LogAppendTime), and -1 when
	// the records keep the producer's timestamps (CreateTime), as Kafka
	// answers.
	LogAppendTime int64
	// LogStartOffset is the partition's log start offset after the append.
	LogStartOffset int64
}

// ErrUnreachable marks a Client's error that says the broker it needed
// could not be reached: a connection refused, reset or lost, a broker that
// did not answer in time. It is transient: a Consumer reads the partition
// again, an idempotent Producer sends the batch again, as they do after
// ErrNotLeader. Clients wrap it with the cause (a kafka.Dial client's
// connection errors match it).
var ErrUnreachable = errors.New("log: broker unreachable")

// ErrInvalidRequest is returned for a request that no broker could serve
// as asked (Kafka's INVALID_REQUEST), such as an unknown FetchIsolation.
var ErrInvalidRequest = errs.ErrInvalidRequest // also group's and controller's

// FetchIsolation says how far a fetch reads: Kafka's FetchIsolation, which
// a Kafka Fetch request sets by its replica id and isolation level.
type FetchIsolation int8

const (
	// FetchHighWatermark reads below the high watermark: committed
	// records only, what consumers read (Kafka's read_uncommitted). The zero
	// value.
	FetchHighWatermark FetchIsolation = iota
	// FetchLogEnd reads below the log end offset: what a follower replica
	// reads.
	FetchLogEnd
	// FetchTxnCommitted reads below the last stable offset (Kafka's
	// read_committed). With no transactions it is the high watermark.
	FetchTxnCommitted
)

func (i FetchIsolation) String() string {
	switch i {
	case FetchHighWatermark:
		return "high-watermark"
	case FetchLogEnd:
		return "log-end"
	case FetchTxnCommitted:
		return "txn-committed"
	}
	return fmt.Sprintf("FetchIsolation(%d)", int8(i))
}

// FetchRequest asks for records of several partitions.
type FetchRequest struct {
	Partitions        []FetchPartition
	MinBytes          int           // 0 → 1
	MaxBytes          int           // 0 → 50 MiB, the whole response; at least one batch if any
	PartitionMaxBytes int           // 0 → 1 MiB per partition
	MaxWait           time.Duration // 0 → 500 ms
	// Isolation says how far the fetch reads; the zero value reads below
	// the high watermark, as a consumer does.
	Isolation FetchIsolation
	// ReplicaID is the broker id (> 0) of the follower replica that
	// fetches, 0 for a consumer (Kafka's replica id, -1 on the wire, maps
	// to 0). A replica reads below the end offset whatever Isolation says,
	// and in a cluster its fetch offset tells the leader the replica's end
	// offset.
	ReplicaID int
}

// validate refuses what no broker could serve.
func (r FetchRequest) validate() error {
	switch {
	case r.Isolation < FetchHighWatermark || r.Isolation > FetchTxnCommitted:
		return fmt.Errorf("%w: fetch isolation %d", ErrInvalidRequest, r.Isolation)
	case r.ReplicaID < 0:
		return fmt.Errorf("%w: fetch replica id %d (0 for a consumer)", ErrInvalidRequest, r.ReplicaID)
	}
	for _, fp := range r.Partitions {
		if fp.MaxBytes < 0 {
			return fmt.Errorf("%w: fetch of %s-%d: MaxBytes %d", ErrInvalidRequest, fp.Topic, fp.Partition, fp.MaxBytes)
		}
	}
	return nil
}

// isolation is how far the fetch reads: a replica reads to the log end.
func (r FetchRequest) isolation() FetchIsolation {
	if r.ReplicaID > 0 {
		return FetchLogEnd
	}
	return r.Isolation
}

func (r FetchRequest) withDefaults() FetchRequest {
	if r.MinBytes <= 0 {
		r.MinBytes = 1
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = 50 << 20
	}
	if r.PartitionMaxBytes <= 0 {
		r.PartitionMaxBytes = 1 << 20
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 500 * time.Millisecond
	}
	return r
}

// FetchPartition is one partition of a FetchRequest and where to read it.
type FetchPartition struct {
	TopicPartition
	Offset int64
	// MaxBytes bounds this partition (Kafka's per-partition
	// partition_max_bytes); 0 → the request's PartitionMaxBytes.
	MaxBytes int
}

// maxBytes is the partition's byte budget under r.
func (fp FetchPartition) maxBytes(r *FetchRequest) int {
	if fp.MaxBytes > 0 {
		return fp.MaxBytes
	}
	return r.PartitionMaxBytes
}

// FetchResponse holds one FetchedPartition per requested partition, in the
// request's order. Its records hold segments until Release.
type FetchResponse struct {
	Partitions []FetchedPartition
}

// Release releases the records of every partition (Batches.Release).
func (r *FetchResponse) Release() {
	for i := range r.Partitions {
		r.Partitions[i].Records.Release()
	}
}

// FetchedPartition is what a fetch read from one partition: the fields of
// a partition of Kafka's Fetch response.
type FetchedPartition struct {
	TopicPartition
	// Records are whole record batches as stored (DecodeRecords reads
	// their bytes), a handle on the segment files: WriteTo sends them with
	// sendfile, Bytes reads them; Release when done. The first batch may
	// start before the requested offset; none starts at or past the bound
	// of the fetch's isolation.
	Records          Batches
	HighWatermark    int64
	LastStableOffset int64 // the high watermark while there are no transactions
	LogStartOffset   int64
	// AbortedTransactions are, for a FetchTxnCommitted fetch with records,
	// the aborted transactions that overlap them, whose batches a
	// READ_COMMITTED reader skips; nil otherwise.
	AbortedTransactions []AbortedTransaction
	Err                 error // per partition: *OffsetOutOfRangeError, ErrUnknownTopic, ...
}
