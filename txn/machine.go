package txn

import (
	"fmt"
	"maps"
	"slices"

	"github.com/strata-log/strata/tp"
)

// The transaction coordinator of the transactional ids of one
// __transaction_state partition, as a state machine without IO:
// step(now, event) changes the machine and returns effects for the driver to
// carry out — records to write to __transaction_state, replies to requests
// waiting for them, markers to write to partition leaders, timers. The
// machine never reads a clock, starts a timer or writes anything; time comes
// with each event, in ms since the epoch as the log stores it.
//
// As in Kafka, each transactional id has at most one transition being
// written (its pending transition): it is decided when the request comes,
// written by the driver (effAppend), and applied when the driver reports the
// write (appendedEvent); requests meanwhile get ErrConcurrentTransactions.
// A request that needs the write answers after it (effReply with the
// request's waiter token); one that needs none answers at once.
//
// EndTxn runs in three writes: PrepareCommit or PrepareAbort (the client is
// answered once it is written), then the markers (effMarkers: one COMMIT or
// ABORT marker per partition, reported one by one with markerEvent), then
// CompleteCommit or CompleteAbort once every marker is written. An
// InitProducerId or a timeout that finds a transaction open fences its
// producer by bumping the epoch and aborts it the same way.

// machineConfig: the coordinator's settings (Kafka's names).
type machineConfig struct {
	// maxTimeoutMs is transaction.max.timeout.ms: the largest transaction
	// timeout a producer may ask for (Kafka's default 900000, 15 minutes).
	maxTimeoutMs int32
	// transactionVersion is the cluster's transaction.version: the
	// version of the aborts the coordinator starts itself (fences).
	transactionVersion int16
}

// ProducerIDEpoch is a producer id and epoch (Kafka's ProducerIdAndEpoch).
type ProducerIDEpoch struct {
	ID    int64
	Epoch int16
}

// Result is the answer to a request: the producer id and epoch (NoProducerID
// and NoProducerEpoch with an error), or the error.
type Result struct {
	ProducerID    int64
	ProducerEpoch int16
	Err           error
}

func errResult(err error) Result {
	return Result{ProducerID: NoProducerID, ProducerEpoch: NoProducerEpoch, Err: err}
}

// Events. Every event names a transactional id; waiter is the token of the
// request to answer (> 0), or 0 for none.

type event interface{ isEvent() }

// initEvent is InitProducerId with a transactional id. expected is the
// producer's current id and epoch (KIP-360), nil for a new producer.
type initEvent struct {
	id        string
	waiter    uint64
	timeoutMs int32
	expected  *ProducerIDEpoch
}

// addEvent is AddPartitionsToTxn (and AddOffsetsToTxn: the partition of
// __consumer_offsets that holds the group), from the producer or, for a
// produce v12+ (KIP-890's implicit add), from the partition leader on its
// behalf. clientTV is the client's transaction version.
type addEvent struct {
	id         string
	waiter     uint64
	producerID int64
	epoch      int16
	partitions []tp.TopicPartition
	clientTV   int16
}

// endEvent is EndTxn.
type endEvent struct {
	id         string
	waiter     uint64
	producerID int64
	epoch      int16
	commit     bool
	clientTV   int16
}

// appendedEvent: the driver wrote the pending transition of id (err nil)
// or failed to (err: what to answer, e.g. NOT_ENOUGH_REPLICAS).
type appendedEvent struct {
	id  string
	err error
}

// markerEvent: the marker of id's completing transaction is written in
// partition p (or p no longer exists, which counts as written).
type markerEvent struct {
	id string
	p  tp.TopicPartition
}

// timeoutEvent: the timer of id's transaction (effArm) fired.
type timeoutEvent struct{ id string }

// expireEvent: the driver's periodic check of transactional.id.expiration.ms
// for id: it expires if idle that long.
type expireEvent struct {
	id           string
	expirationMs int64
}

func (initEvent) isEvent()     {}
func (addEvent) isEvent()      {}
func (endEvent) isEvent()      {}
func (appendedEvent) isEvent() {}
func (markerEvent) isEvent()   {}
func (timeoutEvent) isEvent()  {}
func (expireEvent) isEvent()   {}

// Effects.

type effect interface{ isEffect() }

