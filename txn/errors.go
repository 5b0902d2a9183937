package txn

import "errors"

// The errors the coordinator answers with, one per Kafka error code (named
// in each comment). A request that gets one changed nothing.
var (
	// ErrConcurrentTransactions (CONCURRENT_TRANSACTIONS, 51): another
	// change of the transactional id is being written, or its transaction is
	// completing; retry after a backoff.
	ErrConcurrentTransactions = errors.New("txn: concurrent transactions")

	// ErrProducerFenced (PRODUCER_FENCED, 90): a producer with a newer epoch
	// (or a new producer id) uses the transactional id. The wire layer
	// answers INVALID_PRODUCER_EPOCH (47) instead to request versions from
	// before KIP-588.
	ErrProducerFenced = errors.New("txn: producer fenced by a newer epoch")

	// ErrInvalidProducerEpoch (INVALID_PRODUCER_EPOCH, 47): what older
	// clients are told instead of ErrProducerFenced; see WireError.
	ErrInvalidProducerEpoch = errors.New("txn: invalid producer epoch")

	// ErrInvalidProducerIDMapping (INVALID_PRODUCER_ID_MAPPING, 49): the
	// transactional id is unknown, or mapped to another producer id.
	ErrInvalidProducerIDMapping = errors.New("txn: producer id not mapped to the transactional id")

	// ErrInvalidTxnState (INVALID_TXN_STATE, 48): the request does not fit
	// the transaction's state (commit after abort, EndTxn with no
	// transaction).
	ErrInvalidTxnState = errors.New("txn: invalid transaction state")

	// ErrInvalidTransactionTimeout (INVALID_TRANSACTION_TIMEOUT, 50): a
	// timeout not in (0, MaxTimeout].
	ErrInvalidTransactionTimeout = errors.New("txn: invalid transaction timeout")

	// ErrInvalidRequest (INVALID_REQUEST, 42): an empty transactional id.
	ErrInvalidRequest = errors.New("txn: invalid request")

	// ErrTransactionAbortable (TRANSACTION_ABORTABLE, 120): a partition
	// leader verifying a transactional produce (KIP-890) found the partition
	// not in the transaction; the producer must abort.
	ErrTransactionAbortable = errors.New("txn: transaction abortable")

	// errIllegalState: a state the coordinator never enters was found (a
	// bug, or a corrupt log); Kafka throws IllegalStateException.
	errIllegalState = errors.New("txn: illegal transaction state")
)

// WireError maps err to what a client of an older request version is
// told: ErrProducerFenced becomes ErrInvalidProducerEpoch when
// producerFenced is false (the request version predates PRODUCER_FENCED:
// InitProducerId < 4, AddPartitionsToTxn < 2, AddOffsetsToTxn < 2, EndTxn < 2,
// as Kafka's KafkaApis maps it).
func WireError(err error, producerFenced bool) error {
	if !producerFenced && errors.Is(err, ErrProducerFenced) {
		return ErrInvalidProducerEpoch
	}
	return err
}
