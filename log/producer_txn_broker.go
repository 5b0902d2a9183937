package log

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/txn"
)

// The Broker's side of TxnClient, for a transactional Producer in this
// process: each call goes to the broker's transaction coordinator
// (TxnCoordinator) or group coordinator, as Kafka's requests would. The
// producer speaks transaction version 0 (no epoch bump per transaction;
// groups added with AddOffsetsToTxn).

var _ TxnClient = (*Broker)(nil)

// InitTxnProducerID is InitProducerId with a transactional id (TxnClient).
func (b *Broker) InitTxnProducerID(ctx context.Context, transactionalID string, timeout time.Duration, current ProducerID) (ProducerID, error) {
	c, err := b.TxnCoordinator(ctx, transactionalID)
	if err != nil {
		return ProducerID{}, err
	}
	var expected *txn.ProducerIDEpoch
	if current.ID >= 0 {
		expected = &txn.ProducerIDEpoch{ID: current.ID, Epoch: current.Epoch}
	}
	pid, err := c.InitProducerID(ctx, transactionalID, timeout, expected)
	if err != nil {
		return ProducerID{}, fmt.Errorf("log: init producer id of transactional id %q: %w", transactionalID, err)
	}
	return ProducerID{ID: pid.ID, Epoch: pid.Epoch}, nil
}

// AddPartitionsToTxn adds partitions to the producer's transaction
// (TxnClient). A partition the broker does not have is ErrUnknownPartition
// (ErrUnknownTopic), as Kafka's coordinator answers
// UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) AddPartitionsToTxn(ctx context.Context, transactionalID string, pid ProducerID, tps []TopicPartition) error {
	for _, p := range tps {
		if _, err := b.Partition(p.Topic, p.Partition); err != nil {
			return fmt.Errorf("log: add %s-%d to transaction of %q: %w", p.Topic, p.Partition, transactionalID, err)
		}
	}
	c, err := b.TxnCoordinator(ctx, transactionalID)
	if err != nil {
		return err
	}
	if err := c.AddPartitions(ctx, transactionalID, pid.ID, pid.Epoch, tps, 0); err != nil {
		return fmt.Errorf("log: add partitions to transaction of %q: %w", transactionalID, err)
	}
	return nil
}

// AddOffsetsToTxn adds the group's partition of OffsetsTopic to the
// producer's transaction (TxnClient).
func (b *Broker) AddOffsetsToTxn(ctx context.Context, transactionalID string, pid ProducerID, groupID string) error {
	if _, err := b.offsetsPartition(); err != nil {
		return err
	}
	c, err := b.TxnCoordinator(ctx, transactionalID)
	if err != nil {
		return err
	}
	if err := c.AddOffsets(ctx, transactionalID, pid.ID, pid.Epoch, txn.PartitionFor(groupID, offsetsTopicConfig.Partitions), 0); err != nil {
		return fmt.Errorf("log: add offsets of group %q to transaction of %q: %w", groupID, transactionalID, err)
	}
	return nil
}

// EndTxn commits or aborts the producer's transaction (TxnClient).
func (b *Broker) EndTxn(ctx context.Context, transactionalID string, pid ProducerID, commit bool) (ProducerID, error) {
	c, err := b.TxnCoordinator(ctx, transactionalID)
	if err != nil {
		return ProducerID{}, err
	}
	next, err := c.EndTxn(ctx, transactionalID, pid.ID, pid.Epoch, commit, 0)
	if err != nil {
		return ProducerID{}, fmt.Errorf("log: end transaction of %q: %w", transactionalID, err)
	}
	if next.ID < 0 {
		return pid, nil
	}
	return ProducerID{ID: next.ID, Epoch: next.Epoch}, nil
}
