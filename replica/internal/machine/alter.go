package machine

import (
	"errors"

	"github.com/strata-log/strata/controller"
)

// AlterResultOf classifies the outcome of controller.AlterPartition for the
// proposal p: the answer to step the PartitionMachine with, and ok false
// when the outcome is not known (no controller reachable, leadership lost
// after proposing, a closed controller, a context ended): the driver then
// retries the same proposal, as Kafka's AlterPartitionManager does.
func AlterResultOf(p ProposeISR, state controller.PartitionState, err error) (ans AlterPartitionAnswer, ok bool) {
	ans = AlterPartitionAnswer{LeaderEpoch: p.LeaderEpoch, BasedOn: p.PartitionEpoch}
	switch {
	case err == nil:
		if state.LeaderEpoch != p.LeaderEpoch {
			ans.Result = AlterStale
			return ans, true
		}
		ans.Result, ans.ISR, ans.PartitionEpoch = AlterAccepted, state.ISR, state.PartitionEpoch
		return ans, true
	case errors.Is(err, controller.ErrInvalidISR), errors.Is(err, controller.ErrIneligibleReplica):
		ans.Result = AlterRejected
		return ans, true
	case errors.Is(err, controller.ErrNotPartitionLeader), errors.Is(err, controller.ErrFencedLeaderEpoch),
		errors.Is(err, controller.ErrStalePartitionEpoch), errors.Is(err, controller.ErrUnknownTopic),
		errors.Is(err, controller.ErrUnknownPartition), errors.Is(err, controller.ErrStaleBrokerEpoch):
		ans.Result = AlterStale
		return ans, true
	}
	return AlterPartitionAnswer{}, false
}
