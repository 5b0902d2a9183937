package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/txn"
)

// A member as a log.TxnClient, and the transactional calls between
// members: each call runs at the transactional id's coordinator — this
// member's, or the one of the member leading the id's partition of
// __transaction_state, over the Transport — and is tried again, until ctx
// ends, while the coordinator moves or loads. Over the Kafka-protocol
// transport the member's kafka.Client finds the coordinator itself
// (FindCoordinator); over a LocalNetwork the call runs at the other
// member's localGroups.

// txnPeer is what a member asks of another for transactions: a
// kafka.Client, or localGroups at the other member.
type txnPeer interface {
	InitTxnProducerID(ctx context.Context, transactionalID string, timeout time.Duration, current log.ProducerID) (log.ProducerID, error)
	AddPartitionsToTxn(ctx context.Context, transactionalID string, pid log.ProducerID, tps []log.TopicPartition) error
	AddOffsetsToTxn(ctx context.Context, transactionalID string, pid log.ProducerID, groupID string) error
	EndTxn(ctx context.Context, transactionalID string, pid log.ProducerID, commit bool) (log.ProducerID, error)
	VerifyTxnPartition(ctx context.Context, transactionalID string, pid log.ProducerID, tp log.TopicPartition, add bool) error
	WriteTxnMarker(ctx context.Context, tp log.TopicPartition, m batch.Marker) error
	TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error
}

var (
	_ txnPeer       = (*kafka.Client)(nil)
	_ txnPeer       = localGroups{}
	_ log.TxnClient = (*Broker)(nil)
)

// txnRetriable reports whether a transactional call may be tried again at
// the coordinator the next metadata names.
func txnRetriable(err error) bool {
	return groupRetriable(err) || errors.Is(err, txn.ErrClosed) || errors.Is(err, log.ErrTxnCoordinatorLoading)
}

// txnCall runs fn at the coordinator of transactionalID.
func (b *Broker) txnCall(ctx context.Context, transactionalID string, fn func(txnPeer) error) error {
	return coordinatorCall(ctx, b, coordinatorOf{
		topic:     log.TransactionStateTopic,
		ensure:    b.ensureTxnStateTopic,
		partition: func() (log.TopicPartition, bool) { return b.txnTP(transactionalID) },
		retriable: txnRetriable,
	}, fn, txnPeer(localGroups{b}), b.peerCall)
}

// peerCall runs fn at member id over the Transport.
func (b *Broker) peerCall(ctx context.Context, id int, fn func(txnPeer) error) error {
	return b.tr.Group(ctx, id, func(g log.GroupClient) error {
		p, ok := g.(txnPeer)
		if !ok {
			return fmt.Errorf("%w: the transport to broker %d does not carry transactions", log.ErrInvalidConfig, id)
		}
		return fn(p)
	})
}

// InitTxnProducerID is InitProducerId with a transactional id, at its
// coordinator (log.TxnClient).
func (b *Broker) InitTxnProducerID(ctx context.Context, transactionalID string, timeout time.Duration, current log.ProducerID) (pid log.ProducerID, err error) {
	err = b.txnCall(ctx, transactionalID, func(p txnPeer) (err error) {
		pid, err = p.InitTxnProducerID(ctx, transactionalID, timeout, current)
		return err
	})
	if err == nil {
		b.txns.idsMu.Lock()
		if b.txns.ids == nil {
			b.txns.ids = map[int64]string{}
		}
		b.txns.ids[pid.ID] = transactionalID
		b.txns.idsMu.Unlock()
	}
	return pid, err
}

// transactionalIDOf returns the transactional id of a transactional
// batch's producer, if this member's InitTxnProducerID handed it out (nil:
// none, or not transactional).
func (b *Broker) transactionalIDOf(raw []byte) *string {
	h, err := batch.ParseHeader(raw)
	if err != nil || !h.Transactional() || h.ProducerID < 0 {
		return nil
	}
	b.txns.idsMu.Lock()
	defer b.txns.idsMu.Unlock()
	if id, ok := b.txns.ids[h.ProducerID]; ok {
		return &id
	}
	return nil
}

// AddPartitionsToTxn adds partitions to the producer's transaction
// (log.TxnClient). A partition the cluster does not have is
// log.ErrUnknownPartition (log.ErrUnknownTopic).
func (b *Broker) AddPartitionsToTxn(ctx context.Context, transactionalID string, pid log.ProducerID, tps []log.TopicPartition) error {
	for _, p := range tps {
		if err := b.knownPartition(p); err != nil {
			return fmt.Errorf("replica: add %s-%d to transaction of %q: %w", p.Topic, p.Partition, transactionalID, err)
		}
	}
	return b.txnCall(ctx, transactionalID, func(p txnPeer) error {
		return p.AddPartitionsToTxn(ctx, transactionalID, pid, tps)
	})
}

