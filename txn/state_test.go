package txn

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cases of Kafka's TransactionMetadataTest: producer 23423, 30 s
// timeout, TV0 metadata unless said.
const mdPID int64 = 23423

func mdt(epoch, last int16, state State) Metadata {
	return Metadata{
		ProducerID: mdPID, PrevProducerID: NoProducerID, NextProducerID: NoProducerID,
		ProducerEpoch: epoch, LastProducerEpoch: last, TimeoutMs: 30000, State: state,
		StartMs: -1, LastUpdateMs: 5000,
	}
}

func ep(e int16) *int16 { return &e }

func TestMetadataIncrementEpoch(t *testing.T) {
	cases := []struct {
		name      string
		epoch     int16
		last      int16
		expected  *int16
		wantEpoch int16
		wantLast  int16
		wantErr   error
	}{
		{"testInitializeEpoch", NoProducerEpoch, NoProducerEpoch, nil, 0, NoProducerEpoch, nil},
		{"testNormalEpochBump", 735, NoProducerEpoch, nil, 736, NoProducerEpoch, nil},
		{"testBumpEpochNotAllowedIfEpochsExhausted", math.MaxInt16 - 1, NoProducerEpoch, nil, 0, 0, errIllegalState},
		{"testAttemptedEpochBumpWithNewlyCreatedMetadata", NoProducerEpoch, NoProducerEpoch, ep(735), 0, NoProducerEpoch, nil},
		{"testEpochBumpWithCurrentEpochProvided", 735, 734, ep(735), 736, 735, nil},
		{"testAttemptedEpochBumpWithLastEpoch", 735, 734, ep(734), 735, 734, nil},
		{"testAttemptedEpochBumpWithFencedEpoch", 735, 734, ep(733), 0, 0, ErrProducerFenced},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := mdt(c.epoch, c.last, Empty)
			// testTolerateUpdateTimeShiftDuringEpochBump: the clock may
			// have gone back; the bump takes the new time anyway.
			to, err := m.prepareIncrementEpoch(30000, c.expected, 4000)
			if c.wantErr != nil {
				require.ErrorIs(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, mdPID, to.ProducerID)
			require.Equal(t, c.wantEpoch, to.ProducerEpoch)
			require.Equal(t, c.wantLast, to.LastProducerEpoch)
			require.Equal(t, Empty, to.State)
			require.Equal(t, int64(-1), to.StartMs)
			require.Equal(t, int64(4000), to.LastUpdateMs)
			require.Equal(t, c.epoch, m.ProducerEpoch, "the transition leaves m unchanged")
		})
	}
}

func TestMetadataFence(t *testing.T) {
	// testFenceProducerAfterEpochsExhausted: the fence may use MaxInt16,
	// and the abort after it keeps it.
	m := mdt(math.MaxInt16-1, NoProducerEpoch, Ongoing)
	f, err := m.prepareFenceEpoch(false)
	require.NoError(t, err)
	require.Equal(t, PrepareEpochFence, f.State)
	require.Equal(t, int16(math.MaxInt16), f.ProducerEpoch)
	m.ProducerEpoch = f.ProducerEpoch
	a, err := m.prepareEnd(PrepareAbort, 0, NoProducerID, 6000, false)
	require.NoError(t, err)
	require.Equal(t, mdPID, a.ProducerID)
	require.Equal(t, int16(math.MaxInt16), a.ProducerEpoch)

	// testFenceProducerNotAllowedIfItWouldOverflow: Kafka 4 no longer
	// throws; the epoch stays at MaxInt16.
	m = mdt(math.MaxInt16, NoProducerEpoch, Ongoing)
	f, err = m.prepareFenceEpoch(false)
	require.NoError(t, err)
	require.Equal(t, int16(math.MaxInt16), f.ProducerEpoch)

	// A fence whose write failed does not bump again.
	m = mdt(7, NoProducerEpoch, Ongoing)
	f, err = m.prepareFenceEpoch(true)
	require.NoError(t, err)
	require.Equal(t, int16(7), f.ProducerEpoch)

	// Only an ongoing transaction is fenced.
	for _, s := range []State{Empty, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort} {
		m = mdt(7, NoProducerEpoch, s)
		_, err = m.prepareFenceEpoch(false)
		require.ErrorIs(t, err, errIllegalState, "%v", s)
	}
}

func TestMetadataRotateProducerID(t *testing.T) {
	// testRotateProducerId
	m := mdt(math.MaxInt16-1, NoProducerEpoch, Empty)
	to, err := m.prepareRotateProducerID(9893, 30000, 6000, true)
	require.NoError(t, err)
	require.Equal(t, int64(9893), to.ProducerID)
	require.Equal(t, mdPID, to.PrevProducerID)
	require.Equal(t, int16(0), to.ProducerEpoch)
	require.Equal(t, int16(math.MaxInt16-1), to.LastProducerEpoch)
	// testTolerateUpdateTimeResetDuringProducerIdRotation
	to, err = m.prepareRotateProducerID(9893, 30000, 1, false)
	require.NoError(t, err)
	require.Equal(t, NoProducerEpoch, to.LastProducerEpoch)
	require.Equal(t, int64(1), to.LastUpdateMs)
	// testRotateProducerIdInOngoingState, ...InPrepareAbortState,
	// ...InPrepareCommitState
	for _, s := range []State{Ongoing, PrepareAbort, PrepareCommit} {
		m := mdt(math.MaxInt16-1, NoProducerEpoch, s)
		_, err := m.prepareRotateProducerID(9893, 30000, 6000, false)
		require.ErrorIs(t, err, errIllegalState, "%v", s)
	}
}

