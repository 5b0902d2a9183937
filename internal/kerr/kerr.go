// Package kerr is Strata's one table of Kafka error codes: which code the
// Kafka server answers for an error (Code), and which Strata error a code
// stands for when a client or a member reads it (ErrorOf). The server
// (package kafka), its client (kafka.Dial) and a cluster member's routing
// (package replica) all read this table; franz-go's kerr plays the same
// part for kgo.
//
// The errors are log's sentinels (the public vocabulary) and group's, and
// the few Kafka-protocol conditions that have no sentinel in log, defined
// here. Every layer's own sentinel for one of log's conditions matches
// log's (see internal/errs), so the table needs only log's.
package kerr

import (
	"context"
	"errors"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/errs"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/txn"
)

// Kafka's error codes that Strata uses (Kafka's protocol guide, "Error
// Codes").
const (
	UnknownServerError                 int16 = -1
	None                               int16 = 0
	OffsetOutOfRange                   int16 = 1
	CorruptMessage                     int16 = 2
	UnknownTopicOrPartition            int16 = 3
	LeaderNotAvailable                 int16 = 5
	NotLeaderOrFollower                int16 = 6
	RequestTimedOut                    int16 = 7
	MessageTooLarge                    int16 = 10
	OffsetMetadataTooLarge             int16 = 12
	CoordinatorLoadInProgress          int16 = 14
	CoordinatorNotAvailable            int16 = 15
	NotCoordinator                     int16 = 16
	InvalidTopicException              int16 = 17
	NotEnoughReplicas                  int16 = 19
	NotEnoughReplicasAfterAppend       int16 = 20
	InvalidRequiredAcks                int16 = 21
	IllegalGeneration                  int16 = 22
	InconsistentGroupProtocol          int16 = 23
	InvalidGroupID                     int16 = 24
	UnknownMemberID                    int16 = 25
	InvalidSessionTimeout              int16 = 26
	RebalanceInProgress                int16 = 27
	TopicAuthorizationFailed           int16 = 29
	GroupAuthorizationFailed           int16 = 30
	ClusterAuthorizationFailed         int16 = 31
	UnsupportedSaslMechanism           int16 = 33
	IllegalSaslState                   int16 = 34
	UnsupportedVersion                 int16 = 35
	TopicAlreadyExists                 int16 = 36
	InvalidPartitions                  int16 = 37
	InvalidReplicationFactor           int16 = 38
	InvalidReplicaAssignment           int16 = 39
	InvalidConfig                      int16 = 40
	InvalidRequest                     int16 = 42
	OutOfOrderSequenceNumber           int16 = 45
	InvalidProducerEpoch               int16 = 47
	InvalidTxnState                    int16 = 48
	InvalidProducerIDMapping           int16 = 49
	InvalidTransactionTimeout          int16 = 50
	ConcurrentTransactions             int16 = 51
	TransactionCoordinatorFenced       int16 = 52
	TransactionalIDAuthorizationFailed int16 = 53
	OperationNotAttempted              int16 = 55
	SaslAuthenticationFailed           int16 = 58
	UnknownProducerID                  int16 = 59
	NonEmptyGroup                      int16 = 68
	GroupIDNotFound                    int16 = 69
	ListenerNotFound                   int16 = 72
	FencedLeaderEpoch                  int16 = 74
	UnknownLeaderEpoch                 int16 = 75
	UnsupportedCompressionType         int16 = 76
	MemberIDRequired                   int16 = 79
	GroupMaxSizeReached                int16 = 81
	FencedInstanceID                   int16 = 82
	GroupSubscribedToTopic             int16 = 86
	InvalidRecord                      int16 = 87
	UnstableOffsetCommit               int16 = 88
	ProducerFenced                     int16 = 90
	ResourceNotFound                   int16 = 91
	DuplicateResource                  int16 = 92
	UnacceptableCredential             int16 = 93
	UnknownTopicID                     int16 = 100
	TransactionalIDNotFound            int16 = 105
	FencedMemberEpoch                  int16 = 110
	UnreleasedInstanceID               int16 = 111
	UnsupportedAssignor                int16 = 112
	StaleMemberEpoch                   int16 = 113
	MismatchedEndpointType             int16 = 114
	UnsupportedEndpointType            int16 = 115
	TransactionAbortable               int16 = 120
	InvalidRegularExpression           int16 = 128
	InvalidRecordState                 int16 = 121
	ShareSessionNotFound               int16 = 122
	InvalidShareSessionEpoch           int16 = 123
)

