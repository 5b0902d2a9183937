package txn

import (
	"errors"
	"math"
	"testing"

	"github.com/strata-log/strata/tp"
	"github.com/stretchr/testify/require"
)

// The cases of Kafka's TransactionCoordinatorTest, as tables over the
// machine: the metadata Kafka's test mocks getTransactionState with is put
// in the machine, the request stepped, and the reply and the record to
// write checked.

func TestInitProducerID(t *testing.T) {
	exp := func(id int64, e int16) *ProducerIDEpoch { return &ProducerIDEpoch{id, e} }
	cases := []struct {
		name     string
		meta     *Metadata // nil: no state for the id
		id       string
		timeout  *int32 // nil: timeoutMs
		expected *ProducerIDEpoch
		wantErr  error
		// Without an error: the record written and the answer once written.
		wantID    int64
		wantEpoch int16
		wantLast  int16
	}{
		{name: "shouldReturnInvalidRequestWhenTransactionalIdIsEmpty", id: "-", wantErr: ErrInvalidRequest},
		{name: "transaction timeout above transaction.max.timeout.ms", timeout: ptr(maxTimeout + 1), wantErr: ErrInvalidTransactionTimeout},
		{name: "transaction timeout zero", timeout: ptr(int32(0)), wantErr: ErrInvalidTransactionTimeout},
		{name: "transaction timeout negative", timeout: ptr(int32(-5)), wantErr: ErrInvalidTransactionTimeout},
		{name: "transaction timeout at the maximum", timeout: ptr(maxTimeout), wantErr: nil, wantID: 100, wantEpoch: 0, wantLast: NoProducerEpoch},
		{name: "shouldInitPidWithEpochZeroForNewTransactionalId", wantID: 100, wantEpoch: 0, wantLast: NoProducerEpoch},
		{name: "shouldGenerateNewProducerIdIfNoStateAndProducerIdAndEpochProvided", expected: exp(pid, 1),
			wantID: 100, wantEpoch: 0, wantLast: NoProducerEpoch},
		{name: "shouldGenerateNewProducerIdIfEpochsExhausted", meta: ptr(md(pid, math.MaxInt16-1, NoProducerEpoch, Empty, 0)),
			wantID: 100, wantEpoch: 0, wantLast: NoProducerEpoch},
		{name: "shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExistingEmptyTransaction",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, 0)), wantID: pid, wantEpoch: pepoch + 1, wantLast: NoProducerEpoch},
		{name: "shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExistingCompleteTransaction/TV0",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteAbort, 0)), wantID: pid, wantEpoch: pepoch + 1, wantLast: NoProducerEpoch},
		{name: "shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExistingCompleteTransaction/TV2",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteAbort, TV2)), wantID: pid, wantEpoch: pepoch + 1, wantLast: NoProducerEpoch},
		{name: "shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExistingCompleteCommitTransaction/TV0",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteCommit, 0)), wantID: pid, wantEpoch: pepoch + 1, wantLast: NoProducerEpoch},
		{name: "shouldIncrementEpochAndUpdateMetadataOnHandleInitPidWhenExistingCompleteCommitTransaction/TV2",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteCommit, TV2)), wantID: pid, wantEpoch: pepoch + 1, wantLast: NoProducerEpoch},
		{name: "shouldWaitForCommitToCompleteOnHandleInitPidAndExistingTransactionInPrepareCommitState",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareCommit, 0, topic1)), wantErr: ErrConcurrentTransactions},
		{name: "shouldWaitForCommitToCompleteOnHandleInitPidAndExistingTransactionInPrepareAbortState",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareAbort, 0, topic1)), wantErr: ErrConcurrentTransactions},
		{name: "testInitProducerIdWithNoLastProducerData", // written by an old broker: no previous id
			meta: ptr(withPrev(md(pid, pepoch+1, NoProducerEpoch, Empty, 0), NoProducerID)), expected: exp(pid+1, pepoch), wantErr: ErrProducerFenced},
		{name: "testFenceProducerWhenMappingExistsWithDifferentProducerId",
			meta: ptr(withPrev(md(pid+1, pepoch, pepoch-1, Empty, 0), pid)), expected: exp(pid, pepoch), wantErr: ErrProducerFenced},
		{name: "testInitProducerIdWithCurrentEpochProvided",
			meta: ptr(md(pid, 10, 9, Empty, 0)), expected: exp(pid, 10), wantID: pid, wantEpoch: 11, wantLast: 10},
		{name: "testInitProducerIdWithCurrentEpochProvided/retry",
			meta: ptr(md(pid, 11, 10, Empty, 0)), expected: exp(pid, 10), wantID: pid, wantEpoch: 11, wantLast: 10},
		{name: "testInitProducerIdStaleCurrentEpochProvided",
			meta: ptr(md(pid, 11, NoProducerEpoch, Empty, 0)), expected: exp(pid, 10), wantErr: ErrProducerFenced},
		{name: "testRetryInitProducerIdAfterProducerIdRotation",
			meta: ptr(md(pid, math.MaxInt16-1, math.MaxInt16-2, Empty, 0)), expected: exp(pid, math.MaxInt16-1),
			wantID: 100, wantEpoch: 0, wantLast: math.MaxInt16 - 1},
		{name: "testRetryInitProducerIdAfterProducerIdRotation/retry",
			meta: ptr(withPrev(md(100, 0, math.MaxInt16-1, Empty, 0), pid)), expected: exp(pid, math.MaxInt16-1),
			wantID: 100, wantEpoch: 0, wantLast: math.MaxInt16 - 1},
		{name: "testInitProducerIdWithInvalidEpochAfterProducerIdRotation",
			meta: ptr(withPrev(md(100, 0, math.MaxInt16-1, Empty, 0), pid)), expected: exp(pid, math.MaxInt16-2), wantErr: ErrProducerFenced},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, alloc := newTestMachine(0)
			if c.meta != nil {
				m.put(tid, *c.meta)
			}
			id := tid
			if c.id == "-" {
				id = ""
			}
			timeout := timeoutMs
			if c.timeout != nil {
				timeout = *c.timeout
			}
			effs := m.step(nowMs+5, initEvent{id: id, waiter: 1, timeoutMs: timeout, expected: c.expected})
			if c.wantErr != nil {
				requireResult(t, replyOf(t, effs), c.wantErr, 0, 0)
				require.Nil(t, appendOf(t, effs))
				if c.meta != nil {
					require.Equal(t, *c.meta, m.txns[tid].meta, "a refused request changes nothing")
					require.Nil(t, m.txns[tid].pending)
				}
				return
			}
			noReply(t, effs)
			w := appendOf(t, effs)
			require.NotNil(t, w)
			require.Equal(t, Empty, w.State)
			require.Equal(t, c.wantID, w.ProducerID)
			require.Equal(t, c.wantEpoch, w.ProducerEpoch)
			require.Equal(t, c.wantLast, w.LastProducerEpoch)
			require.Equal(t, timeout, w.TimeoutMs)
			require.Equal(t, int64(-1), w.StartMs)
			require.Equal(t, nowMs+5, w.LastUpdateMs)
			require.Empty(t, w.Partitions)
			if c.wantID == 100 && (c.meta == nil || c.meta.ProducerID != 100) {
				require.Equal(t, 1, alloc.calls)
			} else {
				require.Equal(t, 0, alloc.calls)
			}
			// While it is written, another InitProducerId waits.
			requireResult(t, replyOf(t, m.step(nowMs+6, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})), ErrConcurrentTransactions, 0, 0)
			effs = m.step(nowMs+7, appendedEvent{id: tid})
			requireResult(t, replyOf(t, effs), nil, c.wantID, c.wantEpoch)
			require.Equal(t, *w, m.txns[tid].meta)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func withPrev(m Metadata, prev int64) Metadata { m.PrevProducerID = prev; return m }

