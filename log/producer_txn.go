package log

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/txn"
)

// Transactions (KIP-98), as Kafka's transactional producer: a Producer
// with ProducerConfig.TransactionalID writes its records in transactions.
// BeginTransaction starts one; the records sent then are written at once
// but READ_COMMITTED consumers see them only once CommitTransaction has
// committed it, and never if AbortTransaction aborts it (or the producer
// dies and the coordinator aborts it on its timeout, or when a new
// producer of the same transactional id calls InitTransactions).
// SendOffsetsToTransaction commits a consumer group's positions in the
// same transaction: consume, transform, produce exactly once.
//
// The Client must serve transactions (TxnClient: a *Broker, a
// kafka.Client). The first call that needs the producer's identity —
// InitTransactions, or the first send, SendOffsetsToTransaction or
// CommitTransaction — asks the transaction coordinator for it
// (InitProducerId with the transactional id), which fences any older
// producer of the id (its sends and commits then fail with
// ErrProducerFenced) and aborts the transaction it left open. Before the
// first batch of a partition in a transaction, the producer adds the
// partition to it (AddPartitionsToTxn).
//
// A record that fails in a transaction makes the transaction abortable:
// CommitTransaction then returns an error matching ErrTransactionAbortable
// (and the record's), and the application calls AbortTransaction and
// retries from its last committed state. ErrProducerFenced is fatal: the
// producer can only be closed.

// Errors of the transactional producer.
var (
	// ErrTransactionAbortable: a record or an offset commit of the
	// transaction failed; CommitTransaction refuses to commit it, and the
	// transaction must be aborted.
	ErrTransactionAbortable = errors.New("log: transaction failed and must be aborted")
	// ErrTransactionalIDRequired: a transactional call on a producer
	// without ProducerConfig.TransactionalID.
	ErrTransactionalIDRequired = errors.New("log: producer has no transactional id")
)

// DefaultTransactionTimeout is Kafka's transaction.timeout.ms: how long the
// coordinator lets a transaction stay open before it aborts it.
const DefaultTransactionTimeout = time.Minute

// TxnClient is a Client that serves transactions: Kafka's transaction
// coordinator (InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn) and TxnOffsetCommit. *Broker and kafka.Client
// implement it. Each call returns once the coordinator has made its
// change durable; ErrConcurrentTransactions-like answers (the previous
// transaction still completing) are retried by the caller, the Producer.
type TxnClient interface {
	Client
	// InitTxnProducerID is InitProducerId with a transactional id: the
	// id's producer id and a new epoch, which fences the producers of
	// older epochs and aborts the id's open transaction. current, when not
	// {-1, -1}, is the producer's own id and epoch (KIP-360: bump the
	// epoch of a producer that recovers from an error).
	InitTxnProducerID(ctx context.Context, transactionalID string, timeout time.Duration, current ProducerID) (ProducerID, error)
	// AddPartitionsToTxn adds partitions to the producer's transaction.
	AddPartitionsToTxn(ctx context.Context, transactionalID string, pid ProducerID, tps []TopicPartition) error
	// AddOffsetsToTxn adds the group's __consumer_offsets partition to the
	// producer's transaction.
	AddOffsetsToTxn(ctx context.Context, transactionalID string, pid ProducerID, group string) error
	// TxnCommitOffsets commits a group's offsets in the producer's
	// transaction (Kafka's TxnOffsetCommit).
	TxnCommitOffsets(ctx context.Context, req group.TxnCommitRequest) error
	// EndTxn commits or aborts the producer's transaction; it returns the
	// producer's id and epoch for its next transaction (a new epoch under
	// KIP-890's transaction version 2, else the same).
	EndTxn(ctx context.Context, transactionalID string, pid ProducerID, commit bool) (ProducerID, error)
}

// GroupMetadata is what SendOffsetsToTransaction needs of a consumer's
// group membership (Kafka's ConsumerGroupMetadata): the coordinator fences
// a member that lost its partitions (KIP-447). Consumer.GroupMetadata
// returns it; a zero Generation other than -1 is a member's.
type GroupMetadata struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32 // -1: none (the offsets are checked against nothing)
}