// Errors of Kafka-protocol conditions with a code of their own and no
// sentinel in log. Those that are one of log's conditions match log's.
var (
	// ErrNotCoordinator: the node does not coordinate the group (any more).
	ErrNotCoordinator = errors.New("kafka: not the group's coordinator")
	// ErrCoordinatorLoading: the coordinator is loading the group's state.
	ErrCoordinatorLoading = errors.New("kafka: group coordinator loading")
	// ErrOffsetMetadataTooLarge: an offset commit's metadata is too long.
	ErrOffsetMetadataTooLarge = errors.New("kafka: offset commit metadata too large")
	// ErrUnknownTopicID: a topic id that names no topic.
	ErrUnknownTopicID = errors.New("kafka: unknown topic id")
	// ErrInvalidRequest: a request no broker could serve as asked.
	ErrInvalidRequest = errs.Mark("kafka: invalid request", log.ErrInvalidRequest)
	// ErrInvalidPartitions: a partition count out of range.
	ErrInvalidPartitions = errs.Mark("kafka: invalid number of partitions", log.ErrInvalidPartitions)
	// ErrInvalidReplicationFactor: a replication factor out of range.
	ErrInvalidReplicationFactor = errs.Mark("kafka: invalid replication factor", log.ErrInvalidReplicationFactor)
	// ErrInvalidReplicaAssignment: a manual replica assignment, which
	// Strata does not take.
	ErrInvalidReplicaAssignment = errors.New("kafka: invalid replica assignment")
)

// Row is one row of the table: an error and its code.
type Row struct {
	Err  error
	Code int16
}

