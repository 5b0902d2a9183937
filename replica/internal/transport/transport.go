package transport

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/machine"
)

// Transport is how a member reaches the others: a follower's fetches and
// OffsetForLeaderEpoch requests to a partition's leader, and client calls
// (produce, fetch, list offsets) forwarded to the leader. Its messages are
// the fields of Kafka's Fetch (with a replica id) and OffsetForLeaderEpoch,
// so that a Kafka-protocol implementation maps them one to one.
//
// LocalNetwork is the in-process implementation. A call that cannot reach
// the member returns an error wrapping ErrUnreachable. A Transport must not
// retain a request (its Partitions, a produce's batch) once the call
// returns: the caller reuses it.
type Transport interface {
	ReplicaFetch(ctx context.Context, leader int, req ReplicaFetchRequest) (ReplicaFetchResponse, error)
	EpochEnd(ctx context.Context, leader int, req EpochEndRequest) (EpochEndAnswer, error)
	Produce(ctx context.Context, leader int, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error)
	Fetch(ctx context.Context, leader int, req log.FetchRequest) (log.FetchResponse, error)
	ListOffset(ctx context.Context, leader int, tp log.TopicPartition, at int64) (int64, error)
	// DeleteRecords moves tp's log start at its leader (Kafka's
	// DeleteRecords) and returns the new low watermark.
	DeleteRecords(ctx context.Context, leader int, tp log.TopicPartition, offset int64) (int64, error)
	// Group runs a consumer-group call at the coordinator (see
	// groups_route.go): call gets the coordinator member's groups (the
	// Kafka-protocol transport: a Kafka client that finds the group's
	// coordinator itself).
	Group(ctx context.Context, coordinator int, call func(log.GroupClient) error) error
}

// ErrUnreachable: a member could not be reached (its link is cut, it is
// stopped, or it does not exist). It is log's: a Client's transient error.
var ErrUnreachable = log.ErrUnreachable

// ReplicaFetchRequest is a follower's Fetch: Kafka's FetchRequest with
// ReplicaID set, many partitions of one leader.
type ReplicaFetchRequest struct {
	ReplicaID  int
	MaxWait    int64 // ms; the leader holds the fetch this long if nothing is new
	Partitions []ReplicaFetchPartition
}

// ReplicaFetchPartition is one partition of a ReplicaFetchRequest.
type ReplicaFetchPartition struct {
	log.TopicPartition
	CurrentLeaderEpoch int32
	FetchOffset        int64
	LastFetchedEpoch   int32
	LogStartOffset     int64
	MaxBytes           int
}

// ReplicaFetchResponse answers a ReplicaFetchRequest, one entry per
// requested partition in order.
type ReplicaFetchResponse struct {
	Partitions []ReplicaFetchedPartition
}

// ReplicaFetchedPartition is one partition of a ReplicaFetchResponse.
type ReplicaFetchedPartition struct {
	log.TopicPartition
	Err            error // ErrNotLeader, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch, ErrOffsetOutOfRange, ...
	Diverging      *machine.EpochEnd
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	Records        log.Batches // release when done
}

// Release releases the records of every partition.
func (r *ReplicaFetchResponse) Release() {
	for i := range r.Partitions {
		r.Partitions[i].Records.Release()
	}
}

// EpochEndRequest is Kafka's OffsetForLeaderEpoch for one partition.
type EpochEndRequest struct {
	log.TopicPartition
	CurrentLeaderEpoch int32
	Epoch              int32
}

// EpochEndAnswer answers an EpochEndRequest.
type EpochEndAnswer struct {
	Err error
	End machine.EpochEnd
}
