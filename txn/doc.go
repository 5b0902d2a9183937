// Package txn is Kafka's transaction coordinator (KIP-98, KIP-360, KIP-890)
// for Strata: the state of each transactional id and the rules that move it,
// as a state machine without IO, and the records it keeps in
// __transaction_state.
//
// # States
//
// A transactional id is Empty after InitProducerId, Ongoing once a
// partition (or a group's offsets) is added to its transaction,
// PrepareCommit or PrepareAbort once EndTxn is written, CompleteCommit or
// CompleteAbort once every partition has its marker, and Dead while it
// expires. PrepareEpochFence is the moment the coordinator bumps the epoch
// of a producer it aborts (on InitProducerId by a newer producer, or on the
// transaction's timeout); it is never written.
//
// Every change is decided first, written to __transaction_state by the
// driver, and applied only once written, so a coordinator that fails over
// resumes from the log: a PrepareCommit or PrepareAbort found when loading
// has its markers written again. While a change is written the id answers
// ErrConcurrentTransactions.
//
// # Producer ids and epochs
//
// InitProducerId bumps the epoch, fencing the previous producer of the id
// (ErrProducerFenced); with the producer's current id and epoch (KIP-360)
// it recognizes a retry and a producer that recovers after an error. Epoch
// MaxInt16-1 is exhausted: the next InitProducerId hands out a new producer
// id at epoch 0. From transaction version 2 (KIP-890) every EndTxn bumps the
// epoch too, so the markers of a transaction carry a newer epoch than its
// records and a zombie's late writes are fenced; the EndTxn that exhausts
// the epoch hands the id over to a new producer id.
//
// # Coordinator
//
// A Coordinator drives the machine for the transactional ids of one
// __transaction_state partition: New loads the partition's records, the
// request methods (InitProducerID, AddPartitions, AddOffsets,
// VerifyPartitions, EndTxn, Describe, List, ExpireIDs) decide, write the
// change to the Store and answer once it is durable, and goroutines it owns
// write the markers through the MarkerWriter (retrying until they are
// written), complete the transactions and abort those that time out; Close
// stops and waits for them. Time comes from a clock.Clock.
//
// # Records
//
// EncodeKey, EncodeValue and DecodeRecord read and write the records of
// __transaction_state byte for byte as Kafka does (TransactionLogKey v0,
// TransactionLogValue v0 and the flexible v1 with KIP-890's tagged fields);
// record.go has the layout.
//
// # Errors
//
// Each error the coordinator answers is a sentinel named for its Kafka code
// (ErrConcurrentTransactions, ErrProducerFenced, ErrInvalidProducerIDMapping,
// ErrInvalidTxnState, ...), tested with errors.Is.
//
// # Tests
//
// The cases of Kafka's TransactionCoordinatorTest and TransactionMetadataTest
// are tables in machine_test.go and state_test.go, under Kafka's names.
package txn
