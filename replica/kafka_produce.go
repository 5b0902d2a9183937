package replica

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/log"
)

// Produce, as the member's Kafka server calls it, appends at this member
// only, as a Kafka broker does: a partition it does not lead (as its
// metadata says) is NOT_LEADER_OR_FOLLOWER, and the sender — a Kafka
// client, or another member routing a call — looks the leader up again
// and retries there. The server never sends a produce on to another
// member: two members whose metadata disagreed for a moment on a
// partition's leader (one had applied an election, the other not yet)
// sent each other's produces back and forth, each hop holding a request
// of the pipelined connection between them, whose answers come in order:
// each waited on the other until the produce timeout (20 s with the
// default producer) — seen as a stall after a preferred election under an
// idempotent load.
func (b kafkaBackend) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	res, err := b.ProduceBatch(ctx, tp, batch, acks)
	if err != nil {
		return 0, err
	}
	return res.BaseOffset, nil
}

// ProduceBatch is Produce with the whole result.
func (b kafkaBackend) ProduceBatch(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.ProduceTimeout)
		defer cancel()
	}
	if err := b.waitReady(ctx); err != nil {
		return log.ProduceResult{}, err
	}
	leader, err := b.leaderOf(tp)
	switch {
	case err != nil && !retriable(err):
		return log.ProduceResult{}, err
	case err != nil:
		return log.ProduceResult{}, fmt.Errorf("%w: %w", log.ErrNotLeader, err)
	case leader != b.cfg.ID:
		return log.ProduceResult{}, fmt.Errorf("%w: %s-%d is led by broker %d, not %d", log.ErrNotLeader, tp.Topic, tp.Partition, leader, b.cfg.ID)
	}
	return b.produceLocal(ctx, tp, batch, acks)
}