// effAppend: write meta as id's record in __transaction_state (a tombstone
// when meta.State is Dead), then report with appendedEvent. retry: an
// earlier write of it failed; back off first.
type effAppend struct {
	id    string
	meta  Metadata
	retry bool
}

// effReply: answer the request with token waiter.
type effReply struct {
	waiter uint64
	res    Result
}

// effMarkers: write a COMMIT (or ABORT) marker of producerID at epoch to
// each partition, with the coordinator's epoch, reporting each with
// markerEvent.
type effMarkers struct {
	id         string
	commit     bool
	producerID int64
	epoch      int16
	partitions []tp.TopicPartition
}

// effArm: step timeoutEvent for id at or after atMs. The driver keeps one
// timer per id; a timer that fires early or late is harmless.
type effArm struct {
	id   string
	atMs int64
}

// effRemoved: id expired and is gone from the machine.
type effRemoved struct{ id string }

func (effAppend) isEffect()  {}
func (effReply) isEffect()   {}
func (effMarkers) isEffect() {}
func (effArm) isEffect()     {}
func (effRemoved) isEffect() {}

// opKind is what a pending transition is for: what to do once written.
type opKind uint8

const (
	opInit     opKind = iota // InitProducerId: answer the new id and epoch
	opAdd                    // AddPartitionsToTxn: answer, arm the timeout
	opEnd                    // PrepareCommit/Abort: answer, write the markers
	opComplete               // CompleteCommit/Abort: nothing to answer
	opExpire                 // Dead: remove
)

type pendingOp struct {
	kind   opKind
	waiter uint64
	// forInit: an opEnd that aborts on behalf of InitProducerId, which is
	// answered ErrConcurrentTransactions once it is written, to retry.
	forInit bool
	// fence: an opEnd that aborts after an epoch fence.
	fence bool
}

// entry is one transactional id.
type entry struct {
	meta    Metadata
	pending *Metadata // the transition being written (Kafka's pendingState)
	op      pendingOp
	// failedFence: the write of a fence failed; the epoch it bumped (in
	// memory) was never handed out, so the next fence does not bump again.
	failedFence bool
}

type machine struct {
	cfg machineConfig
	// nextID allocates a producer id (from the controller's blocks); it
	// may fail, and the request is answered with its error.
	nextID func() (int64, error)
	txns   map[string]*entry
}

func newMachine(cfg machineConfig, nextID func() (int64, error)) *machine {
	return &machine{cfg: cfg, nextID: nextID, txns: make(map[string]*entry)}
}

func (m *machine) step(nowMs int64, ev event) []effect {
	switch ev := ev.(type) {
	case initEvent:
		return m.init(nowMs, ev)
	case addEvent:
		return m.add(nowMs, ev)
	case endEvent:
		return m.end(nowMs, ev.id, ev.waiter, ev.producerID, ev.epoch, ev.commit, ev.clientTV, true, false)
	case appendedEvent:
		return m.appended(nowMs, ev)
	case markerEvent:
		return m.markerWritten(ev)
	case timeoutEvent:
		return m.timeout(nowMs, ev.id)
	case expireEvent:
		return m.expire(nowMs, ev)
	}
	panic(fmt.Sprintf("txn: unknown event %T", ev))
}

func reply(waiter uint64, res Result) []effect {
	if waiter == 0 {
		return nil
	}
	return []effect{effReply{waiter, res}}
}

// begin records the pending transition to and asks for it to be written.
func (e *entry) begin(id string, to Metadata, op pendingOp) []effect {
	e.pending, e.op = &to, op
	return []effect{effAppend{id: id, meta: to.clone()}}
}