func TestInitProducerIDAppendFails(t *testing.T) {
	// A failed write answers its error and leaves the metadata as it was.
	m, _ := newTestMachine(0)
	before := md(pid, pepoch, NoProducerEpoch, Empty, 0)
	m.put(tid, before)
	effs := m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
	require.NotNil(t, appendOf(t, effs))
	notEnough := errors.New("not enough replicas")
	requireResult(t, replyOf(t, m.step(nowMs, appendedEvent{id: tid, err: notEnough})), notEnough, 0, 0)
	require.Equal(t, before, m.txns[tid].meta)
	require.Nil(t, m.txns[tid].pending)
	// A producer id that cannot be allocated is answered with the error.
	m, alloc := newTestMachine(0)
	alloc.err = errors.New("no controller")
	requireResult(t, replyOf(t, m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})), alloc.err, 0, 0)
}

func TestInitProducerIDFencesOngoingTransaction(t *testing.T) {
	// shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState:
	// the open transaction is aborted at a bumped epoch, the client told to
	// retry; its retry, after the abort completes, bumps again.
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, pepoch, pepoch-1, Ongoing, 0, topic1))
	effs := m.step(nowMs+1, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
	noReply(t, effs)
	w := appendOf(t, effs)
	want := md(pid, pepoch+1, NoProducerEpoch, PrepareAbort, 0, topic1)
	want.LastUpdateMs = nowMs + 1
	require.Equal(t, want, *w)

	effs = m.step(nowMs+2, appendedEvent{id: tid})
	requireResult(t, replyOf(t, effs), ErrConcurrentTransactions, 0, 0)
	mk := markersOf(effs)
	require.Equal(t, &effMarkers{id: tid, commit: false, producerID: pid, epoch: pepoch + 1, partitions: oneParts}, mk)
	requireResult(t, replyOf(t, m.step(nowMs+3, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})), ErrConcurrentTransactions, 0, 0)

	effs = m.step(nowMs+4, markerEvent{id: tid, p: topic1})
	w = appendOf(t, effs)
	require.Equal(t, CompleteAbort, w.State)
	require.Empty(t, m.step(nowMs+5, appendedEvent{id: tid}))
	require.Equal(t, CompleteAbort, m.txns[tid].meta.State)

	effs = m.step(nowMs+6, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
	require.Equal(t, pepoch+2, appendOf(t, effs).ProducerEpoch)
	requireResult(t, replyOf(t, m.step(nowMs+7, appendedEvent{id: tid})), nil, pid, pepoch+2)
}

func TestInitProducerIDFenceWriteFails(t *testing.T) {
	// shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1))
	notEnough := errors.New("NOT_ENOUGH_REPLICAS")
	for range 2 {
		effs := m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
		require.Equal(t, pepoch+1, appendOf(t, effs).ProducerEpoch)
		requireResult(t, replyOf(t, m.step(nowMs, appendedEvent{id: tid, err: notEnough})), notEnough, 0, 0)
		e := m.txns[tid]
		require.Equal(t, pepoch+1, e.meta.ProducerEpoch, "bumped in memory, never handed out")
		require.True(t, e.failedFence)
		require.Equal(t, Ongoing, e.meta.State)
	}
	effs := m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
	require.Equal(t, pepoch+1, appendOf(t, effs).ProducerEpoch, "not bumped again")
	requireResult(t, replyOf(t, m.step(nowMs, appendedEvent{id: tid})), ErrConcurrentTransactions, 0, 0)
	require.False(t, m.txns[tid].failedFence)
	require.Equal(t, pepoch+1, m.txns[tid].meta.ProducerEpoch)
}

