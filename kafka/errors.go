package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

// Kafka's error codes that Strata uses (Kafka's protocol guide, "Error
// Codes").
const (
	errUnknownServerError                 int16 = -1
	errNone                               int16 = 0
	errOffsetOutOfRange                   int16 = 1
	errCorruptMessage                     int16 = 2
	errUnknownTopicOrPartition            int16 = 3
	errLeaderNotAvailable                 int16 = 5
	errNotLeaderOrFollower                int16 = 6
	errRequestTimedOut                    int16 = 7
	errMessageTooLarge                    int16 = 10
	errOffsetMetadataTooLarge             int16 = 12
	errCoordinatorLoadInProgress          int16 = 14
	errCoordinatorNotAvailable            int16 = 15
	errNotCoordinator                     int16 = 16
	errInvalidTopicException              int16 = 17
	errNotEnoughReplicas                  int16 = 19
	errInvalidRequiredAcks                int16 = 21
	errIllegalGeneration                  int16 = 22
	errInconsistentGroupProtocol          int16 = 23
	errInvalidGroupID                     int16 = 24
	errUnknownMemberID                    int16 = 25
	errInvalidSessionTimeout              int16 = 26
	errRebalanceInProgress                int16 = 27
	errUnsupportedSaslMechanism           int16 = 33
	errIllegalSaslState                   int16 = 34
	errUnsupportedVersion                 int16 = 35
	errTopicAlreadyExists                 int16 = 36
	errInvalidPartitions                  int16 = 37
	errInvalidReplicationFactor           int16 = 38
	errInvalidReplicaAssignment           int16 = 39
	errInvalidConfig                      int16 = 40
	errInvalidRequest                     int16 = 42
	errOutOfOrderSequenceNumber           int16 = 45
	errInvalidProducerEpoch               int16 = 47
	errTransactionalIDAuthorizationFailed int16 = 53
	errSaslAuthenticationFailed           int16 = 58
	errUnknownProducerID                  int16 = 59
	errNonEmptyGroup                      int16 = 68
	errGroupIDNotFound                    int16 = 69
	errUnsupportedCompressionType         int16 = 76
	errMemberIDRequired                   int16 = 79
	errGroupMaxSizeReached                int16 = 81
	errFencedInstanceID                   int16 = 82
	errListenerNotFound                   int16 = 72
	errFencedLeaderEpoch                  int16 = 74
	errUnknownLeaderEpoch                 int16 = 75
	errInvalidRecord                      int16 = 87
	errUnknownTopicID                     int16 = 100
	errMismatchedEndpointType             int16 = 114
	errUnsupportedEndpointType            int16 = 115
)

// errorTable maps Strata's errors to Kafka's codes, in the order they are
// tried: the first whose error errors.Is matches wins. Reading it backwards
// (codeError) gives the Strata error a Kafka code stands for; for codes
// listed twice the first row is the reverse.
var errorTable = []struct {
	err  error
	code int16
}{
	{log.ErrUnknownTopic, errUnknownTopicOrPartition},
	{log.ErrUnknownPartition, errUnknownTopicOrPartition},
	{log.ErrOffsetOutOfRange, errOffsetOutOfRange},
	{log.ErrRecordTooLarge, errMessageTooLarge},
	{log.ErrCorrupt, errCorruptMessage},
	{log.ErrNotEnoughReplicas, errNotEnoughReplicas},
	{log.ErrNotLeader, errNotLeaderOrFollower},
	// ErrUnknownProducerID matches ErrOutOfOrderSequence too: it goes first.
	{log.ErrUnknownProducerID, errUnknownProducerID},
	{log.ErrOutOfOrderSequence, errOutOfOrderSequenceNumber},
	{log.ErrProducerFenced, errInvalidProducerEpoch},
	{log.ErrInvalidSequence, errInvalidRecord},
	{log.ErrTransactionsUnsupported, errInvalidRecord},
	{log.ErrInvalidTopic, errInvalidTopicException},
	{log.ErrTopicExists, errTopicAlreadyExists},
	// Both are ErrInvalidConfig too: they go first.
	{log.ErrInvalidReplicationFactor, errInvalidReplicationFactor},
	{log.ErrInvalidPartitions, errInvalidPartitions},
	{log.ErrInvalidConfig, errInvalidConfig},
	{log.ErrTimeout, errRequestTimedOut},
	{context.DeadlineExceeded, errRequestTimedOut},
	// A closed coordinator is a log.ErrClosed too: it goes first.
	{group.ErrClosed, errCoordinatorNotAvailable},
	{log.ErrClosed, errNotLeaderOrFollower}, // closing: the client retries elsewhere
	{group.ErrRebalanceInProgress, errRebalanceInProgress},
	{group.ErrUnknownMember, errUnknownMemberID},
	{group.ErrIllegalGeneration, errIllegalGeneration},
	{group.ErrInvalidSessionTimeout, errInvalidSessionTimeout},
	{group.ErrInvalidGroup, errInvalidGroupID},
	{group.ErrInvalidRequest, errInvalidRequest},
	{group.ErrInconsistentGroupProtocol, errInconsistentGroupProtocol},
	{group.ErrMemberIDRequired, errMemberIDRequired},
	{group.ErrFencedInstanceID, errFencedInstanceID},
	{group.ErrGroupMaxSizeReached, errGroupMaxSizeReached},
	{group.ErrNonEmptyGroup, errNonEmptyGroup},
	{group.ErrGroupNotFound, errGroupIDNotFound},
	{errNotCoordinatorErr, errNotCoordinator},
	{errCoordinatorLoadingErr, errCoordinatorLoadInProgress},
	{errOffsetMetadataTooLargeErr, errOffsetMetadataTooLarge},
	{errUnknownTopicIDErr, errUnknownTopicID},
	{errInvalidRequestErr, errInvalidRequest},
	{errInvalidPartitionsErr, errInvalidPartitions},
	{errInvalidReplicationFactorErr, errInvalidReplicationFactor},
	{errInvalidReplicaAssignmentErr, errInvalidReplicaAssignment},
}