// AddOffsetsToTxn adds the group's partition of __consumer_offsets to the
// producer's transaction (log.TxnClient).
func (b *Broker) AddOffsetsToTxn(ctx context.Context, transactionalID string, pid log.ProducerID, groupID string) error {
	if err := b.ensureOffsetsTopic(ctx); err != nil {
		return err
	}
	return b.txnCall(ctx, transactionalID, func(p txnPeer) error {
		return p.AddOffsetsToTxn(ctx, transactionalID, pid, groupID)
	})
}

// EndTxn commits or aborts the producer's transaction (log.TxnClient).
func (b *Broker) EndTxn(ctx context.Context, transactionalID string, pid log.ProducerID, commit bool) (next log.ProducerID, err error) {
	err = b.txnCall(ctx, transactionalID, func(p txnPeer) (err error) {
		next, err = p.EndTxn(ctx, transactionalID, pid, commit)
		return err
	})
	return next, err
}

// TxnCommitOffsets commits a group's offsets in a producer's transaction
// at the group's coordinator (log.TxnClient; Kafka's TxnOffsetCommit).
func (b *Broker) TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error {
	return b.groupCall(ctx, req.Group, func(g log.GroupClient) error {
		p, ok := g.(txnPeer)
		if !ok {
			return fmt.Errorf("%w: the transport to the coordinator of %q does not carry transactions", log.ErrInvalidConfig, req.Group)
		}
		return p.TxnCommitOffsets(ctx, req)
	})
}

// knownPartition checks that the cluster has p.
func (b *Broker) knownPartition(p log.TopicPartition) error {
	n, ok := b.img.Load().PartitionCount(p.Topic)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", log.ErrUnknownTopic, p.Topic)
	case p.Partition < 0 || p.Partition >= n:
		return fmt.Errorf("%w: %s-%d", log.ErrUnknownPartition, p.Topic, p.Partition)
	}
	return nil
}

// The calls at this member's own coordinators (localGroups as a
// txnPeer). Where Kafka's coordinator answers CONCURRENT_TRANSACTIONS
// and the client polls, each waits for the coordinator to be done with the
// id (txn.Coordinator.Idle), within ctx, as a log.Broker's do.

func (g localGroups) txnCoordinator(id string) (*txn.Coordinator, error) {
	return g.b.localTxnCoordinator(id)
}

func (g localGroups) InitTxnProducerID(ctx context.Context, id string, timeout time.Duration, current log.ProducerID) (log.ProducerID, error) {
	c, err := g.txnCoordinator(id)
	if err != nil {
		return log.ProducerID{}, err
	}
	var expected *txn.ProducerIDEpoch
	if current.ID >= 0 {
		expected = &txn.ProducerIDEpoch{ID: current.ID, Epoch: current.Epoch}
	}
	var pid txn.ProducerIDEpoch
	err = awaitTxnIdle(ctx, c, id, func() (err error) {
		pid, err = c.InitProducerID(ctx, id, timeout, expected)
		return err
	})
	if err != nil {
		return log.ProducerID{}, fmt.Errorf("replica: init producer id of transactional id %q: %w", id, err)
	}
	return log.ProducerID{ID: pid.ID, Epoch: pid.Epoch}, nil
}

func (g localGroups) AddPartitionsToTxn(ctx context.Context, id string, pid log.ProducerID, tps []log.TopicPartition) error {
	c, err := g.txnCoordinator(id)
	if err != nil {
		return err
	}
	err = awaitTxnIdle(ctx, c, id, func() error {
		return c.AddPartitions(ctx, id, pid.ID, pid.Epoch, tps, 0)
	})
	if err != nil {
		return fmt.Errorf("replica: add partitions to transaction of %q: %w", id, err)
	}
	return nil
}

func (g localGroups) AddOffsetsToTxn(ctx context.Context, id string, pid log.ProducerID, groupID string) error {
	c, err := g.txnCoordinator(id)
	if err != nil {
		return err
	}
	gtp, ok := g.b.groupTP(groupID)
	if !ok {
		return fmt.Errorf("%w: no %s", kafka.ErrNotCoordinator, log.OffsetsTopic)
	}
	err = awaitTxnIdle(ctx, c, id, func() error {
		return c.AddOffsets(ctx, id, pid.ID, pid.Epoch, gtp.Partition, 0)
	})
	if err != nil {
		return fmt.Errorf("replica: add offsets of group %q to transaction of %q: %w", groupID, id, err)
	}
	return nil
}

func (g localGroups) EndTxn(ctx context.Context, id string, pid log.ProducerID, commit bool) (log.ProducerID, error) {
	c, err := g.txnCoordinator(id)
	if err != nil {
		return log.ProducerID{}, err
	}
	next, err := c.EndTxn(ctx, id, pid.ID, pid.Epoch, commit, 0)
	if err != nil {
		return log.ProducerID{}, fmt.Errorf("replica: end transaction of %q: %w", id, err)
	}
	if next.ID < 0 {
		return pid, nil
	}
	return log.ProducerID{ID: next.ID, Epoch: next.Epoch}, nil
}