func TestInitProducerIDFenceAtExhaustedEpoch(t *testing.T) {
	// shouldUseLastEpochToFenceWhenEpochsAreExhausted: the fence takes
	// MaxInt16; the retry after the abort rotates the producer id.
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, math.MaxInt16-1, math.MaxInt16-2, Ongoing, 0, topic1))
	effs := m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
	w := appendOf(t, effs)
	want := md(pid, math.MaxInt16, NoProducerEpoch, PrepareAbort, 0, topic1)
	require.Equal(t, want, *w)
	effs = m.step(nowMs, appendedEvent{id: tid})
	requireResult(t, replyOf(t, effs), ErrConcurrentTransactions, 0, 0)
	require.Equal(t, int16(math.MaxInt16), m.txns[tid].meta.ProducerEpoch)
	m.step(nowMs, markerEvent{id: tid, p: topic1})
	m.step(nowMs, appendedEvent{id: tid})
	effs = m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
	w = appendOf(t, effs)
	require.Equal(t, int64(100), w.ProducerID)
	require.Equal(t, int16(0), w.ProducerEpoch)
}

func TestInitProducerIDPendingTransition(t *testing.T) {
	// shouldNotBumpEpochWithPendingTransaction
	m, _ := newTestMachine(0)
	e := m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1))
	to, err := e.meta.prepareEnd(PrepareCommit, 0, NoProducerID, nowMs, false)
	require.NoError(t, err)
	e.pending = &to
	requireResult(t, replyOf(t, m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs, expected: &ProducerIDEpoch{pid, 10}})),
		ErrConcurrentTransactions, 0, 0)
}

func TestAddPartitions(t *testing.T) {
	cases := []struct {
		name    string
		meta    *Metadata
		id      string
		epoch   int16
		parts   []tp.TopicPartition
		tv      int16
		pending bool
		wantErr error
		// Without an error: whether a record is written (else the answer is
		// at once), and the partitions it holds.
		writes    bool
		wantParts []tp.TopicPartition
		wantStart int64
	}{
		{name: "shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent", wantErr: ErrInvalidProducerIDMapping},
		{name: "shouldRespondWithInvalidRequestAddPartitionsToTransactionWhenTransactionalIdIsEmpty", id: "-", wantErr: ErrInvalidRequest},
		{name: "shouldRespondWithConcurrentTransactionsOnAddPartitionsWhenStateIsPrepareCommit",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareCommit, 0, topic1)), wantErr: ErrConcurrentTransactions},
		{name: "shouldRespondWithConcurrentTransactionOnAddPartitionsWhenStateIsPrepareAbort",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareAbort, 0, topic1)), wantErr: ErrConcurrentTransactions},
		{name: "pending transition", meta: ptr(md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1)), pending: true,
			parts: []tp.TopicPartition{topic2}, wantErr: ErrConcurrentTransactions},
		{name: "shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent",
			meta: ptr(md(pid, 10, 9, PrepareCommit, 0)), epoch: 9, wantErr: ErrProducerFenced},
		{name: "another producer id", meta: ptr(md(pid+1, pepoch, NoProducerEpoch, Empty, 0)), wantErr: ErrInvalidProducerIDMapping},
		{name: "shouldAppendNewMetadataToLogOnAddPartitionsWhenPartitionsAdded",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, 0)), writes: true, wantParts: oneParts, wantStart: nowMs + 5},
		{name: "shouldRespondWithSuccessOnAddPartitionsWhenStateIsOngoing",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic2)), writes: true, wantParts: []tp.TopicPartition{topic1, topic2}, wantStart: nowMs},
		{name: "shouldRespondWithSuccessOnAddPartitionsWhenStateIsCompleteCommit/TV0",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteCommit, 0)), writes: true, wantParts: oneParts, wantStart: nowMs + 5},
		{name: "shouldRespondWithSuccessOnAddPartitionsWhenStateIsCompleteCommit/TV2", tv: TV2,
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteCommit, TV2)), writes: true, wantParts: oneParts, wantStart: nowMs + 5},
		{name: "shouldRespondWithSuccessOnAddPartitionsWhenStateIsCompleteAbort/TV0",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteAbort, 0)), writes: true, wantParts: oneParts, wantStart: nowMs + 5},
		{name: "shouldRespondWithSuccessOnAddPartitionsWhenStateIsCompleteAbort/TV2", tv: TV2,
			meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteAbort, TV2)), writes: true, wantParts: oneParts, wantStart: nowMs + 5},
		{name: "shouldRespondWithErrorsNoneOnAddPartitionWhenNoErrorsAndPartitionsTheSame",
			meta: ptr(md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1)), writes: false},
		{name: "KIP-890 implicit add from the partition leader (TV2)", tv: TV2,
			meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, TV2)), writes: true, wantParts: oneParts, wantStart: nowMs + 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := newTestMachine(0)
			if c.meta != nil {
				e := m.put(tid, *c.meta)
				if c.pending {
					e.pending = ptr(e.meta.clone())
				}
			}
			id := tid
			if c.id == "-" {
				id = ""
			}
			epoch := pepoch
			if c.epoch != 0 {
				epoch = c.epoch
			}
			parts := c.parts
			if parts == nil {
				parts = oneParts
			}
			effs := m.step(nowMs+5, addEvent{id: id, waiter: 1, producerID: pid, epoch: epoch, partitions: parts, clientTV: c.tv})
			if c.wantErr != nil {
				requireResult(t, replyOf(t, effs), c.wantErr, 0, 0)
				require.Nil(t, appendOf(t, effs))
				return
			}
			if !c.writes {
				requireResult(t, replyOf(t, effs), nil, pid, epoch)
				require.Nil(t, appendOf(t, effs))
				return
			}
			noReply(t, effs)
			w := appendOf(t, effs)
			require.Equal(t, Ongoing, w.State)
			require.Equal(t, c.wantParts, w.Partitions)
			require.Equal(t, c.wantStart, w.StartMs)
			require.Equal(t, nowMs+5, w.LastUpdateMs)
			require.Equal(t, c.tv, w.ClientTransactionVersion)
			effs = m.step(nowMs+6, appendedEvent{id: tid})
			requireResult(t, replyOf(t, effs), nil, pid, epoch)
			require.Contains(t, effs, effect(effArm{id: tid, atMs: c.wantStart + int64(timeoutMs) + 1}))
			require.Equal(t, *w, m.txns[tid].meta)
		})
	}
}

