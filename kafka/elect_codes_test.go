package kafka

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/log"
)

// The per-partition codes of ElectLeaders and AlterPartitionReassignments
// (partitionCode): each API's own sentinels, wrapped or not, then unknown
// topics and partitions, then the server's table.
func TestPartitionCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("t-0: %w", err) }
	for _, tc := range []struct {
		code func(error) int16
		err  error
		want int16
	}{
		{electCode, ErrElectionNotNeeded, codeElectionNotNeeded},
		{electCode, wrap(ErrPreferredLeaderNotAvailable), codePreferredLeaderNotAvailable},
		{electCode, ErrEligibleLeadersNotAvailable, codeEligibleLeadersNotAvailable},
		{electCode, wrap(log.ErrUnknownTopic), codeUnknownTopicPartition},
		{electCode, log.ErrUnknownPartition, codeUnknownTopicPartition},
		{electCode, ErrNoReassignmentInProgress, errorCode(ErrNoReassignmentInProgress)}, // not election's own: the table's
		{reassignCode, wrap(ErrNoReassignmentInProgress), codeNoReassignmentInProgress},
		{reassignCode, ErrInvalidReplicaAssignment, codeInvalidReplicaAssignmentErr},
		{reassignCode, log.ErrUnknownPartition, codeUnknownTopicPartition},
		{reassignCode, log.ErrInvalidReplicationFactor, errorCode(log.ErrInvalidReplicationFactor)},
		{reassignCode, errors.New("something else"), errorCode(errors.New("something else"))},
	} {
		if got := tc.code(tc.err); got != tc.want {
			t.Errorf("%v: code %d, want %d", tc.err, got, tc.want)
		}
	}
	if electCode(ErrElectionNotNeeded) == reassignCode(ErrElectionNotNeeded) {
		t.Error("ELECTION_NOT_NEEDED is election's own only")
	}
}