func TestMetadataEndTxnEpochBump(t *testing.T) {
	// testEpochBumpOnEndTxn: TV2 bumps the epoch on EndTxn.
	m := mdt(10, NoProducerEpoch, Ongoing)
	m.StartMs = 5000
	to, err := m.prepareEnd(PrepareCommit, TV2, NoProducerID, 4999, false)
	require.NoError(t, err)
	require.Equal(t, int16(11), to.ProducerEpoch)
	require.Equal(t, int16(10), to.LastProducerEpoch)
	require.Equal(t, int16(TV2), to.ClientTransactionVersion)
	require.Equal(t, int64(5000), to.StartMs)
	m = to
	to, err = m.prepareComplete(5000)
	require.NoError(t, err)
	require.Equal(t, CompleteCommit, to.State)
	require.Equal(t, mdPID, to.ProducerID)
	require.Equal(t, int16(11), to.ProducerEpoch)

	// testEpochBumpOnEndTxnOverflow: the bump to MaxInt16 hands over to a
	// new producer id at epoch 0 when the transaction completes.
	m = mdt(math.MaxInt16-1, NoProducerEpoch, Ongoing)
	to, err = m.prepareEnd(PrepareCommit, TV2, 9893, 6000, false)
	require.NoError(t, err)
	require.Equal(t, mdPID, to.ProducerID)
	require.Equal(t, int16(math.MaxInt16), to.ProducerEpoch)
	require.Equal(t, int64(9893), to.NextProducerID)
	m = to
	to, err = m.prepareComplete(6000)
	require.NoError(t, err)
	require.Equal(t, int64(9893), to.ProducerID)
	require.Equal(t, mdPID, to.PrevProducerID)
	require.Equal(t, int16(0), to.ProducerEpoch)
	require.Equal(t, int16(math.MaxInt16-1), to.LastProducerEpoch)
	require.Equal(t, NoProducerID, to.NextProducerID)

	// TV0: no bump; complete keeps the id even if NextProducerID were set.
	m = mdt(10, 9, Ongoing)
	to, err = m.prepareEnd(PrepareAbort, 0, NoProducerID, 6000, false)
	require.NoError(t, err)
	require.Equal(t, int16(10), to.ProducerEpoch)
	require.Equal(t, int16(9), to.LastProducerEpoch)
}

func TestMetadataAddPartitions(t *testing.T) {
	// testTolerateTimeShiftDuringAddPartitions: a new transaction starts
	// at the (earlier) update time; adding to an open one keeps its start.
	m := mdt(1, NoProducerEpoch, Empty)
	to, err := m.prepareAddPartitions(oneParts, 4000, 0)
	require.NoError(t, err)
	require.Equal(t, Ongoing, to.State)
	require.Equal(t, int64(4000), to.StartMs)
	m = to
	to, err = m.prepareAddPartitions(append(oneParts, topic2, topic1), 3000, 0)
	require.NoError(t, err)
	require.Equal(t, int64(4000), to.StartMs)
	require.Equal(t, int64(3000), to.LastUpdateMs)
	require.Equal(t, oneParts, m.Partitions, "m unchanged")
	require.Len(t, to.Partitions, 2)
	for _, s := range []State{PrepareCommit, PrepareAbort, Dead, PrepareEpochFence} {
		m := mdt(1, NoProducerEpoch, s)
		_, err := m.prepareAddPartitions(oneParts, 4000, 0)
		require.ErrorIs(t, err, errIllegalState, "%v", s)
	}
}

func TestMetadataTransitionsFromEveryState(t *testing.T) {
	// Kafka's validPreviousStates, checked for every pair through the
	// transitions that reach each state.
	for from := Empty; from <= PrepareEpochFence; from++ {
		m := mdt(3, NoProducerEpoch, from)
		m.Partitions = oneParts
		_, err := m.prepareEnd(PrepareCommit, 0, NoProducerID, 1, false)
		require.Equal(t, from == Ongoing, err == nil, "%v → PrepareCommit", from)
		_, err = m.prepareEnd(PrepareAbort, 0, NoProducerID, 1, false)
		okAbort := from == Ongoing || from == PrepareEpochFence || from == Empty || from == CompleteCommit || from == CompleteAbort
		require.Equal(t, okAbort, err == nil, "%v → PrepareAbort", from)
		_, err = m.prepareComplete(1)
		require.Equal(t, from == PrepareCommit || from == PrepareAbort, err == nil, "%v → Complete", from)
		_, err = m.prepareDead()
		require.Equal(t, from.expirationAllowed(), err == nil, "%v → Dead", from)
		if err != nil {
			require.True(t, errors.Is(err, errIllegalState))
		}
	}
}

func TestStateIDAndNameMapping(t *testing.T) {
	// testTransactionStateIdAndNameMapping, testAllTransactionStatesAreMapped
	names := map[State]string{
		Empty: "Empty", Ongoing: "Ongoing", PrepareCommit: "PrepareCommit", PrepareAbort: "PrepareAbort",
		CompleteCommit: "CompleteCommit", CompleteAbort: "CompleteAbort", Dead: "Dead", PrepareEpochFence: "PrepareEpochFence",
	}
	for id := int8(0); id < 8; id++ {
		s := State(id)
		require.True(t, s.Valid())
		require.Equal(t, names[s], s.String())
		p, ok := ParseState(s.String())
		require.True(t, ok)
		require.Equal(t, s, p)
	}
	require.False(t, State(8).Valid())
	require.Equal(t, "State(8)", State(8).String())
	_, ok := ParseState("ongoing")
	require.False(t, ok)
}
