package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/tp"
	"github.com/strata-log/strata/txn"
)

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
	fail := func(code int16, err error) (int16, *string) {
		return code, kmsg.StringPtr(err.Error())
	}
	coord, code := s.txnCoordinator(id)
	if code != errNone {
		return errNotEnoughReplicas, kmsg.StringPtr("transaction coordinator not available")
	}
	ps := []tp.TopicPartition{p}
	if version >= 12 {
		err = coord.AddPartitions(ctx, id, h.ProducerID, h.ProducerEpoch, ps, txn.TV2)
	} else {
		err = coord.VerifyPartitions(id, h.ProducerID, h.ProducerEpoch, ps)[p]
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