// GroupMetadata returns the consumer's group, member id and generation
// (its member epoch in the consumer protocol) now, for
// Producer.SendOffsetsToTransaction.
func (c *Consumer) GroupMetadata() GroupMetadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	gm := GroupMetadata{Group: c.cfg.Group, MemberID: c.memberID, Generation: c.generation}
	if c.memberID == "" {
		gm.Generation = -1
	}
	return gm
}

// States of a transactional producer.
const (
	txnReady      int8 = iota // no transaction: BeginTransaction may start one
	txnInProgress             // records and offsets go into it
	txnEnding                 // CommitTransaction or AbortTransaction under way: no sends
	txnAbortable              // a commit failed: only AbortTransaction
)

// txnProducer is the transactional part of a Producer. state, added,
// offsetsAdded and err are guarded by the Producer's mu; ops serializes
// the application's transaction calls, addMu the AddPartitionsToTxn calls
// of the senders (taken before mu).
type txnProducer struct {
	c       TxnClient
	id      string
	timeout time.Duration

	ops   sync.Mutex
	addMu sync.Mutex

	state        int8
	added        map[TopicPartition]bool // partitions in the current transaction
	offsetsAdded map[string]bool         // groups whose offsets partition is in it
	err          error                   // the first failure in it: it must abort
	bump         bool                    // a new epoch before the next transaction (KIP-360)
}

// newTxnProducer checks that c serves transactions.
func newTxnProducer(c Client, cfg ProducerConfig) (*txnProducer, error) {
	tc, ok := c.(TxnClient)
	if !ok {
		return nil, fmt.Errorf("%w: producer: transactional id %q: the client (%T) does not serve transactions: %w", ErrInvalidConfig, cfg.TransactionalID, c, ErrTransactionsUnsupported)
	}
	return &txnProducer{c: tc, id: cfg.TransactionalID, timeout: cfg.TransactionTimeout,
		added: map[TopicPartition]bool{}, offsetsAdded: map[string]bool{}}, nil
}

// sendableLocked is the error of a send now: nil inside a transaction.
func (t *txnProducer) sendableLocked() error {
	switch t.state {
	case txnInProgress:
		return nil
	case txnAbortable:
		return fmt.Errorf("%w: send in transaction of %q: %w", ErrInvalidTxnState, t.id, ErrTransactionAbortable)
	}
	return fmt.Errorf("%w: send outside a transaction of %q (BeginTransaction first)", ErrInvalidTxnState, t.id)
}

// failLocked records err, a failure inside the transaction.
func (t *txnProducer) failLocked(err error) {
	if t.err == nil && (t.state == txnInProgress || t.state == txnEnding) {
		t.err = err
	}
}

// InitTransactions gets the producer's identity from the transaction
// coordinator now (Kafka's initTransactions): it fences older producers of
// the transactional id and waits for the transaction one of them left
// open to be aborted, or completed if it was committing. An application
// that consumes and produces calls it before it reads its group's
// committed offsets. Without it, the first call that needs the identity
// does it.
func (p *Producer) InitTransactions(ctx context.Context) error {
	t, err := p.txnOps()
	if err != nil {
		return err
	}
	defer t.ops.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ensureTxnPIDLocked(ctx)
}

// BeginTransaction starts a transaction: the records sent until
// CommitTransaction or AbortTransaction belong to it. A transaction in
// progress, or one that failed and was not aborted, is
// ErrInvalidTxnState.
func (p *Producer) BeginTransaction() error {
	t, err := p.txnOps()
	if err != nil {
		return err
	}
	defer t.ops.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	if t.state != txnReady {
		return fmt.Errorf("%w: begin a transaction of %q while one is %s", ErrInvalidTxnState, t.id, txnStateName(t.state))
	}
	t.state, t.err = txnInProgress, nil
	return nil
}

