package replica

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
)

// The member reads and answers Kafka codes with kerr's table, plus the
// replication path's own conditions, both ways: a code it reads from
// another member it answers again as the same code.
func TestCodesAreKerrs(t *testing.T) {
	for _, r := range kerr.Rows() {
		if got := codeOf(errOf(r.Code)); got != r.Code {
			t.Errorf("code %d read as %v is answered as %d", r.Code, errOf(r.Code), got)
		}
	}
	for _, c := range []struct {
		err  error
		code int16
	}{
		{ErrNotReplica, kerr.NotLeaderOrFollower},
		{mapReplicaErr(ErrNotEnoughReplicasAfterAppend), kerr.NotEnoughReplicasAfterAppend},
		{ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
		{log.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
		{log.ErrNotLeader, kerr.NotLeaderOrFollower},
		{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	} {
		if got := codeOf(fmt.Errorf("t-0: %w", c.err)); got != c.code {
			t.Errorf("codeOf(%v) = %d, want %d", c.err, got, c.code)
		}
	}
	// Read back, the replication path's conditions are its own sentinels;
	// after an append, not enough replicas is log's too, as the leader's own
	// produce answers it.
	for code, want := range map[int16]error{
		kerr.FencedLeaderEpoch:            ErrFencedLeaderEpoch,
		kerr.UnknownLeaderEpoch:           ErrUnknownLeaderEpoch,
		kerr.NotEnoughReplicasAfterAppend: ErrNotEnoughReplicasAfterAppend,
	} {
		if err := errOf(code); !errors.Is(err, want) {
			t.Errorf("errOf(%d) = %v, want %v", code, err, want)
		}
	}
	if err := errOf(kerr.NotEnoughReplicasAfterAppend); !errors.Is(err, log.ErrNotEnoughReplicas) {
		t.Errorf("errOf(NOT_ENOUGH_REPLICAS_AFTER_APPEND) = %v, not a log.ErrNotEnoughReplicas", err)
	}
	// A code no table has is still an error.
	if err := errOf(9999); err == nil {
		t.Error("errOf(9999) = nil")
	}
}