func TestVerifyPartitions(t *testing.T) {
	// testVerifyPartitionHandling,
	// shouldRespondWithErrorsNoneOnAddPartitionWhenOngoingVerifyOnlyAndPartitionsTheSame,
	// shouldRespondWithInvalidTxnStateWhenVerifyOnlyAndPartitionNotPresent
	// (TRANSACTION_ABORTABLE since KIP-890).
	m, _ := newTestMachine(0)
	two := []tp.TopicPartition{topic1, topic2}
	all := func(err error) map[tp.TopicPartition]error {
		return map[tp.TopicPartition]error{topic1: err, topic2: err}
	}
	require.Equal(t, all(ErrInvalidProducerIDMapping), m.verify(tid, pid, pepoch, two))
	require.Equal(t, all(ErrInvalidRequest), m.verify("", pid, pepoch, two))
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1))
	require.Equal(t, map[tp.TopicPartition]error{topic1: nil}, m.verify(tid, pid, pepoch, oneParts))
	require.Equal(t, map[tp.TopicPartition]error{topic1: nil, topic2: ErrTransactionAbortable}, m.verify(tid, pid, pepoch, two))
	require.Equal(t, all(ErrProducerFenced), m.verify(tid, pid, pepoch-1, two))
	require.Equal(t, all(ErrInvalidProducerIDMapping), m.verify(tid, pid+1, pepoch, two))
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Empty, 0, topic1))
	require.Equal(t, map[tp.TopicPartition]error{topic1: nil, topic2: ErrTransactionAbortable}, m.verify(tid, pid, pepoch, two))
	m.put(tid, md(pid, pepoch, NoProducerEpoch, PrepareCommit, 0, topic1))
	require.Equal(t, all(ErrConcurrentTransactions), m.verify(tid, pid, pepoch, two))
}

// requestEpoch is Kafka's test helper: a TV2 client sends the epoch before
// the coordinator's last bump.
func requestEpoch(tv int16) int16 {
	if tv >= TV2 {
		return pepoch - 1
	}
	return pepoch
}

