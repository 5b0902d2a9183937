package txn

import (
	"fmt"
	"math"
	"slices"

	"github.com/strata-log/strata/tp"
)

// State is the state of a transactional id, with Kafka's ids (the
// TransactionStatus byte of the log) and names (DescribeTransactions).
type State int8

const (
	Empty             State = 0 // no transaction
	Ongoing           State = 1 // partitions added: a transaction is open
	PrepareCommit     State = 2 // EndTxn(commit) written: markers being written
	PrepareAbort      State = 3 // EndTxn(abort) or a fence written: markers being written
	CompleteCommit    State = 4 // every COMMIT marker written
	CompleteAbort     State = 5 // every ABORT marker written
	Dead              State = 6 // the transactional id expired: being removed
	PrepareEpochFence State = 7 // bumping the epoch to fence the producer, before aborting
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Valid reports whether s is one of the eight states.
func (s State) Valid() bool { return s >= Empty && s <= PrepareEpochFence }

// ParseState returns the state named name (Kafka's names, as
// ListTransactions filters take them).
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// expirationAllowed: the transactional id may expire in this state
// (transactional.id.expiration.ms): no transaction is open.
func (s State) expirationAllowed() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// validPrevious[to] is the set of states a transition to `to` may start
// from (Kafka's TransactionState.validPreviousStates).
var validPrevious = [...][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// No producer id or epoch (Kafka's RecordBatch.NO_PRODUCER_ID/EPOCH).
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
)

// epochExhausted: the producer id must be replaced before its next epoch
// bump. Epoch MaxInt16 is kept for the coordinator to fence with.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// TV2 is the transaction version (Kafka's transaction.version feature
// level) from which every EndTxn bumps the producer epoch (KIP-890 part 2).
const TV2 = 2

// Metadata is the state of one transactional id: what __transaction_state
// holds for it (TransactionLogValue), plus LastProducerEpoch, which lives in
// memory only.
type Metadata struct {
	ProducerID int64
	// PrevProducerID is the producer id before the last transition
	// (KIP-890: the retry of an EndTxn that rotated the producer id is
	// recognized by it); NoProducerID if none.
	PrevProducerID int64
	// NextProducerID is the producer id the current transaction hands over
	// to when it completes, because the epoch is exhausted (KIP-890);
	// NoProducerID if none.
	NextProducerID int64
	ProducerEpoch  int16
	// LastProducerEpoch is the epoch before the last bump, so that a
	// producer retrying InitProducerId (KIP-360) or EndTxn (KIP-890) is
	// recognized; NoProducerEpoch when unknown. Not persisted.
	LastProducerEpoch int16
	TimeoutMs         int32
	State             State
	// Partitions in the transaction, sorted, without duplicates.
	Partitions []tp.TopicPartition
	// StartMs is when the transaction started (its first partition was
	// added), -1 when none is open; LastUpdateMs when the id last changed.
	StartMs      int64
	LastUpdateMs int64
	// ClientTransactionVersion is the transaction version of the client
	// that last started or ended a transaction (TV2 or more: epoch bump
	// on every EndTxn).
	ClientTransactionVersion int16
}

func (m *Metadata) clone() Metadata {
	c := *m
	c.Partitions = slices.Clone(m.Partitions)
	return c
}

func (m *Metadata) tv2() bool { return m.ClientTransactionVersion >= TV2 }

// hasPartition reports whether p is in the transaction.
func (m *Metadata) hasPartition(p tp.TopicPartition) bool {
	_, ok := slices.BinarySearchFunc(m.Partitions, p, tp.Compare)
	return ok
}

// union returns ps added to the sorted set s.
func union(s, ps []tp.TopicPartition) []tp.TopicPartition {
	out := slices.Clone(s)
	for _, p := range ps {
		if i, ok := slices.BinarySearchFunc(out, p, tp.Compare); !ok {
			out = slices.Insert(out, i, p)
		}
	}
	return out
}

// The transitions, as Kafka's TransactionMetadata.prepare* compute them:
// each returns the metadata to write to the log, leaving m unchanged; the
// driver applies it once written. They fail only on a state from which the
// transition is not valid or a producer id or epoch that is not (bugs).

func (m *Metadata) transit(to Metadata) (Metadata, error) {
	if to.ProducerID < 0 {
		return Metadata{}, fmt.Errorf("%w: new producer id %d", errIllegalState, to.ProducerID)
	}
	if to.State != Dead && to.ProducerEpoch < 0 {
		return Metadata{}, fmt.Errorf("%w: new producer epoch %d", errIllegalState, to.ProducerEpoch)
	}
	if !slices.Contains(validPrevious[to.State], m.State) {
		return Metadata{}, fmt.Errorf("%w: no transition from %v to %v", errIllegalState, m.State, to.State)
	}
	to.PrevProducerID = m.ProducerID
	return to, nil
}

// prepareIncrementEpoch is InitProducerId's epoch bump (KIP-360: with the
// producer's expected epoch, a retry is recognized and a zombie fenced).
func (m *Metadata) prepareIncrementEpoch(timeoutMs int32, expected *int16, nowMs int64) (Metadata, error) {
	if epochExhausted(m.ProducerEpoch) {
		return Metadata{}, fmt.Errorf("%w: epochs of producer %d exhausted", errIllegalState, m.ProducerID)
	}
	to := m.clone()
	to.State = Empty
	bumped := m.ProducerEpoch + 1
	switch {
	case expected == nil:
		// A new producer: bump; -1 becomes 0 for new metadata.
		to.ProducerEpoch, to.LastProducerEpoch = bumped, NoProducerEpoch
	case m.ProducerEpoch == NoProducerEpoch || *expected == m.ProducerEpoch:
		// The producer continues after an error and no other producer
		// has initialized since.
		to.ProducerEpoch, to.LastProducerEpoch = bumped, m.ProducerEpoch
	case *expected == m.LastProducerEpoch:
		// A retry of a bump that succeeded: answer the same epoch.
	default:
		return Metadata{}, fmt.Errorf("%w: expected epoch %d is neither the current %d nor the last %d",
			ErrProducerFenced, *expected, m.ProducerEpoch, m.LastProducerEpoch)
	}
	to.TimeoutMs = timeoutMs
	to.Partitions = nil
	to.StartMs = -1
	to.LastUpdateMs = nowMs
	return m.transit(to)
}

// prepareRotateProducerID hands the transactional id a new producer id at
// epoch 0, once the epochs of the old one are exhausted.
func (m *Metadata) prepareRotateProducerID(newID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) (Metadata, error) {
	if m.State == Ongoing || m.State == PrepareCommit || m.State == PrepareAbort {
		return Metadata{}, fmt.Errorf("%w: rotating producer id in state %v", errIllegalState, m.State)
	}
	to := m.clone()
	to.State = Empty
	to.ProducerID, to.ProducerEpoch = newID, 0
	to.LastProducerEpoch = NoProducerEpoch
	if recordLastEpoch {
		to.LastProducerEpoch = m.ProducerEpoch
	}
	to.TimeoutMs = timeoutMs
	to.Partitions = nil
	to.StartMs = -1
	to.LastUpdateMs = nowMs
	return m.transit(to)
}

// prepareFenceEpoch bumps the epoch of an ongoing transaction before the
// coordinator aborts it, so that its producer is fenced. A fence whose
// write failed is not bumped again (the bumped epoch was never handed
// out), nor is MaxInt16.
func (m *Metadata) prepareFenceEpoch(failedFence bool) (Metadata, error) {
	to := m.clone()
	to.State = PrepareEpochFence
	if !failedFence && m.ProducerEpoch != math.MaxInt16 {
		to.ProducerEpoch = m.ProducerEpoch + 1
	}
	return m.transit(to)
}

// prepareAddPartitions opens the transaction or adds to it.
func (m *Metadata) prepareAddPartitions(ps []tp.TopicPartition, nowMs int64, clientTV int16) (Metadata, error) {
	to := m.clone()
	to.State = Ongoing
	if m.State == Empty || m.State == CompleteCommit || m.State == CompleteAbort {
		to.StartMs = nowMs
	}
	to.Partitions = union(m.Partitions, ps)
	to.LastUpdateMs = nowMs
	to.ClientTransactionVersion = clientTV
	return m.transit(to)
}

// prepareEnd moves to PrepareCommit or PrepareAbort. From TV2 on the epoch
// is bumped (KIP-890); nextID is the producer id to hand over to when the
// epoch is exhausted (NoProducerID otherwise). noPartitions: an abort of a
// transaction that added none (TV2 lets a client abort when unsure).
func (m *Metadata) prepareEnd(to State, clientTV int16, nextID int64, nowMs int64, noPartitions bool) (Metadata, error) {
	n := m.clone()
	n.State = to
	if clientTV >= TV2 {
		if m.ProducerEpoch != math.MaxInt16 || to != PrepareAbort {
			// An abort at MaxInt16 (a fence) goes through unbumped.
			n.ProducerEpoch = m.ProducerEpoch + 1
		}
		n.LastProducerEpoch = m.ProducerEpoch
	}
	if noPartitions {
		n.StartMs = nowMs
	}
	n.NextProducerID = nextID
	n.LastUpdateMs = nowMs
	n.ClientTransactionVersion = clientTV
	return m.transit(n)
}

// prepareComplete moves PrepareCommit to CompleteCommit and PrepareAbort to
// CompleteAbort, handing over to NextProducerID (epoch 0) if set.
func (m *Metadata) prepareComplete(nowMs int64) (Metadata, error) {
	to := m.clone()
	to.State = CompleteAbort
	if m.State == PrepareCommit {
		to.State = CompleteCommit
	}
	if m.tv2() && m.NextProducerID != NoProducerID {
		// The client saw MaxInt16-1 then 0: LastProducerEpoch stays.
		to.ProducerID, to.ProducerEpoch = m.NextProducerID, 0
	}
	to.NextProducerID = NoProducerID
	to.Partitions = nil
	to.LastUpdateMs = nowMs
	return m.transit(to)
}

// prepareDead expires the transactional id.
func (m *Metadata) prepareDead() (Metadata, error) {
	to := m.clone()
	to.State = Dead
	to.Partitions = nil
	return m.transit(to)
}
