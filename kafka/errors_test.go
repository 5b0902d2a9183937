package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

func TestErrorTableBothWays(t *testing.T) {
	cases := []struct {
		err  error
		code int16
	}{
		{nil, errNone},
		{log.ErrUnknownTopic, 3},
		{log.ErrUnknownPartition, 3},
		{&log.OffsetOutOfRangeError{Requested: 9}, 1},
		{&log.RecordTooLargeError{Size: 9, Max: 1}, 10},
		{log.ErrCorrupt, 2},
		{log.ErrNotEnoughReplicas, 19},
		{log.ErrNotLeader, 6},
		{log.ErrInvalidTopic, 17},
		{log.ErrTopicExists, 36},
		{log.ErrInvalidConfig, 40},
		{log.ErrInvalidReplicationFactor, 38},
		{log.ErrInvalidPartitions, 37},
		{errInvalidReplicationFactorErr, 38},
		{errInvalidPartitionsErr, 37},
		{log.ErrTimeout, 7},
		{context.DeadlineExceeded, 7},
		{log.ErrClosed, 6},
		{group.ErrRebalanceInProgress, 27},
		{group.ErrUnknownMember, 25},
		{group.ErrIllegalGeneration, 22},
		{group.ErrInvalidSessionTimeout, 26},
		{group.ErrInvalidGroup, 24},
		{group.ErrClosed, 15},
		{group.ErrInvalidRequest, 42},
		{group.ErrInconsistentGroupProtocol, 23},
		{group.ErrMemberIDRequired, 79},
		{group.ErrFencedInstanceID, 82},
		{group.ErrNonEmptyGroup, 68},
		{group.ErrGroupNotFound, 69},
		{errNotCoordinatorErr, 16},
		{errCoordinatorLoadingErr, 14},
		{errOffsetMetadataTooLargeErr, 12},
		{errors.New("something else"), -1},
	}
	for _, tc := range cases {
		wrapped := tc.err
		if wrapped != nil {
			wrapped = fmt.Errorf("context: %w", tc.err)
		}
		require.Equal(t, tc.code, errorCode(wrapped), "%v", tc.err)
	}
	// Every row maps, and the reverse of its code is an error that maps
	// to the same code (the first row with that code).
	for _, row := range errorTable {
		code := errorCode(row.err)
		require.Equal(t, row.code, code, "%v", row.err)
		back := codeError(code)
		var ke *Error
		require.ErrorAs(t, back, &ke)
		require.Equal(t, code, ke.Code)
		require.Equal(t, code, errorCode(errors.Unwrap(back)), "%v", row.err)
	}
	// What a client of Kafka sees.
	require.NoError(t, codeError(0))
	require.ErrorIs(t, codeError(1), log.ErrOffsetOutOfRange)
	require.ErrorIs(t, codeError(3), log.ErrUnknownTopic)
	require.ErrorIs(t, codeError(6), log.ErrNotLeader)
	require.ErrorIs(t, codeError(5), log.ErrNotLeader, "LEADER_NOT_AVAILABLE: one is being elected")
	require.ErrorIs(t, codeError(74), log.ErrNotLeader, "FENCED_LEADER_EPOCH")
	require.ErrorIs(t, codeError(75), log.ErrNotLeader, "UNKNOWN_LEADER_EPOCH")
	require.ErrorIs(t, codeError(10), log.ErrRecordTooLarge)
	require.ErrorIs(t, codeError(19), log.ErrNotEnoughReplicas)
	require.ErrorIs(t, codeError(27), log.ErrRebalanceInProgress)
	require.ErrorIs(t, codeError(25), log.ErrUnknownMember)
	require.ErrorIs(t, codeError(22), log.ErrIllegalGeneration)
	require.ErrorIs(t, codeError(7), log.ErrTimeout)
	require.ErrorIs(t, codeError(38), log.ErrInvalidReplicationFactor)
	require.ErrorIs(t, codeError(38), log.ErrInvalidConfig, "a client checking for an invalid config still matches")
	require.ErrorIs(t, codeError(37), log.ErrInvalidPartitions)
	unknown := codeError(9999)
	require.Error(t, unknown)
	require.Nil(t, errors.Unwrap(unknown))
	require.Contains(t, unknown.Error(), "9999")
}