func TestEndTxn(t *testing.T) {
	type endCase struct {
		name    string
		meta    *Metadata
		id      string
		pid     int64
		epoch   int16
		commit  bool
		tv      int16
		wantErr error
		// Without an error: the answer at once (writes false), or the
		// Prepare record written and the answer once it is.
		writes    bool
		wantState State
		wantID    int64
		wantEpoch int16
	}
	var cases []endCase
	for _, tv := range []int16{0, TV2} {
		sfx := "/TV0"
		if tv == TV2 {
			sfx = "/TV2"
		}
		cases = append(cases, []endCase{
			{name: "shouldReplyWithInvalidPidMappingOnEndTxnWhenTxnIdDoesntExist", pid: 0, epoch: 0, commit: true, wantErr: ErrInvalidProducerIDMapping},
			{name: "shouldReplyWithInvalidPidMappingOnEndTxnWhenPidDosentMatchMapped", meta: ptr(md(10, 0, NoProducerEpoch, Ongoing, 0)),
				pid: 0, epoch: 0, commit: true, wantErr: ErrInvalidProducerIDMapping},
			{name: "shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction", meta: ptr(md(pid, pepoch, pepoch-1, Ongoing, 0)),
				pid: pid, epoch: 0, commit: true, wantErr: ErrProducerFenced},
			{name: "shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit", meta: ptr(md(pid, pepoch, pepoch-1, CompleteCommit, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: true, wantID: pid, wantEpoch: pepoch},
			{name: "shouldReturnOkOnEndTxnWhenStatusIsCompleteAbortAndResultIsAbort", meta: ptr(md(pid, pepoch, pepoch-1, CompleteAbort, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: false, wantID: pid, wantEpoch: pepoch},
			{name: "shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteAbortAndResultIsNotAbort", meta: ptr(md(pid, pepoch, pepoch-1, CompleteAbort, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: true, wantErr: ErrInvalidTxnState},
			{name: "shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteCommitAndResultIsNotCommit", meta: ptr(md(pid, pepoch, pepoch-1, CompleteCommit, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: false, wantErr: ErrInvalidTxnState},
			{name: "shouldReturnConcurrentTransactionsOnEndTxnRequestWhenStatusIsPrepareCommit", meta: ptr(md(pid, pepoch, pepoch-1, PrepareCommit, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: true, wantErr: ErrConcurrentTransactions},
			{name: "shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsPrepareAbort", meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareAbort, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: true, wantErr: ErrInvalidTxnState},
			{name: "shouldAppendPrepareCommitToLogOnEndTxnWhenStatusIsOngoingAndResultIsCommit", meta: ptr(md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1)),
				pid: pid, epoch: pepoch, commit: true, tv: tv, writes: true, wantState: PrepareCommit, wantID: pid, wantEpoch: pepoch + tv/TV2},
			{name: "shouldAppendPrepareAbortToLogOnEndTxnWhenStatusIsOngoingAndResultIsAbort", meta: ptr(md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1)),
				pid: pid, epoch: pepoch, commit: false, tv: tv, writes: true, wantState: PrepareAbort, wantID: pid, wantEpoch: pepoch + tv/TV2},
			{name: "shouldRespondWithInvalidRequestOnEndTxnWhenTransactionalIdIsEmpty", id: "-", commit: true, wantErr: ErrInvalidRequest},
			{name: "shouldReturnInvalidEpochOnEndTxnWhenEpochIsLarger", meta: ptr(md(pid, 1, 1, CompleteCommit, tv)),
				pid: pid, epoch: 2, commit: true, tv: tv, wantErr: ErrProducerFenced},
			{name: "shouldReturnInvalidEpochOnEndTxnWhenEpochIsSmaller", meta: ptr(md(pid, 2, 1, CompleteCommit, tv)),
				pid: pid, epoch: requestEpoch(tv), commit: true, tv: tv, wantErr: ErrProducerFenced},
		}...)
		for i := len(cases) - 14; i < len(cases); i++ {
			cases[i].name += sfx
			if cases[i].tv == 0 {
				cases[i].tv = tv
			}
		}
	}
	cases = append(cases, []endCase{
		// Kafka 4.1 answers the next EndTxn (the epoch the last one
		// answered) CONCURRENT_TRANSACTIONS while the last completes, and
		// INVALID_TXN_STATE once complete if it is a second commit (4.0:
		// PRODUCER_FENCED both, fatal to the client).
		{name: "shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry/PrepareCommit", meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareCommit, TV2)),
			pid: pid, epoch: pepoch, commit: true, tv: TV2, wantErr: ErrConcurrentTransactions},
		{name: "shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry/CompleteCommit", meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteCommit, TV2)),
			pid: pid, epoch: pepoch, commit: true, tv: TV2, wantErr: ErrInvalidTxnState},
		{name: "TV2 next abort while the commit completes", meta: ptr(md(pid, pepoch, pepoch-1, PrepareCommit, TV2)),
			pid: pid, epoch: pepoch, commit: false, tv: TV2, wantErr: ErrConcurrentTransactions},
		{name: "TV2 next abort while the abort completes", meta: ptr(md(pid, pepoch, pepoch-1, PrepareAbort, TV2)),
			pid: pid, epoch: pepoch, commit: false, tv: TV2, wantErr: ErrConcurrentTransactions},
		{name: "TV2 retried commit with the abort flag while the commit completes", meta: ptr(md(pid, pepoch, pepoch-1, PrepareCommit, TV2)),
			pid: pid, epoch: pepoch - 1, commit: false, tv: TV2, wantErr: ErrInvalidTxnState},
		{name: "TV2 epoch older than the retry's while completing", meta: ptr(md(pid, pepoch+1, pepoch, PrepareCommit, TV2)),
			pid: pid, epoch: pepoch - 1, commit: false, tv: TV2, wantErr: ErrProducerFenced},
		{name: "TV2 abort in Empty after a TV0 InitProducerId", meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, 0)),
			pid: pid, epoch: pepoch, commit: false, tv: TV2, writes: true, wantState: PrepareAbort, wantID: pid, wantEpoch: pepoch + 1},
		{name: "shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow/PrepareCommit",
			meta: ptr(withNext(md(pid, math.MaxInt16, math.MaxInt16-1, PrepareCommit, TV2), 11)),
			pid:  pid, epoch: math.MaxInt16 - 1, commit: true, tv: TV2, wantErr: ErrConcurrentTransactions},
		{name: "shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow/CompleteCommit",
			meta: ptr(withPrev(md(11, 0, NoProducerEpoch, CompleteCommit, TV2), pid)),
			pid:  pid, epoch: math.MaxInt16 - 1, commit: true, tv: TV2, wantID: 11, wantEpoch: 0},
		{name: "shouldReturnWhenTransactionVersionDowngraded/PrepareCommit", meta: ptr(md(pid, pepoch+1, NoProducerEpoch, PrepareCommit, TV2)),
			pid: pid, epoch: pepoch, commit: true, tv: 0, wantErr: ErrConcurrentTransactions},
		{name: "shouldReturnWhenTransactionVersionDowngraded/CompleteCommit", meta: ptr(md(pid, pepoch+1, NoProducerEpoch, CompleteCommit, TV2)),
			pid: pid, epoch: pepoch, commit: true, tv: 0, wantID: pid, wantEpoch: pepoch + 1},
		{name: "shouldReturnCorrectlyWhenTransactionVersionUpgraded/PrepareCommit", meta: ptr(md(pid, pepoch, NoProducerEpoch, PrepareCommit, 0)),
			pid: pid, epoch: pepoch, commit: true, tv: TV2, wantErr: ErrConcurrentTransactions},
		{name: "shouldReturnCorrectlyWhenTransactionVersionUpgraded/CompleteCommit", meta: ptr(md(pid, pepoch, NoProducerEpoch, CompleteCommit, 0)),
			pid: pid, epoch: pepoch, commit: true, tv: TV2, wantID: pid, wantEpoch: pepoch},
		// Kafka 4's TV2 abort without a transaction (the client is unsure
		// whether it started one): PrepareAbort at a bumped epoch.
		{name: "TV2 abort in Empty", meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, TV2)),
			pid: pid, epoch: pepoch, commit: false, tv: TV2, writes: true, wantState: PrepareAbort, wantID: pid, wantEpoch: pepoch + 1},
		{name: "TV2 abort in CompleteCommit", meta: ptr(md(pid, pepoch, pepoch-1, CompleteCommit, TV2)),
			pid: pid, epoch: pepoch, commit: false, tv: TV2, writes: true, wantState: PrepareAbort, wantID: pid, wantEpoch: pepoch + 1},
		{name: "TV0 abort in Empty", meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, 0)),
			pid: pid, epoch: pepoch, commit: false, tv: 0, wantErr: ErrInvalidTxnState},
		{name: "commit in Empty", meta: ptr(md(pid, pepoch, NoProducerEpoch, Empty, TV2)),
			pid: pid, epoch: pepoch, commit: true, tv: TV2, wantErr: ErrInvalidTxnState},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := newTestMachine(0)
			if c.meta != nil {
				m.put(tid, *c.meta)
			}
			id := tid
			if c.id == "-" {
				id = ""
			}
			effs := m.step(nowMs+5, endEvent{id: id, waiter: 1, producerID: c.pid, epoch: c.epoch, commit: c.commit, clientTV: c.tv})
			if c.wantErr != nil {
				requireResult(t, replyOf(t, effs), c.wantErr, 0, 0)
				require.Nil(t, appendOf(t, effs))
				if c.meta != nil {
					require.Equal(t, *c.meta, m.txns[tid].meta)
				}
				return
			}
			if !c.writes {
				requireResult(t, replyOf(t, effs), nil, c.wantID, c.wantEpoch)
				require.Nil(t, appendOf(t, effs))
				return
			}
			noReply(t, effs)
			w := appendOf(t, effs)
			require.Equal(t, c.wantState, w.State)
			require.Equal(t, c.wantEpoch, w.ProducerEpoch)
			require.Equal(t, c.meta.Partitions, w.Partitions)
			require.Equal(t, nowMs+5, w.LastUpdateMs)
			effs = m.step(nowMs+6, appendedEvent{id: tid})
			requireResult(t, replyOf(t, effs), nil, c.wantID, c.wantEpoch)
			mk := markersOf(effs)
			if len(c.meta.Partitions) == 0 {
				require.Nil(t, mk)
				require.NotNil(t, appendOf(t, effs), "no markers to write: complete at once")
			} else {
				require.Equal(t, &effMarkers{id: tid, commit: c.commit, producerID: pid, epoch: c.wantEpoch, partitions: c.meta.Partitions}, mk)
			}
		})
	}
}