func (m *machine) init(nowMs int64, ev initEvent) []effect {
	if ev.id == "" {
		return reply(ev.waiter, errResult(ErrInvalidRequest))
	}
	if ev.timeoutMs <= 0 || ev.timeoutMs > m.cfg.maxTimeoutMs {
		return reply(ev.waiter, errResult(fmt.Errorf("%w: %d ms, at most %d", ErrInvalidTransactionTimeout, ev.timeoutMs, m.cfg.maxTimeoutMs)))
	}
	e := m.txns[ev.id]
	if e == nil {
		pid, err := m.nextID()
		if err != nil {
			return reply(ev.waiter, errResult(err))
		}
		e = &entry{meta: Metadata{
			ProducerID: pid, PrevProducerID: NoProducerID, NextProducerID: NoProducerID,
			ProducerEpoch: NoProducerEpoch, LastProducerEpoch: NoProducerEpoch,
			TimeoutMs: ev.timeoutMs, State: Empty, StartMs: -1, LastUpdateMs: nowMs,
		}}
		m.txns[ev.id] = e
	}
	meta := &e.meta
	if e.pending != nil {
		return reply(ev.waiter, errResult(ErrConcurrentTransactions))
	}
	if x := ev.expected; x != nil {
		// Fence the producer unless the metadata is new (it recovers from
		// UNKNOWN_PRODUCER_ID), its id is the current one (its epoch is
		// checked by the bump), or it is the previous one with an exhausted
		// epoch (a retry of the bump that rotated the id).
		if !(meta.ProducerEpoch == NoProducerEpoch || x.ID == meta.ProducerID ||
			x.ID == meta.PrevProducerID && epochExhausted(x.Epoch)) {
			return reply(ev.waiter, errResult(fmt.Errorf("%w: producer %d is not the transactional id's %d", ErrProducerFenced, x.ID, meta.ProducerID)))
		}
	}
	switch meta.State {
	case PrepareCommit, PrepareAbort:
		return reply(ev.waiter, errResult(ErrConcurrentTransactions))
	case Empty, CompleteCommit, CompleteAbort:
		var to Metadata
		var err error
		if epochExhausted(meta.ProducerEpoch) && (ev.expected == nil || ev.expected.Epoch == meta.ProducerEpoch) {
			pid, aerr := m.nextID()
			if aerr != nil {
				return reply(ev.waiter, errResult(aerr))
			}
			to, err = meta.prepareRotateProducerID(pid, ev.timeoutMs, nowMs, ev.expected != nil)
		} else {
			var expected *int16
			if ev.expected != nil {
				expected = &ev.expected.Epoch
			}
			to, err = meta.prepareIncrementEpoch(ev.timeoutMs, expected, nowMs)
		}
		if err != nil {
			return reply(ev.waiter, errResult(err))
		}
		return e.begin(ev.id, to, pendingOp{kind: opInit, waiter: ev.waiter})
	case Ongoing:
		// Fence the producer and abort its transaction; the client is told
		// to retry (ErrConcurrentTransactions), and its retry bumps the
		// epoch again once the abort completes (or rotates the producer id
		// if the fence exhausted the epochs).
		return m.fenceAndAbort(nowMs, ev.id, e, ev.waiter, true)
	}
	return reply(ev.waiter, errResult(fmt.Errorf("%w: %v", errIllegalState, meta.State)))
}

// fenceAndAbort bumps the epoch of e's open transaction (PrepareEpochFence)
// and aborts it at that epoch, as the coordinator itself.
func (m *machine) fenceAndAbort(nowMs int64, id string, e *entry, waiter uint64, forInit bool) []effect {
	fence, err := e.meta.prepareFenceEpoch(e.failedFence)
	if err != nil {
		return reply(waiter, errResult(err))
	}
	e.pending, e.op = &fence, pendingOp{}
	effs := m.end(nowMs, id, waiter, fence.ProducerID, fence.ProducerEpoch, false, m.cfg.transactionVersion, false, forInit)
	if e.pending != nil && e.pending.State == PrepareEpochFence {
		e.pending = nil // the abort was refused: nothing is being written
	}
	return effs
}