// SendOffsetsToTransaction commits the consumer group's offsets (for each
// partition, the offset of the next record to consume) in the
// transaction: they take effect, atomically with its records, when it
// commits. meta is the consumer's GroupMetadata, which the coordinator
// checks (a member that lost its partitions is refused:
// ErrIllegalGeneration, ErrUnknownMember). A failure makes the
// transaction abortable.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[TopicPartition]int64, meta GroupMetadata) error {
	t, err := p.txnOps()
	if err != nil {
		return err
	}
	defer t.ops.Unlock()
	p.mu.Lock()
	if err := p.usableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	if t.state != txnInProgress {
		p.mu.Unlock()
		return fmt.Errorf("%w: send offsets outside a transaction of %q", ErrInvalidTxnState, t.id)
	}
	if err := p.ensureTxnPIDLocked(ctx); err != nil {
		t.failLocked(err)
		p.mu.Unlock()
		return err
	}
	pid, added := p.pid, t.offsetsAdded[meta.Group]
	p.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	if !added {
		err = p.retryTxn(ctx, func(ctx context.Context) error { return t.c.AddOffsetsToTxn(ctx, t.id, pid, meta.Group) })
	}
	if err == nil {
		req := group.TxnCommitRequest{TransactionalID: t.id, Group: meta.Group, ProducerID: pid.ID, ProducerEpoch: pid.Epoch,
			MemberID: meta.MemberID, GroupInstanceID: meta.InstanceID, Generation: meta.Generation,
			Offsets: make(map[TopicPartition]group.CommittedOffset, len(offsets))}
		for tp, off := range offsets {
			req.Offsets[tp] = group.CommittedOffset{Offset: off, LeaderEpoch: -1}
		}
		err = p.retryTxn(ctx, func(ctx context.Context) error { return t.c.TxnCommitOffsets(ctx, req) })
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("log: producer: send offsets of group %q to transaction of %q: %w", meta.Group, t.id, err)
		p.txnErrLocked(err)
		return err
	}
	t.offsetsAdded[meta.Group] = true
	return nil
}

// CommitTransaction sends every record of the transaction, waits for them
// all, and commits it: its records and offsets become visible together.
// If a record or offset commit of it failed, it commits nothing and
// returns an error matching ErrTransactionAbortable: call
// AbortTransaction. If ctx ends first, or the coordinator cannot be
// reached, it returns the error and the transaction stays in progress:
// CommitTransaction may be called again (or AbortTransaction).
func (p *Producer) CommitTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, true)
}

// AbortTransaction waits for the records of the transaction sent so far
// (they are written, and aborted with it) and aborts it: READ_COMMITTED
// consumers never see its records, and its offsets are dropped.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	return p.endTransaction(ctx, false)
}

func (p *Producer) endTransaction(ctx context.Context, commit bool) error {
	t, err := p.txnOps()
	if err != nil {
		return err
	}
	defer t.ops.Unlock()
	verb := "abort"
	if commit {
		verb = "commit"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	switch {
	case t.state == txnReady, commit && t.state == txnAbortable:
		return fmt.Errorf("%w: %s with no transaction of %q in progress (%s)", ErrInvalidTxnState, verb, t.id, txnStateName(t.state))
	}
	prev := t.state
	t.state = txnEnding // no more sends
	// Once every batch has its outcome the coordinator is asked, while the
	// last ones' callbacks may still run; the call returns once they have
	// all run (completed), as Kafka's commitTransaction flushes first.
	targets := p.sendAllLocked()
	if err := p.waitResolvedLocked(ctx, targets); err != nil {
		t.state = prev
		return err
	}
	if commit && t.err != nil || p.fatal != nil {
		p.waitLocked(context.WithoutCancel(ctx), targets) // resolved: their callbacks are under way
		if p.fatal != nil {
			return p.fatal
		}
		t.state = txnAbortable
		return fmt.Errorf("log: producer: commit transaction of %q: %w: %w", t.id, ErrTransactionAbortable, t.err)
	}
	defer p.waitLocked(context.WithoutCancel(ctx), targets)
	if len(t.added) > 0 || len(t.offsetsAdded) > 0 {
		if err := p.ensureTxnPIDLocked(ctx); err != nil {
			t.state = prev
			return err
		}
		pid := p.pid
		p.mu.Unlock()
		var next ProducerID
		err := p.retryTxn(ctx, func(ctx context.Context) error {
			var err error
			next, err = t.c.EndTxn(ctx, t.id, pid, commit)
			return err
		})
		p.mu.Lock()
		if err != nil {
			err = fmt.Errorf("log: producer: %s transaction of %q: %w", verb, t.id, err)
			if fenced(err) {
				err = asFenced(err)
				p.fenceLocked(pid, err)
				return err
			}
			t.state = prev // the same call again retries it (it may have been decided)
			return err
		}
		if next != pid && next.ID >= 0 {
			p.pid = next // KIP-890: the next transaction at a new epoch, from sequence 0
		}
	}
	if !commit && t.err != nil {
		// Sequences may be broken in some partition: a new epoch
		// (KIP-360) before the next transaction (by the next call that
		// needs the identity if this one fails).
		t.bump = true
		_ = p.ensureTxnPIDLocked(ctx)
	}
	t.state, t.err = txnReady, nil
	clear(t.added)
	clear(t.offsetsAdded)
	return nil
}

// txnOps returns the producer's transactional part with its ops lock
// taken, or ErrTransactionalIDRequired.
func (p *Producer) txnOps() (*txnProducer, error) {
	if p.txn == nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTxnState, ErrTransactionalIDRequired)
	}
	p.txn.ops.Lock()
	return p.txn, nil
}