func withNext(m Metadata, next int64) Metadata { m.NextProducerID = next; return m }

// run steps ev and, while the effects ask for records to be written or
// markers to be sent, reports them done; it returns every reply.
func run(t *testing.T, m *machine, now int64, ev event) []Result {
	t.Helper()
	var replies []Result
	queue := m.step(now, ev)
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		switch e := e.(type) {
		case effReply:
			replies = append(replies, e.res)
		case effAppend:
			queue = append(queue, m.step(now, appendedEvent{id: e.id})...)
		case effMarkers:
			for _, p := range e.partitions {
				queue = append(queue, m.step(now, markerEvent{id: e.id, p: p})...)
			}
		}
	}
	return replies
}

func TestTransactionLifecycle(t *testing.T) {
	for _, tv := range []int16{0, TV2} {
		m, _ := newTestMachine(tv)
		res := run(t, m, 1, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})
		requireResult(t, res[0], nil, 100, 0)
		epoch := int16(0)
		for i := range 3 {
			commit := i%2 == 0
			res = run(t, m, 2, addEvent{id: tid, waiter: 1, producerID: 100, epoch: epoch, partitions: []tp.TopicPartition{topic1, topic2}, clientTV: tv})
			requireResult(t, res[0], nil, 100, epoch)
			// The partitions are in: verification passes, a second add
			// needs no write.
			require.Equal(t, map[tp.TopicPartition]error{topic1: nil}, m.verify(tid, 100, epoch, oneParts))
			require.Empty(t, appendOf(t, m.step(3, addEvent{id: tid, waiter: 1, producerID: 100, epoch: epoch, partitions: oneParts, clientTV: tv})))
			// EndTxn: prepare, markers, complete.
			effs := m.step(4, endEvent{id: tid, waiter: 1, producerID: 100, epoch: epoch, commit: commit, clientTV: tv})
			m.step(4, appendedEvent{id: tid})
			if tv >= TV2 {
				epoch++
			}
			e := m.txns[tid]
			require.Equal(t, map[bool]State{true: PrepareCommit, false: PrepareAbort}[commit], e.meta.State)
			require.NotNil(t, e.pending, "completion pending while markers are written")
			require.NotNil(t, effs)
			requireResult(t, replyOf(t, m.step(5, addEvent{id: tid, waiter: 1, producerID: 100, epoch: epoch, partitions: oneParts, clientTV: tv})),
				ErrConcurrentTransactions, 0, 0)
			require.Empty(t, m.step(5, markerEvent{id: tid, p: topic2}))
			require.Empty(t, m.step(5, markerEvent{id: tid, p: topic2}), "a repeated marker report is ignored")
			w := appendOf(t, m.step(5, markerEvent{id: tid, p: topic1}))
			require.Equal(t, map[bool]State{true: CompleteCommit, false: CompleteAbort}[commit], w.State)
			require.Empty(t, m.step(6, appendedEvent{id: tid}))
			require.Equal(t, w.State, m.txns[tid].meta.State)
			require.Empty(t, m.txns[tid].meta.Partitions)
			// A retry of the EndTxn: the same answer.
			retryEpoch := epoch
			if tv >= TV2 {
				retryEpoch--
			}
			res = run(t, m, 7, endEvent{id: tid, waiter: 1, producerID: 100, epoch: retryEpoch, commit: commit, clientTV: tv})
			requireResult(t, res[0], nil, 100, epoch)
		}
	}
}

func TestEndTxnCompletionWriteRetried(t *testing.T) {
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1))
	m.step(nowMs, endEvent{id: tid, waiter: 1, producerID: pid, epoch: pepoch, commit: true})
	m.step(nowMs, appendedEvent{id: tid})
	w := appendOf(t, m.step(nowMs, markerEvent{id: tid, p: topic1}))
	effs := m.step(nowMs, appendedEvent{id: tid, err: errors.New("timeout")})
	require.Equal(t, []effect{effAppend{id: tid, meta: *w, retry: true}}, effs)
	require.Empty(t, m.step(nowMs, appendedEvent{id: tid}))
	require.Equal(t, CompleteCommit, m.txns[tid].meta.State)
}

