package kafka

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

// txnEndLocks orders a transactional produce and its transaction's end:
// a produce holds its transactional id's lock, shared, from its check
// against the transaction to its append, and EndTxn takes it exclusively
// while the coordinator decides. Without it a produce checked while the
// transaction was open could be appended after the commit's marker,
// opening a transaction in the partition that no coordinator knows, and
// holding its last stable offset back until it is aborted by hand (Kafka
// guards the same race with a verification entry in the producer state).
// The coordinator's own aborts (timeout, fence) bump the producer epoch,
// which the partition checks. The ids share 64 locks by hash.
type txnEndLocks [64]sync.RWMutex

func (l *txnEndLocks) lock(id string) *sync.RWMutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &l[h.Sum32()%uint32(len(l))]
}

// produce locks id for a produce; the result unlocks it.
func (l *txnEndLocks) produce(id string) func() {
	m := l.lock(id)
	m.RLock()
	return m.RUnlock
}

// end locks id for EndTxn, once the produces in flight are appended; the
// result unlocks it.
func (l *txnEndLocks) end(id string) func() {
	m := l.lock(id)
	m.Lock()
	return m.Unlock
}

// checkTxnProduce checks a transactional produce's batch against its
// producer's transaction before it is appended (KIP-890 part 1: Kafka's
// transaction.partition.verification.enable, on by default): a partition
// not in the transaction would open one here that no marker ever ends,
// holding the partition's last stable offset back forever. From produce
// v12 (part 2) the partition is added to the transaction instead, as the
// client no longer sends AddPartitionsToTxn. A batch that is not
// transactional is left to the partition (which refuses it while the
// producer's transaction is open).
//
// The codes are those Kafka answers: a partition not in the transaction
// TRANSACTION_ABORTABLE from v11 (INVALID_TXN_STATE before), an older
// epoch INVALID_PRODUCER_EPOCH, a coordinator busy completing the
// transaction, moving or loading NOT_ENOUGH_REPLICAS, which every client
// retries.
func (s *Server) checkTxnProduce(ctx context.Context, id string, p log.TopicPartition, records []byte, version int16) (int16, *string) {
	h, err := batch.ParseHeader(records)
	if err != nil || !h.Transactional() {
		return errNone, nil // the append answers a bad batch
	}
	ps := []tp.TopicPartition{p}
	if r := s.caps.txnRouter; r != nil {
		// The coordinator may be another node's (txn_router.go).
		pid := log.ProducerID{ID: h.ProducerID, Epoch: h.ProducerEpoch}
		if version >= 12 {
			err = addRouted(ctx, r, id, pid, p)
		} else {
			err = r.VerifyTxnPartition(ctx, id, pid, p, false)
		}
		if err != nil && (CoordinatorMoved(err) || errors.Is(err, log.ErrTxnCoordinatorLoading) || errors.Is(err, log.ErrUnreachable)) {
			return errNotEnoughReplicas, kmsg.StringPtr("transaction coordinator not available: " + err.Error())
		}
		return s.txnProduceCode(err, version)
	}
	coord, code := s.txnCoordinator(id)
	if code != errNone {
		return errNotEnoughReplicas, kmsg.StringPtr("transaction coordinator not available")
	}
	if version >= 12 {
		err = addProducedPartitions(ctx, coord, id, h.ProducerID, h.ProducerEpoch, ps)
	} else {
		err = coord.VerifyPartitions(id, h.ProducerID, h.ProducerEpoch, ps)[p]
	}
	return s.txnProduceCode(err, version)
}

// txnAddWait bounds how long a produce v12 waits for its transaction's
// id to be idle: Kafka's add.partitions.to.txn.retry.backoff.max.ms.
const txnAddWait = 100 * time.Millisecond

// addProducedPartitions is a produce v12's implicit AddPartitionsToTxn. Right
// after an EndTxn the client, told its new epoch, produces for its next
// transaction while the last one's markers are still being written, and
// the coordinator answers ErrConcurrentTransactions: the produce waits
// (retryIdle), as Kafka 4 retries the add on the server (KAFKA-18654)
// rather than failing the produce for the client to retry after its
// backoff (kgo's is 100 ms or more, for every transaction).
func addProducedPartitions(ctx context.Context, coord *txn.Coordinator, id string, producerID int64, epoch int16, ps []tp.TopicPartition) error {
	return retryIdle(ctx, coord, id, func() error {
		return coord.AddPartitions(ctx, id, producerID, epoch, ps, txn.TV2)
	})
}

// retryIdle calls add until it is not ErrConcurrentTransactions, waiting
// between calls for id to be idle, up to txnAddWait in all.
func retryIdle(ctx context.Context, coord *txn.Coordinator, id string, add func() error) error {
	var timeout <-chan time.Time
	for {
		err := add()
		if !errors.Is(err, txn.ErrConcurrentTransactions) {
			return err
		}
		if timeout == nil {
			t := time.NewTimer(txnAddWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-coord.Idle(id):
		case <-timeout:
			return err
		case <-ctx.Done():
			return err
		}
	}
}

// addRouted is a transaction version 2 implicit add (a produce v12's
// partition, a TxnOffsetCommit v5's group) at the coordinator of id
// wherever it runs. While the coordinator answers
// ErrConcurrentTransactions (the last transaction's markers still being
// written) it is asked again, after a backoff that doubles from
// txnAddRetryMin to txnAddRetryMax, up to txnAddWait after the first ask
// (Kafka's add.partitions.to.txn.retry.backoff.ms and .max.ms, KAFKA-18654)
// and within ctx: the router cannot wait for the id to be idle at a
// coordinator that is another node's. The last answer is returned.
func addRouted(ctx context.Context, r TxnRouter, id string, pid log.ProducerID, p log.TopicPartition) error {
	deadline := time.Now().Add(txnAddWait)
	backoff := txnAddRetryMin
	for {
		err := r.VerifyTxnPartition(ctx, id, pid, p, true)
		if !errors.Is(err, txn.ErrConcurrentTransactions) {
			return err
		}
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		backoff = min(2*backoff, txnAddRetryMax)
	}
}

// The backoff of addRouted's asks.
const (
	txnAddRetryMin = time.Millisecond
	txnAddRetryMax = 20 * time.Millisecond
)

// txnProduceCode is checkTxnProduce's answer for the coordinator's.
func (s *Server) txnProduceCode(err error, version int16) (int16, *string) {
	fail := func(code int16, err error) (int16, *string) {
		return code, kmsg.StringPtr(err.Error())
	}
	switch {
	case err == nil:
		return errNone, nil
	case errors.Is(err, txn.ErrTransactionAbortable):
		if version >= 11 {
			return fail(errTransactionAbortable, err)
		}
		return fail(errInvalidTxnState, err)
	case errors.Is(err, txn.ErrProducerFenced), errors.Is(err, txn.ErrInvalidProducerEpoch):
		return fail(errInvalidProducerEpoch, err)
	case errors.Is(err, txn.ErrConcurrentTransactions), errors.Is(err, txn.ErrClosed):
		return fail(errNotEnoughReplicas, err)
	case errors.Is(err, txn.ErrInvalidProducerIDMapping):
		return fail(errInvalidTxnState, err)
	}
	return fail(txnErrorCode(err, true), err)
}
