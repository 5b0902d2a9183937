package replica_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// replica's names for log's conditions are log's sentinels: errors.Is holds
// with either name, whichever package made the error.
func TestErrorsAreLogs(t *testing.T) {
	for _, c := range []struct {
		name      string
		rep, logs error
	}{
		{"ErrNotLeader", replica.ErrNotLeader, log.ErrNotLeader},
		{"ErrOffsetOutOfRange", replica.ErrOffsetOutOfRange, log.ErrOffsetOutOfRange},
		{"ErrNotEnoughReplicas", replica.ErrNotEnoughReplicas, log.ErrNotEnoughReplicas},
		{"ErrUnreachable", replica.ErrUnreachable, log.ErrUnreachable},
		{"ErrInvalidConfig", replica.ErrInvalidConfig, log.ErrInvalidConfig},
	} {
		fromReplica := fmt.Errorf("t-0: %w", c.rep)
		fromLog := fmt.Errorf("t-0: %w", c.logs)
		if !errors.Is(fromReplica, c.logs) || !errors.Is(fromLog, c.rep) {
			t.Errorf("%s: errors.Is(replica's, log's) = %v, errors.Is(log's, replica's) = %v; want both",
				c.name, errors.Is(fromReplica, c.logs), errors.Is(fromLog, c.rep))
		}
	}
	// Conditions of replication alone are not log's.
	for _, err := range []error{replica.ErrFencedLeaderEpoch, replica.ErrUnknownLeaderEpoch, replica.ErrNotReplica, replica.ErrNotCaughtUp} {
		for _, l := range []error{log.ErrNotLeader, log.ErrOffsetOutOfRange, log.ErrNotEnoughReplicas, log.ErrUnreachable, log.ErrInvalidConfig} {
			if errors.Is(err, l) {
				t.Errorf("%v is a %v", err, l)
			}
		}
	}
}

// Start refuses a Config that cannot work with an error that is
// log.ErrInvalidConfig under either name, and says what is wrong.
func TestStartInvalidConfigIsLogs(t *testing.T) {
	_, err := replica.Start(replica.Config{ID: 0, Dir: t.TempDir(), Addr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0"})
	if !errors.Is(err, log.ErrInvalidConfig) || !errors.Is(err, replica.ErrInvalidConfig) {
		t.Fatalf("Start with ID 0: %v, want a log.ErrInvalidConfig", err)
	}
	if got := err.Error(); got != "log: invalid config: replica: ID 0, want > 0" {
		t.Errorf("Start with ID 0: %q", got)
	}
}
