package replica_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/replica/internal/machine"
)

func TestAlterResultOf(t *testing.T) {
	p := machine.ProposeISR{ISR: []int{1, 2}, LeaderEpoch: 5, PartitionEpoch: 10}
	wrap := func(err error) error { return fmt.Errorf("alter t-0: %w", err) }
	cases := []struct {
		name  string
		state controller.PartitionState
		err   error
		want  machine.AlterPartitionResult
		known bool
	}{
		{"accepted", controller.PartitionState{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 11, ISR: []int{1, 2}}, nil, machine.AlterAccepted, true},
		{"answered by a later leader epoch", controller.PartitionState{Leader: 2, LeaderEpoch: 6, PartitionEpoch: 11, ISR: []int{2}}, nil, machine.AlterStale, true},
		{"invalid ISR", controller.PartitionState{}, wrap(controller.ErrInvalidISR), machine.AlterRejected, true},
		{"ineligible replica", controller.PartitionState{}, wrap(controller.ErrIneligibleReplica), machine.AlterRejected, true},
		{"stale partition epoch", controller.PartitionState{}, wrap(controller.ErrStalePartitionEpoch), machine.AlterStale, true},
		{"fenced leader epoch", controller.PartitionState{}, wrap(controller.ErrFencedLeaderEpoch), machine.AlterStale, true},
		{"not the leader", controller.PartitionState{}, wrap(controller.ErrNotPartitionLeader), machine.AlterStale, true},
		{"leadership lost: unknown", controller.PartitionState{}, wrap(controller.ErrLeadershipLost), 0, false},
		{"no controller: unknown", controller.PartitionState{}, &controller.NotControllerError{}, 0, false},
		{"context: unknown", controller.PartitionState{}, context.DeadlineExceeded, 0, false},
		{"anything else: unknown", controller.PartitionState{}, errors.New("boom"), 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ans, ok := machine.AlterResultOf(p, c.state, c.err)
			require.Equal(t, c.known, ok)
			if !ok {
				return
			}
			require.Equal(t, c.want, ans.Result)
			require.Equal(t, int32(5), ans.LeaderEpoch)
			require.Equal(t, int32(10), ans.BasedOn)
			if c.want == machine.AlterAccepted {
				require.Equal(t, []int{1, 2}, ans.ISR)
				require.Equal(t, int32(11), ans.PartitionEpoch)
			}
		})
	}
}