func (g localGroups) VerifyTxnPartition(ctx context.Context, id string, pid log.ProducerID, tp log.TopicPartition, add bool) error {
	c, err := g.txnCoordinator(id)
	if err != nil {
		return err
	}
	if add {
		// Transaction version 2's implicit add (a produce v12, a
		// TxnOffsetCommit v5). Right after an EndTxn the client produces
		// for its next transaction while the last one's markers are
		// still being written: the add waits for the id to be idle, up to
		// txnAddIdleWait, as a standalone broker's does.
		var timeout <-chan time.Time
		for {
			err := c.AddPartitions(ctx, id, pid.ID, pid.Epoch, []log.TopicPartition{tp}, txn.TV2)
			if !errors.Is(err, txn.ErrConcurrentTransactions) {
				return err
			}
			if timeout == nil {
				t := time.NewTimer(txnAddIdleWait)
				defer t.Stop()
				timeout = t.C
			}
			select {
			case <-c.Idle(id):
			case <-timeout:
				return err // CONCURRENT_TRANSACTIONS: asked again by the caller
			case <-ctx.Done():
				return err
			}
		}
	}
	return c.VerifyPartitions(id, pid.ID, pid.Epoch, []log.TopicPartition{tp})[tp]
}

// txnAddIdleWait bounds how long a transaction version 2 add waits for its
// transactional id to be idle (Kafka's
// add.partitions.to.txn.retry.backoff.max.ms).
const txnAddIdleWait = 100 * time.Millisecond

func (g localGroups) WriteTxnMarker(ctx context.Context, tp log.TopicPartition, m batch.Marker) error {
	return g.b.writeTxnMarker(ctx, tp, m)
}

func (g localGroups) TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error {
	c, err := g.coordinator(req.Group)
	if err != nil {
		return err
	}
	return c.TxnCommit(ctx, req)
}

// awaitTxnIdle calls f until it answers other than
// txn.ErrConcurrentTransactions, waiting between calls for c to be done
// with the transactional id, within ctx.
func awaitTxnIdle(ctx context.Context, c *txn.Coordinator, id string, f func() error) error {
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

// The member's kafka.Server side of transactions (kafka.TxnBackend,
// kafka.TxnRouter).

var (
	_ kafka.TxnBackend         = kafkaBackend{}
	_ kafka.TxnRouter          = kafkaBackend{}
	_ kafka.TxnOffsetCommitter = kafkaBackend{}
)

// TxnCoordinator returns this member's coordinator of transactionalID
// (kafka.TxnBackend): log.ErrTxnCoordinatorLoading while it loads, an
// error matching kafka.ErrNotCoordinator where another member coordinates
// it, or none does yet.
func (b kafkaBackend) TxnCoordinator(ctx context.Context, transactionalID string) (*txn.Coordinator, error) {
	return b.localTxnCoordinator(transactionalID)
}

// TxnCoordinatorNode names the member that coordinates transactionalID
// (kafka.TxnRouter), creating __transaction_state first if the cluster
// has none, bounded by ctx.
func (b kafkaBackend) TxnCoordinatorNode(ctx context.Context, transactionalID string) (int32, bool) {
	if err := b.ensureTxnStateTopic(ctx); err != nil {
		return -1, false
	}
	tp, ok := b.txnTP(transactionalID)
	if !ok {
		return -1, false
	}
	leader, err := b.leaderOf(tp)
	if err != nil {
		return -1, false
	}
	return int32(leader), true
}

// TxnCoordinators returns this member's loaded coordinators
// (kafka.TxnRouter).
func (b kafkaBackend) TxnCoordinators() []*txn.Coordinator { return b.txnCoordinators() }

// VerifyTxnPartition checks a transactional produce's partition at the
// coordinator of transactionalID (kafka.TxnRouter), once: the produce's
// client retries.
func (b kafkaBackend) VerifyTxnPartition(ctx context.Context, transactionalID string, pid log.ProducerID, tp log.TopicPartition, add bool) error {
	xtp, ok := b.txnTP(transactionalID)
	if !ok {
		return fmt.Errorf("%w: no %s", kafka.ErrNotCoordinator, log.TransactionStateTopic)
	}
	leader, err := b.leaderOf(xtp)
	if err != nil {
		return fmt.Errorf("%w: %w", kafka.ErrNotCoordinator, err)
	}
	fn := func(p txnPeer) error { return p.VerifyTxnPartition(ctx, transactionalID, pid, tp, add) }
	if leader == b.cfg.ID {
		return fn(localGroups{b.Broker})
	}
	return b.peerCall(ctx, leader, fn)
}

// Producers returns the producers of a partition this member leads
// (kafka.TxnBackend: DescribeProducers).
func (b kafkaBackend) Producers(ctx context.Context, tp log.TopicPartition) ([]log.ProducerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps := b.part(tp)
	if ps == nil || !ps.leading.Load() {
		return nil, b.notHereErr(tp)
	}
	return ps.p.Producers(), nil
}

// TxnCommitOffsets says the member's group coordinators keep
// transactional offset commits (kafka.TxnOffsetCommitter): the server
// commits through the coordinator CoordinatorFor returns.
func (b kafkaBackend) TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error {
	return localGroups{b.Broker}.TxnCommitOffsets(ctx, req)
}
