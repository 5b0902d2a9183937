package group

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The leader's assignment is stored before any Sync of its generation is
// answered (effStore, then storedEvent), as Kafka's storeGroup callback
// answers them: a member told a generation whose record is not durable
// commits, at the group's next coordinator, in a generation that
// coordinator never saw (ILLEGAL_GENERATION).

func stored(gen int32, err error) storedEvent { return storedEvent{generation: gen, err: err} }

var errNotLeader = errors.New("test: not the leader of the partition")

func TestMachineSyncAwaitsStore(t *testing.T) {
	// twoMembers without its last step (a's Sync of generation 2), with
	// stores held: generation 1's store is answered by the script.
	upToSync := []step{
		{at: 0, ev: newJoin("a", 1)},
		{at: 0, ev: syn("a", 1, 2, "a=A1")},
		{at: 0, ev: stored(1, nil)},
		{at: time.Second, ev: newJoin("b", 3)},
		{at: 2 * time.Second, ev: hb("a", 1), err: ErrRebalanceInProgress},
		{at: 2 * time.Second, ev: join("a", 4)},
		{at: 2 * time.Second, ev: syn("b", 2, 5, "")},
	}
	joined := map[uint64]string{
		1: "gen 1 of 1 range leader a [a=range@a]", 2: "sync A1",
		3: "gen 2 of 2 range leader a", 4: "gen 2 of 2 range leader a [a=range@a b=range@b]",
	}
	cases := []struct {
		name       string
		steps      []step
		replies    map[uint64]string
		phase      phase
		generation int32
		stores     []int32 // the generations the machine asked to store
	}{{
		name:    "the leader's Sync and the follower's wait for the store",
		steps:   append(upToSync[:len(upToSync):len(upToSync)], step{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")}),
		replies: joined,
		phase:   phaseCompleting, generation: 2, stores: []int32{1, 2},
	}, {
		name: "stored: both are answered, the group is stable",
		steps: append(upToSync[:len(upToSync):len(upToSync)],
			step{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")},
			step{at: 3 * time.Second, ev: stored(2, nil)}),
		replies: with(joined, 5, "sync B2", 6, "sync A2"),
		phase:   phaseStable, generation: 2, stores: []int32{1, 2},
	}, {
		name: "while storing: a late follower's Sync waits, a commit is refused, a heartbeat is fine",
		steps: []step{
			{at: 0, ev: newJoin("a", 1)},
			{at: 0, ev: syn("a", 1, 2, "a=A1")},
			{at: 0, ev: stored(1, nil)},
			{at: time.Second, ev: newJoin("b", 3)},
			{at: 2 * time.Second, ev: join("a", 4)},
			{at: 2 * time.Second, ev: syn("a", 2, 5, "a=A2 b=B2")},
			{at: 3 * time.Second, ev: syn("b", 2, 6, "")},
			{at: 3 * time.Second, ev: commit("b", 2), err: ErrRebalanceInProgress},
			{at: 3 * time.Second, ev: hb("b", 2)},
			{at: 4 * time.Second, ev: stored(2, nil)},
		},
		replies: with(joined, 5, "sync A2", 6, "sync B2"),
		phase:   phaseStable, generation: 2, stores: []int32{1, 2},
	}, {
		name: "the store fails (the coordinator moves): no Sync is told the generation; the group rebalances",
		steps: append(upToSync[:len(upToSync):len(upToSync)],
			step{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")},
			step{at: 3 * time.Second, ev: stored(2, errNotLeader)},
			step{at: 3 * time.Second, ev: commit("b", 2)}, // a member told to rejoin commits first
		),
		replies: with(joined, 5, ErrRebalanceInProgress.Error(), 6, ErrRebalanceInProgress.Error()),
		phase:   phasePreparing, generation: 2, stores: []int32{1, 2},
	}, {
		name: "the leader sends its Sync again while it is stored: the first is superseded, one store answers the second",
		steps: append(upToSync[:len(upToSync):len(upToSync)],
			step{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")},
			step{at: 3 * time.Second, ev: syn("a", 2, 7, "a=X b=Y")},
			step{at: 4 * time.Second, ev: stored(2, nil)},
		),
		replies: with(joined, 5, "sync B2", 6, ErrRebalanceInProgress.Error(), 7, "sync A2"),
		phase:   phaseStable, generation: 2, stores: []int32{1, 2},
	}, {
		name: "a member leaves while the generation is stored: the Syncs fail, the late outcome changes nothing",
		steps: append(upToSync[:len(upToSync):len(upToSync)],
			step{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")},
			step{at: 3 * time.Second, ev: leave("b")},
			step{at: 4 * time.Second, ev: stored(2, nil)},
		),
		replies: with(joined, 5, ErrUnknownMember.Error(), 6, ErrRebalanceInProgress.Error()),
		phase:   phasePreparing, generation: 2, stores: []int32{1, 2},
	}, {
		name: "an outcome of an older generation changes nothing",
		steps: append(upToSync[:len(upToSync):len(upToSync)],
			step{at: 2 * time.Second, ev: syn("a", 2, 6, "a=A2 b=B2")},
			step{at: 3 * time.Second, ev: stored(1, errNotLeader)},
		),
		replies: joined,
		phase:   phaseCompleting, generation: 2, stores: []int32{1, 2},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 0)
			h.holdStores = true
			h.run(tc.steps)
			require.Equal(t, tc.replies, h.replies, "replies")
			require.Equal(t, tc.phase, h.g.phase, "phase")
			require.Equal(t, tc.generation, h.g.generation, "generation")
			require.Equal(t, tc.stores, h.stores, "stores asked for")
		})
	}
}

// The record stored for a generation being stored is the Stable one: with
// its leader (a record without one is restored rebalancing).
func TestMachineStoringRecordHasLeader(t *testing.T) {
	h := newHarness(t, 0)
	h.holdStores = true
	h.run([]step{{at: 0, ev: newJoin("a", 1)}, {at: 0, ev: syn("a", 1, 2, "a=A1")}})
	require.True(t, h.g.storing)
	v, err := decodeGroupMetadata(h.g.encodeMetadata(t0))
	require.NoError(t, err)
	require.NotNil(t, v.Leader)
	require.Equal(t, "a", *v.Leader)
	require.Equal(t, "A1", string(v.Members[0].Assignment))
}