func (m *machine) add(nowMs int64, ev addEvent) []effect {
	if ev.id == "" {
		return reply(ev.waiter, errResult(ErrInvalidRequest))
	}
	e := m.txns[ev.id]
	switch {
	case e == nil || e.meta.ProducerID != ev.producerID:
		return reply(ev.waiter, errResult(ErrInvalidProducerIDMapping))
	case e.meta.ProducerEpoch != ev.epoch:
		return reply(ev.waiter, errResult(fmt.Errorf("%w: epoch %d, current %d", ErrProducerFenced, ev.epoch, e.meta.ProducerEpoch)))
	case e.pending != nil:
		return reply(ev.waiter, errResult(ErrConcurrentTransactions))
	case e.meta.State == PrepareCommit || e.meta.State == PrepareAbort:
		return reply(ev.waiter, errResult(ErrConcurrentTransactions))
	case e.meta.State == Ongoing && subset(ev.partitions, &e.meta):
		// Already in the transaction: nothing to write.
		return reply(ev.waiter, Result{ProducerID: e.meta.ProducerID, ProducerEpoch: e.meta.ProducerEpoch})
	}
	to, err := e.meta.prepareAddPartitions(ev.partitions, nowMs, ev.clientTV)
	if err != nil {
		return reply(ev.waiter, errResult(err))
	}
	return e.begin(ev.id, to, pendingOp{kind: opAdd, waiter: ev.waiter})
}

func subset(ps []tp.TopicPartition, m *Metadata) bool {
	for _, p := range ps {
		if !m.hasPartition(p) {
			return false
		}
	}
	return true
}

// verify answers a partition leader checking, before it appends a
// transactional batch, that the partitions are in the producer's
// transaction (KIP-890 part 1: AddPartitionsToTxn with VerifyOnly). It
// changes nothing. A partition not in the transaction is
// ErrTransactionAbortable; a request error applies to every partition.
func (m *machine) verify(id string, producerID int64, epoch int16, ps []tp.TopicPartition) map[tp.TopicPartition]error {
	var all error
	e := m.txns[id]
	switch {
	case id == "":
		all = ErrInvalidRequest
	case e == nil || e.meta.ProducerID != producerID:
		all = ErrInvalidProducerIDMapping
	case e.meta.ProducerEpoch != epoch:
		all = ErrProducerFenced
	case e.meta.State == PrepareCommit || e.meta.State == PrepareAbort:
		all = ErrConcurrentTransactions
	}
	out := make(map[tp.TopicPartition]error, len(ps))
	for _, p := range ps {
		switch {
		case all != nil:
			out[p] = all
		case e.meta.hasPartition(p):
			out[p] = nil
		default:
			out[p] = ErrTransactionAbortable
		}
	}
	return out
}

