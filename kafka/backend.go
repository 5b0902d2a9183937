package kafka

import (
	"context"
	"crypto/sha256"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/txn"
)

// Backend is what a Server serves: the topics and partitions of a broker.
// *log.Broker implements it (a standalone node: this server is the leader
// of every partition), and so does the unexported adapter a cluster member
// (package replica) hands to Listen. Its errors are log's
// sentinels (log.ErrUnknownTopic, log.ErrNotLeader, ...), which the server
// maps to Kafka's error codes.
type Backend interface {
	// Topics returns the names of the topics clients may see, sorted.
	Topics() []string
	// Partitions returns the number of partitions of a topic.
	Partitions(ctx context.Context, topic string) (int, error)
	// TopicConfig returns a topic's configuration, defaults applied.
	TopicConfig(topic string) (log.TopicConfig, error)
	// CreateTopicContext creates a topic (log.ErrTopicExists,
	// log.ErrInvalidTopic, log.ErrInvalidConfig), within ctx: the
	// request's timeout. The topic admin verbs take a context here because
	// a cluster member waits on its controller quorum; *log.Broker's are
	// its CreateTopic and DeleteTopic with a context.
	CreateTopicContext(ctx context.Context, name string, cfg log.TopicConfig) error
	// DeleteTopicContext deletes a topic and its data (log.ErrUnknownTopic),
	// within ctx.
	DeleteTopicContext(ctx context.Context, name string) error
	// Produce appends one record batch, as a Kafka client sent it, to a
	// partition (see log.DataClient).
	Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (baseOffset int64, err error)
	// Fetch reads record batches, waiting up to MaxWait for MinBytes (see
	// log.DataClient).
	Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error)
	// ListOffset returns log.EarliestOffset, log.LatestOffset or the first
	// offset at or after a timestamp in ms.
	ListOffset(ctx context.Context, tp log.TopicPartition, at int64) (int64, error)
	// GroupCoordinator returns the coordinator of the consumer groups this
	// node coordinates (every group, on a standalone broker); nil: the
	// group APIs are not served. Commits go to its OffsetStore.
	GroupCoordinator() *group.Coordinator
}

var (
	_ Backend             = (*log.Broker)(nil)
	_ BatchBorrower       = (*log.Broker)(nil)
	_ OffsetsTopicCreator = (*log.Broker)(nil)
	_ TxnBackend          = (*log.Broker)(nil)
)

// OffsetsTopicCreator is implemented by a standalone Backend (*log.Broker)
// that creates Kafka's __consumer_offsets on first use: FindCoordinator
// for a group creates it, as Kafka's does, so that clients see it in
// Metadata once they have looked for a coordinator. (A GroupRouter creates
// it in CoordinatorFor.)
type OffsetsTopicCreator interface {
	CreateOffsetsTopic() error
}

// TxnBackend is what a Backend implements to serve transactions (KIP-98):
// InitProducerId with a transactional id, FindCoordinator for one,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, the
// transactional produce's checks and the transaction admin APIs.
// *log.Broker does, coordinating every transactional id itself.
type TxnBackend interface {
	// TxnCoordinator returns the coordinator of transactionalID on this
	// node, waiting until ctx ends while it loads
	// (log.ErrTxnCoordinatorLoading then).
	TxnCoordinator(ctx context.Context, transactionalID string) (*txn.Coordinator, error)
	// WriteTxnMarker appends a COMMIT or ABORT marker to a partition this
	// node leads (WriteTxnMarkers).
	WriteTxnMarker(ctx context.Context, tp log.TopicPartition, m batch.Marker) error
	// Producers returns the producers a partition this node leads knows
	// (DescribeProducers).
	Producers(ctx context.Context, tp log.TopicPartition) ([]log.ProducerInfo, error)
}

// topicID is the id a topic is known by in Metadata v10+, Fetch v13+ and
// Produce v13+: derived from its name, so that every server over the same
// topics gives the same ids. (A topic deleted and created again keeps its
// id: Strata has no topic incarnations yet.)
func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("strata topic id\x00" + name))
	var id [16]byte
	copy(id[:], sum[:16])
	if id == ([16]byte{}) {
		id[0] = 1 // the zero id means "no id"
	}
	return id
}

// TxnOffsetCommitter is a backend whose group coordinators keep
// transactional offset commits (TxnOffsetCommit, KIP-98): *log.Broker,
// whose __consumer_offsets takes a producer's transactional batches and
// the markers that end them. The server commits through the group's
// coordinator (group.Coordinator.TxnCommit); this says it can.
type TxnOffsetCommitter interface {
	TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error
}
