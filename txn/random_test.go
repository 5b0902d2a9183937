package txn

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/strata-log/strata/tp"
	"github.com/stretchr/testify/require"
)

// TestRandomEvents drives the machine with random requests, timeouts,
// expirations, failing writes and markers reported in any order, as a
// driver would, and checks after every step that: at most one write per id
// is outstanding, and one exists exactly while the id has a pending
// transition; every request is answered exactly once; a producer id's
// epoch never goes back; the metadata is well formed in every state.
// Replay a failure with STRATA_TXN_SEED=n.
func TestRandomEvents(t *testing.T) {
	seed := rand.Uint64()
	if s := os.Getenv("STRATA_TXN_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (STRATA_TXN_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, tv := range []int16{0, TV2} {
		runRandom(t, rng, tv, 3000)
	}
}

func runRandom(t *testing.T, rng *rand.Rand, tv int16, steps int) {
	m, _ := newTestMachine(tv)
	ids := []string{"a", "b", "c"}
	parts := []tp.TopicPartition{{Topic: "x", Partition: 0}, {Topic: "x", Partition: 1}, {Topic: "y", Partition: 0}}
	appends := map[string]Metadata{}            // outstanding writes
	markers := map[string][]tp.TopicPartition{} // outstanding markers
	waiting := map[uint64]bool{}
	var nextWaiter uint64
	maxEpoch := map[int64]int16{}
	seen := map[State]int{} // the states reached, so the test is known to cover them
	removed := 0
	now := int64(1000)

	apply := func(effs []effect) {
		for _, e := range effs {
			switch e := e.(type) {
			case effAppend:
				_, dup := appends[e.id]
				require.False(t, dup, "two writes outstanding for %s", e.id)
				appends[e.id] = e.meta
			case effMarkers:
				require.Empty(t, markers[e.id])
				require.NotEmpty(t, e.partitions)
				markers[e.id] = slices.Clone(e.partitions)
			case effReply:
				require.True(t, waiting[e.waiter], "reply to %d, not waiting (or answered twice)", e.waiter)
				delete(waiting, e.waiter)
				if e.res.Err == nil {
					require.GreaterOrEqual(t, e.res.ProducerEpoch, int16(0))
				}
			case effRemoved:
				require.NotContains(t, m.txns, e.id)
				removed++
			}
		}
	}
	check := func() {
		for id, e := range m.txns {
			_, writing := appends[id]
			require.Equal(t, e.pending != nil, writing || len(markers[id]) > 0, "%s: pending %v, writing %v, markers %v", id, e.pending, writing, markers[id])
			meta := e.meta
			seen[meta.State]++
			require.True(t, meta.State.Valid())
			require.NotEqual(t, Dead, meta.State)
			require.NotEqual(t, PrepareEpochFence, meta.State)
			require.True(t, slices.IsSortedFunc(meta.Partitions, tp.Compare))
			require.Equal(t, len(meta.Partitions), len(slices.CompactFunc(slices.Clone(meta.Partitions), func(a, b tp.TopicPartition) bool { return a == b })))
			if meta.State == Empty || meta.State == CompleteCommit || meta.State == CompleteAbort {
				require.Empty(t, meta.Partitions, "%s %v", id, meta.State)
			}
			if meta.State == Ongoing {
				require.GreaterOrEqual(t, meta.StartMs, int64(0))
			}
			if meta.ProducerEpoch >= 0 {
				require.GreaterOrEqual(t, meta.ProducerEpoch, maxEpoch[meta.ProducerID], "%s: epoch of %d went back", id, meta.ProducerID)
				maxEpoch[meta.ProducerID] = meta.ProducerEpoch
			}
		}
	}
	fail := errors.New("write failed")
	for range steps {
		now += int64(rng.IntN(400))
		id := ids[rng.IntN(len(ids))]
		var cur ProducerIDEpoch
		if e := m.txns[id]; e != nil {
			cur = ProducerIDEpoch{e.meta.ProducerID, e.meta.ProducerEpoch}
			if rng.IntN(8) == 0 {
				cur.Epoch-- // a stale producer
			}
		}
		nextWaiter++
		w := nextWaiter
		var effs []effect
		switch r := rng.IntN(10); {
		case r == 0:
			var exp *ProducerIDEpoch
			if rng.IntN(2) == 0 {
				exp = &cur
			}
			waiting[w] = true
			effs = m.step(now, initEvent{id: id, waiter: w, timeoutMs: int32(500 + rng.IntN(2000)), expected: exp})
		case r <= 2:
			waiting[w] = true
			ps := []tp.TopicPartition{parts[rng.IntN(len(parts))]}
			effs = m.step(now, addEvent{id: id, waiter: w, producerID: cur.ID, epoch: cur.Epoch, partitions: ps, clientTV: tv})
		case r == 3:
			waiting[w] = true
			effs = m.step(now, endEvent{id: id, waiter: w, producerID: cur.ID, epoch: cur.Epoch, commit: rng.IntN(2) == 0, clientTV: tv})
		case r == 4:
			effs = m.step(now, timeoutEvent{id: id})
		case r == 5 && rng.IntN(4) == 0:
			effs = m.step(now, expireEvent{id: id, expirationMs: 5000})
		case r <= 7:
			if meta, ok := appends[id]; ok {
				delete(appends, id)
				var err error
				if rng.IntN(5) == 0 {
					err = fail
				}
				effs = m.step(now, appendedEvent{id: id, err: err})
				if err == nil && meta.State == Dead {
					require.NotContains(t, m.txns, id)
				}
			}
		default:
			if ms := markers[id]; len(ms) > 0 {
				i := rng.IntN(len(ms))
				p := ms[i]
				markers[id] = slices.Delete(ms, i, i+1)
				effs = m.step(now, markerEvent{id: id, p: p})
			}
		}
		apply(effs)
		check()
	}
	// Drain: every outstanding write succeeds, every marker is written;
	// then nothing is pending and every request has been answered.
	for len(appends) > 0 || len(markers) > 0 {
		for id := range appends {
			delete(appends, id)
			apply(m.step(now, appendedEvent{id: id}))
		}
		for id, ms := range markers {
			delete(markers, id)
			for _, p := range ms {
				apply(m.step(now, markerEvent{id: id, p: p}))
			}
		}
		check()
	}
	require.Empty(t, waiting, "requests never answered")
	for _, s := range []State{Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort} {
		require.Positive(t, seen[s], "state %v never reached: %v", s, seen)
	}
	require.Positive(t, removed, "no transactional id expired")
	for id, e := range m.txns {
		require.Nil(t, e.pending, id)
	}
}