// end is EndTxn, from the client (fromClient) or from the coordinator
// aborting after a fence (the pending transition is then the fence, and
// epoch the fenced epoch).
func (m *machine) end(nowMs int64, id string, waiter uint64, producerID int64, epoch int16, commit bool, clientTV int16, fromClient, forInit bool) []effect {
	if id == "" {
		return reply(waiter, errResult(ErrInvalidRequest))
	}
	e := m.txns[id]
	if e == nil {
		return reply(waiter, errResult(ErrInvalidProducerIDMapping))
	}
	meta := &e.meta
	fencing := e.pending != nil && e.pending.State == PrepareEpochFence
	// From TV2 on every EndTxn bumps the epoch, so a retry comes with the
	// epoch before the bump (or, when the bump rotated the producer id,
	// with the old id at MaxInt16-1).
	tv2 := !fencing && meta.tv2()
	retryOnOverflow := tv2 && meta.PrevProducerID == producerID && epoch == maxEpoch-1 && meta.ProducerEpoch == 0
	retryOnBump := tv2 && meta.ProducerEpoch == epoch+1
	current := epoch == meta.ProducerEpoch
	emptyAbort := !commit && clientTV >= TV2 && current
	var validEpoch bool
	if tv2 {
		switch meta.State {
		case Ongoing, Empty:
			validEpoch = current
		case PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort:
			// The epoch the last EndTxn answered (the client's next
			// EndTxn) or the one before it (a retry of that EndTxn).
			validEpoch = retryOnBump || retryOnOverflow || current
		}
	} else {
		// Strict equality from the client, which never bumps the epoch
		// itself; the coordinator's own abort comes with the fenced epoch.
		validEpoch = (!fromClient || current) && epoch >= meta.ProducerEpoch
	}
	busy := e.pending != nil && !fencing
	switch {
	case meta.ProducerID != producerID && !retryOnOverflow:
		return reply(waiter, errResult(fmt.Errorf("%w: producer %d, transactional id has %d", ErrInvalidProducerIDMapping, producerID, meta.ProducerID)))
	case tv2 && busy:
		// Kafka's order from TV2 on: a transition in flight first. The
		// completion of the last EndTxn is one: its markers are being
		// written while the client, told the bumped epoch already, may
		// end its next transaction (an abort, when it is unsure whether
		// the transaction started). It retries CONCURRENT_TRANSACTIONS;
		// PRODUCER_FENCED would be fatal to it.
		return reply(waiter, errResult(ErrConcurrentTransactions))
	case !validEpoch:
		return reply(waiter, errResult(fmt.Errorf("%w: epoch %d, current %d", ErrProducerFenced, epoch, meta.ProducerEpoch)))
	case busy:
		return reply(waiter, errResult(ErrConcurrentTransactions))
	}
	answer := Result{ProducerID: meta.ProducerID, ProducerEpoch: meta.ProducerEpoch}
	invalid := func() []effect {
		return reply(waiter, errResult(fmt.Errorf("%w: %v in state %v", ErrInvalidTxnState, endName(commit), meta.State)))
	}
	noPartitions := false
	switch meta.State {
	case Ongoing:
	case CompleteCommit, CompleteAbort, Empty:
		retry := meta.State != Empty && commit == (meta.State == CompleteCommit) && (!tv2 || retryOnBump || retryOnOverflow)
		switch {
		case retry:
			return reply(waiter, answer)
		case emptyAbort:
			// TV2: a client unsure whether its transaction started may
			// abort; the epoch is bumped as for any EndTxn.
			noPartitions = true
		default:
			return invalid()
		}
	case PrepareCommit, PrepareAbort:
		if commit == (meta.State == PrepareCommit) || tv2 && current {
			// Completing: a retry, or (TV2) the next EndTxn, waits.
			return reply(waiter, errResult(ErrConcurrentTransactions))
		}
		return invalid()
	default:
		return reply(waiter, errResult(fmt.Errorf("%w: %v", errIllegalState, meta.State)))
	}
	next := PrepareAbort
	if commit {
		next = PrepareCommit
	}
	nextID := NoProducerID
	if clientTV >= TV2 && !fencing && epochExhausted(meta.ProducerEpoch) {
		pid, err := m.nextID()
		if err != nil {
			return reply(waiter, errResult(err))
		}
		nextID = pid
	}
	if fencing {
		// Take the fenced epoch now, before the abort is written: should
		// the write fail, failedFence keeps the next fence from bumping it
		// again, and the producer stays fenced.
		e.pending = nil
		meta.ProducerEpoch, meta.LastProducerEpoch = epoch, NoProducerEpoch
	}
	to, err := meta.prepareEnd(next, clientTV, nextID, nowMs, noPartitions)
	if err != nil {
		return reply(waiter, errResult(err))
	}
	return e.begin(id, to, pendingOp{kind: opEnd, waiter: waiter, forInit: forInit, fence: fencing})
}

const maxEpoch = 1<<15 - 1