// table maps Strata's errors to Kafka's codes, in the order they are
// tried: the first whose error errors.Is matches wins. Read backwards
// (ErrorOf) it gives the error a code stands for; for codes listed more
// than once the first row is the reverse.
var table = []Row{
	{log.ErrUnknownTopic, UnknownTopicOrPartition},
	{log.ErrUnknownPartition, UnknownTopicOrPartition},
	{log.ErrOffsetOutOfRange, OffsetOutOfRange},
	{log.ErrRecordTooLarge, MessageTooLarge},
	{log.ErrCorrupt, CorruptMessage},
	{log.ErrNotEnoughReplicas, NotEnoughReplicas},
	{log.ErrNotLeader, NotLeaderOrFollower},
	// ErrUnknownProducerID matches ErrOutOfOrderSequence too: it goes first.
	{log.ErrUnknownProducerID, UnknownProducerID},
	{log.ErrOutOfOrderSequence, OutOfOrderSequenceNumber},
	{log.ErrProducerFenced, InvalidProducerEpoch},
	{group.ErrProducerFenced, InvalidProducerEpoch},
	{log.ErrInvalidSequence, InvalidRecord},
	{log.ErrTransactionsUnsupported, InvalidRecord},
	{log.ErrInvalidTopic, InvalidTopicException},
	{log.ErrTopicExists, TopicAlreadyExists},
	// Both are ErrInvalidConfig too: they go first.
	{log.ErrInvalidReplicationFactor, InvalidReplicationFactor},
	{log.ErrInvalidPartitions, InvalidPartitions},
	{log.ErrInvalidConfig, InvalidConfig},
	{log.ErrTimeout, RequestTimedOut},
	{context.DeadlineExceeded, RequestTimedOut},
	// A closed coordinator is a log.ErrClosed too: it goes first.
	{group.ErrClosed, CoordinatorNotAvailable},
	{log.ErrClosed, NotLeaderOrFollower}, // closing: the client retries elsewhere
	{group.ErrRebalanceInProgress, RebalanceInProgress},
	{group.ErrUnknownMember, UnknownMemberID},
	{group.ErrIllegalGeneration, IllegalGeneration},
	{group.ErrInvalidSessionTimeout, InvalidSessionTimeout},
	{group.ErrInvalidGroup, InvalidGroupID},
	{group.ErrInvalidRequest, InvalidRequest},
	{group.ErrInconsistentGroupProtocol, InconsistentGroupProtocol},
	{group.ErrMemberIDRequired, MemberIDRequired},
	{group.ErrFencedInstanceID, FencedInstanceID},
	{group.ErrGroupMaxSizeReached, GroupMaxSizeReached},
	{group.ErrNonEmptyGroup, NonEmptyGroup},
	{group.ErrGroupNotFound, GroupIDNotFound},
	{group.ErrGroupSubscribedToTopic, GroupSubscribedToTopic},
	{group.ErrFencedMemberEpoch, FencedMemberEpoch},
	{group.ErrUnreleasedInstanceID, UnreleasedInstanceID},
	{group.ErrUnsupportedAssignor, UnsupportedAssignor},
	{group.ErrStaleMemberEpoch, StaleMemberEpoch},
	{group.ErrInvalidRegularExpression, InvalidRegularExpression},
	{share.ErrInvalidRecordState, InvalidRecordState},
	{ErrNotCoordinator, NotCoordinator},
	{ErrCoordinatorLoading, CoordinatorLoadInProgress},
	{ErrOffsetMetadataTooLarge, OffsetMetadataTooLarge},
	{ErrUnknownTopicID, UnknownTopicID},
	{ErrInvalidRequest, InvalidRequest},
	{ErrInvalidPartitions, InvalidPartitions},
	{ErrInvalidReplicationFactor, InvalidReplicationFactor},
	{ErrInvalidReplicaAssignment, InvalidReplicaAssignment},
	// Transactions: the partition's and the coordinator's (package txn).
	{log.ErrInvalidTxnState, InvalidTxnState},
	{log.ErrTransactionCoordinatorFenced, TransactionCoordinatorFenced},
	{log.ErrTxnCoordinatorLoading, CoordinatorLoadInProgress},
	{txn.ErrClosed, NotCoordinator},
	{txn.ErrConcurrentTransactions, ConcurrentTransactions},
	{txn.ErrProducerFenced, ProducerFenced},
	{txn.ErrInvalidProducerEpoch, InvalidProducerEpoch},
	{txn.ErrInvalidProducerIDMapping, InvalidProducerIDMapping},
	{txn.ErrInvalidTxnState, InvalidTxnState},
	{txn.ErrInvalidTransactionTimeout, InvalidTransactionTimeout},
	{txn.ErrTransactionAbortable, TransactionAbortable},
	{txn.ErrInvalidRequest, InvalidRequest},
	// Any other invalid request (log.Broker's Fetch of an unknown
	// isolation, the controller's): INVALID_REQUEST, as replica answered.
	{log.ErrInvalidRequest, InvalidRequest},
}

// readOnly are codes a reader takes for a Strata error that the server
// answers with another code: a leader being elected, or an epoch the broker
// does not share, is to a client a broker that is not (yet) the leader it
// wants, log.ErrNotLeader, which it retries.
var readOnly = map[int16]error{
	LeaderNotAvailable: log.ErrNotLeader,
	FencedLeaderEpoch:  log.ErrNotLeader,
	UnknownLeaderEpoch: log.ErrNotLeader,
}

// Code returns Kafka's code for err, as a Kafka server answers it: None
// for nil, UnknownServerError for an error the table lacks.
func Code(err error) int16 {
	if err == nil {
		return None
	}
	for _, r := range table {
		if errors.Is(err, r.Err) {
			return r.Code
		}
	}
	return UnknownServerError
}

// ErrorOf returns the Strata error a Kafka code stands for, as a reader of
// the code takes it: nil for None and for a code the table lacks.
// Code(ErrorOf(c)) is c for every code of the table.
func ErrorOf(code int16) error {
	if code == None {
		return nil
	}
	for _, r := range table {
		if r.Code == code {
			return r.Err
		}
	}
	return readOnly[code]
}

// Rows returns a copy of the table, in the order Code tries it.
func Rows() []Row { return append([]Row(nil), table...) }