func TestEndTxnEpochOverflowRotatesProducerID(t *testing.T) {
	// TV2: the EndTxn that bumps the epoch to MaxInt16 answers with the
	// next producer id at epoch 0, its markers carry MaxInt16, and the
	// completion hands the id over (testEpochBumpOnEndTxnOverflow through
	// the coordinator).
	m, alloc := newTestMachine(TV2)
	m.put(tid, md(pid, math.MaxInt16-1, NoProducerEpoch, Ongoing, TV2, topic1))
	effs := m.step(nowMs, endEvent{id: tid, waiter: 1, producerID: pid, epoch: math.MaxInt16 - 1, commit: true, clientTV: TV2})
	require.Equal(t, 1, alloc.calls)
	w := appendOf(t, effs)
	require.Equal(t, int16(math.MaxInt16), w.ProducerEpoch)
	require.Equal(t, int64(100), w.NextProducerID)
	effs = m.step(nowMs, appendedEvent{id: tid})
	requireResult(t, replyOf(t, effs), nil, 100, 0)
	require.Equal(t, &effMarkers{id: tid, commit: true, producerID: pid, epoch: math.MaxInt16, partitions: oneParts}, markersOf(effs))
	run(t, m, nowMs, markerEvent{id: tid, p: topic1})
	got := m.txns[tid].meta
	require.Equal(t, int64(100), got.ProducerID)
	require.Equal(t, pid, got.PrevProducerID)
	require.Equal(t, int16(0), got.ProducerEpoch)
	// The retry with the old id and epoch is recognized.
	res := run(t, m, nowMs, endEvent{id: tid, waiter: 1, producerID: pid, epoch: math.MaxInt16 - 1, commit: true, clientTV: TV2})
	requireResult(t, res[0], nil, 100, 0)
}

func TestTimeout(t *testing.T) {
	// shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch: the
	// coordinator fences and aborts at start + timeout.
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1))
	deadline := nowMs + int64(timeoutMs) + 1
	require.Equal(t, []effect{effArm{id: tid, atMs: deadline}}, m.step(deadline-1, timeoutEvent{id: tid}), "early: armed again")
	effs := m.step(deadline+10, timeoutEvent{id: tid})
	want := md(pid, pepoch+1, NoProducerEpoch, PrepareAbort, 0, topic1)
	want.LastUpdateMs = deadline + 10
	require.Equal(t, want, *appendOf(t, effs))
	noReply(t, effs)
	// shouldNotAbortExpiredTransactionsThatHaveAPendingStateTransition
	require.Empty(t, m.step(deadline+20, timeoutEvent{id: tid}))
	effs = m.step(deadline+20, appendedEvent{id: tid})
	noReply(t, effs)
	require.Equal(t, &effMarkers{id: tid, producerID: pid, epoch: pepoch + 1, partitions: oneParts}, markersOf(effs))
	// shouldNotAcceptSmallerEpochDuringTransactionExpiration: the producer
	// is fenced.
	requireResult(t, replyOf(t, m.step(deadline+30, endEvent{id: tid, waiter: 1, producerID: pid, epoch: pepoch, commit: true})), ErrProducerFenced, 0, 0)
	run(t, m, deadline+40, markerEvent{id: tid, p: topic1})
	require.Equal(t, CompleteAbort, m.txns[tid].meta.State)
	require.Empty(t, m.step(deadline+50, timeoutEvent{id: tid}), "stale timer")
	require.Empty(t, m.step(deadline+50, timeoutEvent{id: "unknown"}))
}

func TestTimeoutAbortWriteFails(t *testing.T) {
	// shouldNotBumpEpochWhenAbortingExpiredTransactionIfAppendToLogFails
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, 0, topic1))
	late := nowMs + int64(timeoutMs) + 100
	m.step(late, timeoutEvent{id: tid})
	noReply(t, m.step(late, appendedEvent{id: tid, err: errors.New("NOT_ENOUGH_REPLICAS")}))
	e := m.txns[tid]
	require.Equal(t, pepoch+1, e.meta.ProducerEpoch)
	require.True(t, e.failedFence)
	require.Equal(t, Ongoing, e.meta.State)
	require.Equal(t, pepoch+1, appendOf(t, m.step(late+1, timeoutEvent{id: tid})).ProducerEpoch, "the next attempt does not bump again")
}

func TestTimeoutTV2(t *testing.T) {
	// A TV2 transaction's coordinator abort bumps past the fence: the
	// producer's retry of an EndTxn at its old epoch is fenced.
	m, _ := newTestMachine(TV2)
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Ongoing, TV2, topic1))
	run(t, m, nowMs+int64(timeoutMs)+1, timeoutEvent{id: tid})
	got := m.txns[tid].meta
	require.Equal(t, CompleteAbort, got.State)
	require.Equal(t, pepoch+2, got.ProducerEpoch)
	requireResult(t, replyOf(t, m.step(nowMs+5000, endEvent{id: tid, waiter: 1, producerID: pid, epoch: pepoch, commit: false, clientTV: TV2})),
		ErrProducerFenced, 0, 0)
}