// readCodes are codes that a client reads as a Strata error that the
// server answers with another code: a leader being elected, or an epoch
// the broker does not share, is to a client a broker that is not (yet) the
// leader it wants, ErrNotLeader, which it retries.
var readCodes = map[int16]error{
	errLeaderNotAvailable: log.ErrNotLeader,
	errFencedLeaderEpoch:  log.ErrNotLeader,
	errUnknownLeaderEpoch: log.ErrNotLeader,
}

// errUnknownTopicIDErr is the error of a topic id that names no topic.
var errUnknownTopicIDErr = errors.New("kafka: unknown topic id")

// Errors of group coordination that Strata's own coordinator never
// returns but a Kafka cluster does: the client looks the coordinator up
// again and retries on the first two.
var (
	errNotCoordinatorErr         = errors.New("kafka: not the group's coordinator")
	errCoordinatorLoadingErr     = errors.New("kafka: group coordinator loading")
	errOffsetMetadataTooLargeErr = errors.New("kafka: offset commit metadata too large")
)

// errorCode returns Kafka's code for err: 0 for nil, UNKNOWN_SERVER_ERROR
// for an error not in the table.
func errorCode(err error) int16 {
	if err == nil {
		return errNone
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return errUnknownServerError
}

// Error is the error a Kafka error code stands for, as a client of any
// Kafka cluster receives it. It matches the Strata error of the code with
// errors.Is (an OFFSET_OUT_OF_RANGE is log.ErrOffsetOutOfRange).
type Error struct {
	Code int16
	err  error // the Strata error, nil if the code has none
}

func (e *Error) Error() string {
	if e.err != nil {
		return fmt.Sprintf("kafka: error code %d: %v", e.Code, e.err)
	}
	return fmt.Sprintf("kafka: error code %d", e.Code)
}

// Unwrap returns the Strata error of the code, if any.
func (e *Error) Unwrap() error { return e.err }

// codeError returns the error for a Kafka error code: nil for 0, an *Error
// that unwraps to the Strata error of the code otherwise.
func codeError(code int16) error {
	if code == errNone {
		return nil
	}
	for _, e := range errorTable {
		if e.code == code {
			return &Error{Code: code, err: e.err}
		}
	}
	return &Error{Code: code, err: readCodes[code]}
}

// ErrorCode returns Kafka's error code for err, as the server answers it:
// 0 for nil, UNKNOWN_SERVER_ERROR (-1) for an error the table lacks.
// Other Kafka-protocol code (the cluster's data plane) uses it to share
// the one table.
func ErrorCode(err error) int16 { return errorCode(err) }

// CodeError returns the error of a Kafka error code: nil for 0, else an
// *Error that matches the code's Strata error with errors.Is.
func CodeError(code int16) error { return codeError(code) }