// usableLocked is the error of a call on a closed or fenced producer.
func (p *Producer) usableLocked() error {
	switch {
	case p.closed:
		return errProducerClosed
	case p.fatal != nil:
		return p.fatal
	}
	return nil
}

// txnErrLocked records a failure in the transaction: fatal if fenced.
func (p *Producer) txnErrLocked(err error) {
	if fenced(err) {
		p.fenceLocked(p.pid, asFenced(err))
		return
	}
	p.txn.failLocked(err)
}

// fenceLocked makes err the producer's fatal error.
func (p *Producer) fenceLocked(pid ProducerID, err error) {
	if p.fatal == nil {
		p.fatal = err
		p.cfg.Logger.Error("transactional producer fenced: every later call fails", "transactional_id", p.txn.id,
			"producer", pid.ID, "epoch", pid.Epoch, "err", err)
	}
}

// ensureTxnPIDLocked gets the producer's identity if it has none (or
// needs a new epoch), within ctx; it releases mu meanwhile.
func (p *Producer) ensureTxnPIDLocked(ctx context.Context) error {
	if p.pidState == pidReady && !p.txn.bump {
		return nil
	}
	deadline := time.Now().Add(p.cfg.Timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return p.ensurePIDLocked(deadline)
}

// initTxnPID is the transactional producer's InitProducerID: with the
// transactional id, and its current identity when it bumps its epoch.
// Called by ensurePIDLocked without mu.
func (p *Producer) initTxnPID(ctx context.Context, current ProducerID) (ProducerID, error) {
	t := p.txn
	var pid ProducerID
	err := p.retryTxn(ctx, func(ctx context.Context) error {
		var err error
		pid, err = t.c.InitTxnProducerID(ctx, t.id, t.timeout, current)
		return err
	})
	return pid, asFenced(err)
}

// addToTxnLocked adds ps's partition to the transaction before its first
// batch in it goes; mu is released while the coordinator is asked.
func (p *Producer) addToTxnLocked(ps *partState, pid ProducerID, deadline time.Time) error {
	t := p.txn
	if t.added[ps.tp] {
		return nil
	}
	p.mu.Unlock()
	t.addMu.Lock()
	p.lockBehind()
	if t.added[ps.tp] {
		t.addMu.Unlock()
		return nil
	}
	p.mu.Unlock()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	err := p.retryTxn(ctx, func(ctx context.Context) error {
		return t.c.AddPartitionsToTxn(ctx, t.id, pid, []TopicPartition{ps.tp})
	})
	cancel()
	p.lockBehind()
	t.addMu.Unlock()
	if err != nil {
		err = fmt.Errorf("log: producer: add %s-%d to transaction of %q: %w", ps.tp.Topic, ps.tp.Partition, t.id, asFenced(err))
		if fenced(err) {
			p.fenceLocked(pid, err)
		}
		return err
	}
	t.added[ps.tp] = true
	return nil
}

// waitResolvedLocked waits until every batch of targets has its outcome,
// acknowledged or failed (their callbacks may still be running), or ctx
// ends. A transaction's batches are not completed by then but decided:
// EndTxn need not wait for their callbacks.
func (p *Producer) waitResolvedLocked(ctx context.Context, targets []flushTarget) error {
	for {
		pending := false
		for _, tg := range targets {
			if tg.ps.unresolved > 0 {
				pending = true
				break
			}
		}
		if !pending {
			return nil
		}
		ch := p.watchLocked()
		p.mu.Unlock()
		select {
		case <-ch:
			p.mu.Lock()
		case <-ctx.Done():
			p.mu.Lock()
			return ctx.Err()
		}
	}
}

// txnEagerBytes is the size from which a transaction's open batch goes
// without waiting out the Linger, once no other batch of its partition is
// in flight (txnEagerLocked).
const txnEagerBytes = 32 << 10

// txnEagerLocked reports whether b, the open batch of a partition with no
// batch in flight, goes now rather than after the Linger: in a transaction,
// once it holds txnEagerBytes. CommitTransaction sends and waits for every
// batch of the transaction, so a batch held back for the Linger is sent by
// the commit all the same, on its critical path, while the caller waits;
// sent now, it is written while the caller builds the next one, and the
// commit waits only for the last. Smaller batches still linger, so a
// transaction that trickles does not send a batch per record.
func (p *Producer) txnEagerLocked(b *pbatch) bool {
	return p.txn != nil && b.bd.Size() >= txnEagerBytes
}

// retryTxn calls f until it succeeds, fails for good, or ctx ends: the
// coordinator's "coordinator loading or moved" answers are retried after
// RetryBackoff, doubling up to a second; its "previous transaction still
// completing" answer (ErrConcurrentTransactions, which lasts only the
// markers' writes) after concurrentTxnBackoff, not doubling, as Kafka's
// producer does (it retries that answer after 20 ms).
func (p *Producer) retryTxn(ctx context.Context, f func(ctx context.Context) error) error {
	backoff := p.cfg.RetryBackoff
	for {
		err := f(ctx)
		if err == nil || !retriableTxn(err) {
			return err
		}
		wait := backoff
		if errors.Is(err, txn.ErrConcurrentTransactions) {
			wait = min(backoff, concurrentTxnBackoff)
		} else {
			backoff = min(2*backoff, maxRetryBackoff)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: last error: %w", ctx.Err(), err)
		}
	}
}

// concurrentTxnBackoff is the most retryTxn waits before asking again
// after ErrConcurrentTransactions (Kafka's producer: 20 ms).
const concurrentTxnBackoff = 20 * time.Millisecond

// retriableTxn reports whether a coordinator's answer may change by
// itself: the previous transaction still completing, the coordinator
// loading or elsewhere, a broker unreachable.
func retriableTxn(err error) bool {
	return errors.Is(err, txn.ErrConcurrentTransactions) || transient(err)
}

// fenced reports whether err says a newer producer of the transactional id
// took over: the partition's or the coordinator's answer (PRODUCER_FENCED,
// or INVALID_PRODUCER_EPOCH to older requests).
func fenced(err error) bool {
	return errors.Is(err, ErrProducerFenced) || errors.Is(err, txn.ErrProducerFenced) || errors.Is(err, txn.ErrInvalidProducerEpoch)
}

// asFenced makes a fencing answer of the coordinator match
// ErrProducerFenced, the producer's one word for it.
func asFenced(err error) error {
	if fenced(err) && !errors.Is(err, ErrProducerFenced) {
		return fmt.Errorf("%w: %w", ErrProducerFenced, err)
	}
	return err
}

func txnStateName(s int8) string {
	switch s {
	case txnReady:
		return "not begun"
	case txnInProgress:
		return "in progress"
	case txnEnding:
		return "ending"
	case txnAbortable:
		return "failed: abort it"
	}
	return "unknown"
}
