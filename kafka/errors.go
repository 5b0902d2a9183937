package kafka

import (
	"fmt"

	"github.com/strata-log/strata/internal/kerr"
)

// Kafka's error codes that Strata uses, by the names the handlers know
// them by: internal/kerr has the one table.
const (
	errUnknownServerError                 = kerr.UnknownServerError
	errNone                               = kerr.None
	errOffsetOutOfRange                   = kerr.OffsetOutOfRange
	errCorruptMessage                     = kerr.CorruptMessage
	errUnknownTopicOrPartition            = kerr.UnknownTopicOrPartition
	errLeaderNotAvailable                 = kerr.LeaderNotAvailable
	errNotLeaderOrFollower                = kerr.NotLeaderOrFollower
	errRequestTimedOut                    = kerr.RequestTimedOut
	errMessageTooLarge                    = kerr.MessageTooLarge
	errOffsetMetadataTooLarge             = kerr.OffsetMetadataTooLarge
	errCoordinatorLoadInProgress          = kerr.CoordinatorLoadInProgress
	errCoordinatorNotAvailable            = kerr.CoordinatorNotAvailable
	errNotCoordinator                     = kerr.NotCoordinator
	errInvalidTopicException              = kerr.InvalidTopicException
	errNotEnoughReplicas                  = kerr.NotEnoughReplicas
	errInvalidRequiredAcks                = kerr.InvalidRequiredAcks
	errIllegalGeneration                  = kerr.IllegalGeneration
	errInconsistentGroupProtocol          = kerr.InconsistentGroupProtocol
	errInvalidGroupID                     = kerr.InvalidGroupID
	errUnknownMemberID                    = kerr.UnknownMemberID
	errInvalidSessionTimeout              = kerr.InvalidSessionTimeout
	errRebalanceInProgress                = kerr.RebalanceInProgress
	errUnsupportedSaslMechanism           = kerr.UnsupportedSaslMechanism
	errIllegalSaslState                   = kerr.IllegalSaslState
	errUnsupportedVersion                 = kerr.UnsupportedVersion
	errTopicAlreadyExists                 = kerr.TopicAlreadyExists
	errInvalidPartitions                  = kerr.InvalidPartitions
	errInvalidReplicationFactor           = kerr.InvalidReplicationFactor
	errInvalidReplicaAssignment           = kerr.InvalidReplicaAssignment
	errInvalidConfig                      = kerr.InvalidConfig
	errInvalidRequest                     = kerr.InvalidRequest
	errOutOfOrderSequenceNumber           = kerr.OutOfOrderSequenceNumber
	errInvalidProducerEpoch               = kerr.InvalidProducerEpoch
	errTransactionalIDAuthorizationFailed = kerr.TransactionalIDAuthorizationFailed
	errSaslAuthenticationFailed           = kerr.SaslAuthenticationFailed
	errUnknownProducerID                  = kerr.UnknownProducerID
	errNonEmptyGroup                      = kerr.NonEmptyGroup
	errGroupIDNotFound                    = kerr.GroupIDNotFound
	errUnsupportedCompressionType         = kerr.UnsupportedCompressionType
	errMemberIDRequired                   = kerr.MemberIDRequired
	errGroupMaxSizeReached                = kerr.GroupMaxSizeReached
	errFencedInstanceID                   = kerr.FencedInstanceID
	errListenerNotFound                   = kerr.ListenerNotFound
	errFencedLeaderEpoch                  = kerr.FencedLeaderEpoch
	errUnknownLeaderEpoch                 = kerr.UnknownLeaderEpoch
	errInvalidRecord                      = kerr.InvalidRecord
	errUnknownTopicID                     = kerr.UnknownTopicID
	errMismatchedEndpointType             = kerr.MismatchedEndpointType
	errUnsupportedEndpointType            = kerr.UnsupportedEndpointType
)

// errorTable is internal/kerr's table, the rows Code tries in order, as
// errors_test reads it.
var errorTable = func() []struct {
	err  error
	code int16
} {
	rows := kerr.Rows()
	t := make([]struct {
		err  error
		code int16
	}, len(rows))
	for i, r := range rows {
		t[i].err, t[i].code = r.Err, r.Code
	}
	return t
}()

// Errors of Kafka-protocol conditions with no sentinel in log (kerr's).
var (
	errUnknownTopicIDErr = kerr.ErrUnknownTopicID
	// Errors of group coordination that Strata's own coordinator never
	// returns but a Kafka cluster does: the client looks the coordinator up
	// again and retries on the first two.
	errNotCoordinatorErr         = kerr.ErrNotCoordinator
	errCoordinatorLoadingErr     = kerr.ErrCoordinatorLoading
	errOffsetMetadataTooLargeErr = kerr.ErrOffsetMetadataTooLarge
)

// errorCode returns Kafka's code for err: 0 for nil, UNKNOWN_SERVER_ERROR
// for an error not in the table.
func errorCode(err error) int16 { return kerr.Code(err) }

// Error is the error a Kafka error code stands for, as a client of any
// Kafka cluster receives it. It matches the Strata error of the code with
// errors.Is (an OFFSET_OUT_OF_RANGE is log.ErrOffsetOutOfRange).
type Error struct {
	Code int16
	err  error // the Strata error, nil if the code has none
}

func (e *Error) Error() string {
	if e.err != nil {
		return fmt.Sprintf("kafka: %s (error code %d): %v", kerr.Name(e.Code), e.Code, e.err)
	}
	return fmt.Sprintf("kafka: %s (error code %d)", kerr.Name(e.Code), e.Code)
}

// Unwrap returns the Strata error of the code, if any.
func (e *Error) Unwrap() error { return e.err }

// codeError returns the error for a Kafka error code: nil for 0, an *Error
// that unwraps to the Strata error of the code otherwise.
func codeError(code int16) error {
	if code == errNone {
		return nil
	}
	return &Error{Code: code, err: kerr.ErrorOf(code)}
}

// ErrorCode returns Kafka's error code for err, as the server answers it:
// 0 for nil, UNKNOWN_SERVER_ERROR (-1) for an error the table lacks.
// Other Kafka-protocol code (the cluster's data plane) uses it to share
// the one table.
func ErrorCode(err error) int16 { return errorCode(err) }

// CodeError returns the error of a Kafka error code: nil for 0, else an
// *Error that matches the code's Strata error with errors.Is.
func CodeError(code int16) error { return codeError(code) }
