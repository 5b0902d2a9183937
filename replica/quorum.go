package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
)

// DescribeQuorum returns the controller quorum as the active controller
// describes it: its voters and the brokers that follow the metadata
// without a vote, with what each has applied (Kafka's DescribeQuorum).
func (b *Broker) DescribeQuorum(ctx context.Context) (controller.QuorumInfo, error) {
	return b.ctl.DescribeQuorum(ctx)
}

// AddRaftVoter promotes member id to a controller voter (KIP-853's
// AddRaftVoter): it must be a running broker only (started with Peers
// naming the voters), and is promoted once it has applied the metadata
// the active controller had when asked. One voter change at a time.
func (b *Broker) AddRaftVoter(ctx context.Context, id int) error {
	if err := b.ctl.AddVoter(ctx, id); err != nil {
		return fmt.Errorf("replica: add voter %d: %w", id, err)
	}
	return nil
}

// RemoveRaftVoter removes voter id from the controller quorum (KIP-853's
// RemoveRaftVoter), refused when the voters left would not have a live
// majority. The member keeps its replicas and registration and follows the
// metadata as an observer; stop it (and UnregisterBroker it once it holds
// no replica) to retire it.
func (b *Broker) RemoveRaftVoter(ctx context.Context, id int) error {
	if err := b.ctl.RemoveVoter(ctx, id); err != nil {
		return fmt.Errorf("replica: remove voter %d: %w", id, err)
	}
	return nil
}

var _ kafka.QuorumBackend = kafkaBackend{}

// DescribeQuorum is Broker.DescribeQuorum as the Kafka server answers it.
func (b kafkaBackend) DescribeQuorum(ctx context.Context) (kafka.QuorumDescription, error) {
	q, err := b.Broker.DescribeQuorum(ctx)
	if err != nil {
		return kafka.QuorumDescription{}, quorumErr(err)
	}
	conv := func(ms []controller.QuorumMember) []kafka.QuorumReplica {
		var out []kafka.QuorumReplica
		for _, m := range ms {
			out = append(out, kafka.QuorumReplica{ID: m.ID, LogEndOffset: m.Applied, Addr: m.RaftAddr})
		}
		return out
	}
	return kafka.QuorumDescription{
		LeaderID: q.LeaderID, LeaderEpoch: int32(q.Term), HighWatermark: int64(q.HighWatermark),
		Voters: conv(q.Voters), Observers: conv(q.Observers),
	}, nil
}

// AddRaftVoter is Broker.AddRaftVoter with the Kafka server's errors.
func (b kafkaBackend) AddRaftVoter(ctx context.Context, id int) error {
	return quorumErr(b.Broker.AddRaftVoter(ctx, id))
}

// RemoveRaftVoter is Broker.RemoveRaftVoter with the Kafka server's errors.
func (b kafkaBackend) RemoveRaftVoter(ctx context.Context, id int) error {
	return quorumErr(b.Broker.RemoveRaftVoter(ctx, id))
}

// quorumErr maps the controller's quorum errors to the Kafka server's.
func quorumErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, controller.ErrDuplicateVoter):
		return fmt.Errorf("%w: %w", kafka.ErrDuplicateVoter, err)
	case errors.Is(err, controller.ErrVoterNotFound):
		return fmt.Errorf("%w: %w", kafka.ErrVoterNotFound, err)
	case errors.Is(err, controller.ErrVoterNotCaughtUp), errors.Is(err, controller.ErrVoterChangeInProgress):
		return fmt.Errorf("%w: %w", kafka.ErrQuorumChangeTimedOut, err)
	case errors.Is(err, controller.ErrNoMajorityAfter), errors.Is(err, controller.ErrInvalidRequest):
		return fmt.Errorf("%w: %w", log.ErrInvalidRequest, err)
	}
	return err
}
