package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/txn"
)

// The Broker's side of TxnClient, for a transactional Producer in this
// process: each call goes to the broker's transaction coordinator
// (TxnCoordinator) or group coordinator, as Kafka's requests would. The
// producer speaks transaction version 0 (no epoch bump per transaction;
// groups added with AddOffsetsToTxn). Where Kafka's coordinator answers
// CONCURRENT_TRANSACTIONS (the id's previous transaction still writing its
// markers) and the client polls, the call here waits for the coordinator
// to be done with the id (txn.Coordinator.Idle), within ctx.

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
	var pid txn.ProducerIDEpoch
	err = awaitIdle(ctx, c, transactionalID, func() (err error) {
		pid, err = c.InitProducerID(ctx, transactionalID, timeout, expected)
		return err
	})
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
	err = awaitIdle(ctx, c, transactionalID, func() error {
		return c.AddPartitions(ctx, transactionalID, pid.ID, pid.Epoch, tps, 0)
	})
	if err != nil {
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
	part := txn.PartitionFor(groupID, offsetsTopicConfig.Partitions)
	err = awaitIdle(ctx, c, transactionalID, func() error {
		return c.AddOffsets(ctx, transactionalID, pid.ID, pid.Epoch, part, 0)
	})
	if err != nil {
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

// awaitIdle calls f until it answers other than
// txn.ErrConcurrentTransactions, waiting between calls for c to be done
// with the transactional id; ctx ending stops the wait.
func awaitIdle(ctx context.Context, c *txn.Coordinator, id string, f func() error) error {
	for {
		err := f()
		if !errors.Is(err, txn.ErrConcurrentTransactions) {
			return err
		}
		select {
		case <-c.Idle(id):
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the previous transaction to complete: %w", ctx.Err(), err)
		}
	}
}