func TestExpire(t *testing.T) {
	const expiration = 7 * 24 * 3600 * 1000
	for s := Empty; s <= CompleteAbort; s++ {
		m, _ := newTestMachine(0)
		m.put(tid, md(pid, pepoch, NoProducerEpoch, s, 0))
		require.Empty(t, m.step(nowMs+expiration-1, expireEvent{id: tid, expirationMs: expiration}), "not idle long enough")
		effs := m.step(nowMs+expiration, expireEvent{id: tid, expirationMs: expiration})
		if !s.expirationAllowed() {
			require.Empty(t, effs, "%v", s)
			continue
		}
		w := appendOf(t, effs)
		require.Equal(t, Dead, w.State, "a tombstone")
		_, ok := m.describe(tid)
		require.False(t, ok, "expiring")
		requireResult(t, replyOf(t, m.step(nowMs, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})), ErrConcurrentTransactions, 0, 0)
		require.Equal(t, []effect{effRemoved{tid}}, m.step(nowMs+expiration, appendedEvent{id: tid}))
		require.NotContains(t, m.txns, tid)
	}
	// A failed tombstone write leaves the id as it was.
	m, _ := newTestMachine(0)
	m.put(tid, md(pid, pepoch, NoProducerEpoch, Empty, 0))
	m.step(nowMs+expiration, expireEvent{id: tid, expirationMs: expiration})
	require.Empty(t, m.step(nowMs+expiration, appendedEvent{id: tid, err: errors.New("x")}))
	got, ok := m.describe(tid)
	require.True(t, ok)
	require.Equal(t, Empty, got.State)
}

func TestLoad(t *testing.T) {
	m, _ := newTestMachine(0)
	m.load("a", ptr(md(1, 0, NoProducerEpoch, PrepareCommit, 0, topic1, topic2)))
	m.load("b", ptr(md(2, 0, NoProducerEpoch, Ongoing, 0, topic1)))
	m.load("c", ptr(md(3, 0, NoProducerEpoch, CompleteAbort, 0)))
	m.load("d", ptr(md(4, 0, NoProducerEpoch, Empty, 0)))
	m.load("d", nil) // a tombstone later in the log
	effs := m.loaded(nowMs)
	require.Equal(t, []effect{
		effMarkers{id: "a", commit: true, producerID: 1, epoch: 0, partitions: []tp.TopicPartition{topic1, topic2}},
		effArm{id: "b", atMs: nowMs + int64(timeoutMs) + 1},
	}, effs)
	require.NotContains(t, m.txns, "d")
	run(t, m, nowMs, markerEvent{id: "a", p: topic1})
	run(t, m, nowMs, markerEvent{id: "a", p: topic2})
	require.Equal(t, CompleteCommit, m.txns["a"].meta.State)
}

func TestWireError(t *testing.T) {
	require.Equal(t, ErrInvalidProducerEpoch, WireError(ErrProducerFenced, false))
	require.ErrorIs(t, WireError(ErrProducerFenced, true), ErrProducerFenced)
	require.Equal(t, ErrConcurrentTransactions, WireError(ErrConcurrentTransactions, false))
}

// TestEndTxnTV2NextWhileCompleting is franz-go's TestTxnEtl against a TV2
// coordinator: a commit answered with the bumped epoch, then the next
// transaction's produces and its abort (the group was revoked, nothing was
// produced) while the commit's markers are still being written. Both wait
// (CONCURRENT_TRANSACTIONS, retried) rather than being fenced
// (PRODUCER_FENCED, fatal to the client); the old epoch is fenced.
func TestEndTxnTV2NextWhileCompleting(t *testing.T) {
	m, _ := newTestMachine(TV2)
	requireResult(t, run(t, m, 1, initEvent{id: tid, waiter: 1, timeoutMs: timeoutMs})[0], nil, 100, 0)
	requireResult(t, run(t, m, 2, addEvent{id: tid, waiter: 1, producerID: 100, epoch: 0, partitions: oneParts, clientTV: TV2})[0], nil, 100, 0)

	// The commit is prepared and answered; its marker is not written yet.
	require.NotNil(t, appendOf(t, m.step(3, endEvent{id: tid, waiter: 1, producerID: 100, epoch: 0, commit: true, clientTV: TV2})))
	effs := m.step(3, appendedEvent{id: tid})
	requireResult(t, replyOf(t, effs), nil, 100, 1)
	require.NotNil(t, markersOf(effs))

	for _, c := range []struct {
		name string
		ev   event
		want error
	}{
		{"next abort", endEvent{id: tid, waiter: 1, producerID: 100, epoch: 1, commit: false, clientTV: TV2}, ErrConcurrentTransactions},
		{"next commit", endEvent{id: tid, waiter: 1, producerID: 100, epoch: 1, commit: true, clientTV: TV2}, ErrConcurrentTransactions},
		{"next produce", addEvent{id: tid, waiter: 1, producerID: 100, epoch: 1, partitions: oneParts, clientTV: TV2}, ErrConcurrentTransactions},
		{"late produce at the old epoch", addEvent{id: tid, waiter: 1, producerID: 100, epoch: 0, partitions: oneParts, clientTV: TV2}, ErrProducerFenced},
	} {
		effs := m.step(4, c.ev)
		requireResult(t, replyOf(t, effs), c.want, 0, 0)
		require.Nil(t, appendOf(t, effs), c.name)
	}

	// The marker is written and the commit completes: the abort goes
	// through, at the next epoch, with nothing to mark.
	require.NotNil(t, appendOf(t, m.step(5, markerEvent{id: tid, p: topic1})))
	require.Empty(t, m.step(5, appendedEvent{id: tid}))
	require.Equal(t, CompleteCommit, m.txns[tid].meta.State)
	res := run(t, m, 6, endEvent{id: tid, waiter: 1, producerID: 100, epoch: 1, commit: false, clientTV: TV2})
	requireResult(t, res[0], nil, 100, 2)
	require.Equal(t, CompleteAbort, m.txns[tid].meta.State)
	// The epoch before the commit's bump is fenced now.
	res = run(t, m, 7, endEvent{id: tid, waiter: 1, producerID: 100, epoch: 0, commit: false, clientTV: TV2})
	requireResult(t, res[0], ErrProducerFenced, 0, 0)
}