func endName(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

func (m *machine) appended(nowMs int64, ev appendedEvent) []effect {
	e := m.txns[ev.id]
	if e == nil || e.pending == nil {
		return nil // stale: nothing is being written
	}
	op := e.op
	if ev.err != nil {
		if op.kind == opComplete {
			// The transaction is decided and its markers written: write
			// the completion again until it sticks.
			return []effect{effAppend{id: ev.id, meta: e.pending.clone(), retry: true}}
		}
		e.pending, e.op = nil, pendingOp{}
		if op.fence {
			e.failedFence = true
		}
		return reply(op.waiter, errResult(ev.err))
	}
	to := *e.pending
	e.pending, e.op = nil, pendingOp{}
	if to.State == Dead {
		delete(m.txns, ev.id)
		return []effect{effRemoved{ev.id}}
	}
	e.meta = to
	switch op.kind {
	case opInit:
		return reply(op.waiter, Result{ProducerID: to.ProducerID, ProducerEpoch: to.ProducerEpoch})
	case opAdd:
		effs := reply(op.waiter, Result{ProducerID: to.ProducerID, ProducerEpoch: to.ProducerEpoch})
		return append(effs, effArm{id: ev.id, atMs: deadline(&to)})
	case opEnd:
		e.failedFence = false
		effs, res := m.complete(nowMs, ev.id, e)
		if op.forInit {
			res = errResult(ErrConcurrentTransactions)
		}
		return append(reply(op.waiter, res), effs...)
	}
	return nil
}

// deadline is when an ongoing transaction times out: Kafka aborts it once
// start + timeout < now.
func deadline(m *Metadata) int64 { return m.StartMs + int64(m.TimeoutMs) + 1 }

// complete starts the completion of e's prepared transaction: the pending
// CompleteCommit or CompleteAbort, written once every marker is. It
// returns the answer to the EndTxn: the producer id and epoch to use next.
func (m *machine) complete(nowMs int64, id string, e *entry) ([]effect, Result) {
	to, err := e.meta.prepareComplete(nowMs)
	if err != nil {
		return nil, errResult(err)
	}
	e.pending, e.op = &to, pendingOp{kind: opComplete}
	res := Result{ProducerID: to.ProducerID, ProducerEpoch: to.ProducerEpoch}
	if len(e.meta.Partitions) == 0 {
		return []effect{effAppend{id: id, meta: to.clone()}}, res
	}
	return []effect{effMarkers{
		id:         id,
		commit:     e.meta.State == PrepareCommit,
		producerID: e.meta.ProducerID,
		epoch:      e.meta.ProducerEpoch,
		partitions: slices.Clone(e.meta.Partitions),
	}}, res
}

func (m *machine) markerWritten(ev markerEvent) []effect {
	e := m.txns[ev.id]
	if e == nil || e.pending == nil || e.op.kind != opComplete || !e.meta.hasPartition(ev.p) {
		return nil // stale or repeated
	}
	i, _ := slices.BinarySearchFunc(e.meta.Partitions, ev.p, tp.Compare)
	e.meta.Partitions = slices.Delete(e.meta.Partitions, i, i+1)
	if len(e.meta.Partitions) > 0 {
		return nil
	}
	return []effect{effAppend{id: ev.id, meta: e.pending.clone()}}
}

func (m *machine) timeout(nowMs int64, id string) []effect {
	e := m.txns[id]
	if e == nil || e.meta.State != Ongoing || e.pending != nil {
		return nil // completed, or completing: the timer is stale
	}
	if d := deadline(&e.meta); nowMs < d {
		return []effect{effArm{id: id, atMs: d}}
	}
	return m.fenceAndAbort(nowMs, id, e, 0, false)
}

func (m *machine) expire(nowMs int64, ev expireEvent) []effect {
	e := m.txns[ev.id]
	if e == nil || e.pending != nil || !e.meta.State.expirationAllowed() || e.meta.LastUpdateMs > nowMs-ev.expirationMs {
		return nil
	}
	to, err := e.meta.prepareDead()
	if err != nil {
		return nil
	}
	return e.begin(ev.id, to, pendingOp{kind: opExpire})
}

// load sets id's metadata as read from __transaction_state (nil: a
// tombstone), while the partition loads; later records replace earlier ones.
func (m *machine) load(id string, meta *Metadata) {
	if meta == nil {
		delete(m.txns, id)
		return
	}
	m.txns[id] = &entry{meta: meta.clone()}
}

// loaded resumes what the loaded state leaves to do: the markers of the
// transactions that were completing, the timeouts of the open ones.
func (m *machine) loaded(nowMs int64) []effect {
	var effs []effect
	for _, id := range slices.Sorted(maps.Keys(m.txns)) {
		e := m.txns[id]
		switch e.meta.State {
		case PrepareCommit, PrepareAbort:
			ce, _ := m.complete(nowMs, id, e)
			effs = append(effs, ce...)
		case Ongoing:
			effs = append(effs, effArm{id: id, atMs: deadline(&e.meta)})
		}
	}
	return effs
}

// busy reports whether id's requests are answered
// ErrConcurrentTransactions for now: a write of its state is pending or
// its transaction is completing.
func (m *machine) busy(id string) bool {
	e := m.txns[id]
	return e != nil && (e.pending != nil || e.meta.State == PrepareCommit || e.meta.State == PrepareAbort)
}

// describe returns a copy of id's metadata, false if there is none (or it
// is expiring).
func (m *machine) describe(id string) (Metadata, bool) {
	e := m.txns[id]
	if e == nil || e.pending != nil && e.pending.State == Dead {
		return Metadata{}, false
	}
	return e.meta.clone(), true
}
