package replica_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/machine/machinetest"
)

// The leader's tests are scripts: events at times since t0, with the actions
// each step must return. They follow the cases of Kafka's PartitionTest.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const lag = replica.DefaultReplicaLagTime

type leader struct {
	t     *testing.T
	m     *machine.PartitionMachine
	cache *machinetest.Epochs
	now   time.Time
}

// newLeader makes broker 1 the leader at epoch 5, partition epoch 10, of a
// log ending at end with HW hw, at t0.
func newLeader(t *testing.T, replicas, isr []int, minISR int, end, hw int64) *leader {
	t.Helper()
	l := &leader{t: t, cache: &machinetest.Epochs{End: end}, now: t0}
	if end > 0 {
		l.cache.Assign(3, 0)
	}
	l.m = machine.NewPartitionMachine(1, l.cache, machine.PartitionConfig{})
	acts := l.step(machine.Metadata{
		Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10, Replicas: replicas, ISR: isr,
		MinInSyncReplicas: minISR, LogEnd: end, HW: hw,
	})
	require.Contains(t, acts, machine.StartEpoch{Epoch: 5, StartOffset: end})
	l.cache.Assign(5, end)
	return l
}

func (l *leader) at(d time.Duration) *leader { l.now = t0.Add(d); return l }

func (l *leader) step(ev machine.PartitionEvent) []machine.Action {
	return l.m.Step(l.now, ev, nil)
}

func (l *leader) append(end int64) []machine.Action {
	l.cache.End = end
	return l.step(machine.Appended{LogEnd: end})
}

func (l *leader) fetch(r int, off int64) []machine.Action {
	return l.step(machine.FollowerFetch{Replica: r, LeaderEpoch: 5, FetchOffset: off, LastFetchedEpoch: 5})
}

// only returns the actions of type T.
func only[T machine.Action](acts []machine.Action) []T {
	var out []T
	for _, a := range acts {
		if x, ok := a.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

func answerOf(t *testing.T, acts []machine.Action) machine.FetchAnswer {
	t.Helper()
	ans := only[machine.FetchAnswer](acts)
	require.Len(t, ans, 1, "one fetch answer in %v", acts)
	return ans[0]
}

func TestLeaderHWIsMinimumLEOOverISR(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0)
	require.Empty(t, only[machine.SetHW](l.append(10)), "followers have not fetched since the election")
	require.Equal(t, int64(0), answerOf(t, l.fetch(2, 5)).HW, "follower 3's LEO is not known yet")
	// The HW is the least LEO, and the answer carries it.
	acts := l.fetch(3, 7)
	require.Equal(t, []machine.SetHW{{HW: 5}}, only[machine.SetHW](acts))
	require.Equal(t, int64(5), answerOf(t, acts).HW)
	require.Equal(t, []machine.SetHW{{HW: 7}}, only[machine.SetHW](l.fetch(2, 10)))
	require.Equal(t, []machine.SetHW{{HW: 10}}, only[machine.SetHW](l.fetch(3, 10)))
	// A follower that goes back (it truncated after a restart) does not
	// move the HW back.
	require.Empty(t, only[machine.SetHW](l.fetch(3, 8)))
	require.Equal(t, int64(10), l.m.HW())
}

func TestLeaderHWUnderMinISR(t *testing.T) {
	cases := []struct {
		name     string
		replicas []int
		isr      []int
		minISR   int
		wantHW   int64 // after the append and the ISR's fetches
		produce  error
	}{
		{"ISR at min", []int{1, 2, 3}, []int{1, 2}, 2, 10, nil},
		{"ISR under min", []int{1, 2, 3}, []int{1}, 2, 0, replica.ErrNotEnoughReplicas},
		{"min capped at replicas", []int{1, 2}, []int{1, 2}, 3, 10, nil},
		{"alone, min 1", []int{1}, []int{1}, 1, 10, nil},
		{"alone, min 0 means 1", []int{1, 2}, []int{1}, 0, 10, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLeader(t, c.replicas, c.isr, c.minISR, 0, 0)
			require.ErrorIs(t, l.m.CheckProduce(), c.produce)
			if c.produce == nil {
				require.NoError(t, l.m.CheckProduce())
			}
			l.append(10)
			for _, r := range c.isr[1:] {
				l.fetch(r, 10)
			}
			require.Equal(t, c.wantHW, l.m.HW())
		})
	}
}

func TestLeaderHWUnderMinISRResumesWhenISRGrows(t *testing.T) {
	l := newLeader(t, []int{1, 2}, []int{1}, 2, 0, 0)
	l.append(10)
	require.Equal(t, int64(0), l.m.HW(), "HW held under min ISR")
	acts := l.fetch(2, 10)
	require.Equal(t, []machine.ProposeISR{{ISR: []int{1, 2}, LeaderEpoch: 5, PartitionEpoch: 10}}, only[machine.ProposeISR](acts))
	require.Empty(t, only[machine.SetHW](acts), "the proposal is not committed yet")
	require.ErrorIs(t, l.m.CheckProduce(), replica.ErrNotEnoughReplicas, "the committed ISR counts for produce")
	acts = l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterAccepted, ISR: []int{1, 2}, PartitionEpoch: 11})
	require.Equal(t, []machine.SetHW{{HW: 10}}, only[machine.SetHW](acts))
	require.NoError(t, l.m.CheckProduce())
	require.Equal(t, int32(11), l.m.PartitionEpoch())
}

// While an expansion is in flight the HW waits for the joining follower
// (the maximal ISR, KIP-497): if it is committed, it must have the HW.
func TestLeaderMaximalISRWhileExpanding(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2}, 1, 0, 0)
	l.append(10)
	l.fetch(2, 10)
	require.Equal(t, int64(10), l.m.HW())
	acts := l.fetch(3, 10)
	require.Equal(t, []machine.ProposeISR{{ISR: []int{1, 2, 3}, LeaderEpoch: 5, PartitionEpoch: 10}}, only[machine.ProposeISR](acts))
	require.Equal(t, []int{1, 2, 3}, l.m.MaximalISR())
	require.Equal(t, []int{1, 2}, l.m.ISR())
	// Past the lag time, so that only the maximal ISR (not the caught-up
	// rule) holds the HW at follower 3.
	l.at(lag + time.Second)
	l.append(20)
	require.Empty(t, only[machine.SetHW](l.fetch(2, 20)), "the HW waits for the joining follower")
	require.Equal(t, int64(10), l.m.HW())
	require.Equal(t, []machine.SetHW{{HW: 15}}, only[machine.SetHW](l.fetch(3, 15)))
	// Rejected: back to ISR {1,2}; follower 3, not caught up for the lag
	// time, no longer holds the HW.
	l.at(2*lag + 2*time.Second)
	acts = l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterRejected})
	require.Equal(t, []machine.SetHW{{HW: 20}}, only[machine.SetHW](acts))
	require.Equal(t, []int{1, 2}, l.m.MaximalISR())
	_, pending := l.m.Pending()
	require.False(t, pending)
}

// While a shrink is in flight the HW still waits for the leaving follower:
// if the shrink is rejected, it is still in the ISR.
func TestLeaderMaximalISRWhileShrinking(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0)
	l.append(10)
	l.fetch(2, 10)
	l.fetch(3, 4)
	require.Equal(t, int64(4), l.m.HW())
	l.at(lag / 2)
	l.fetch(2, 10)
	l.at(lag + time.Second)
	l.fetch(2, 10)
	acts := l.step(machine.Tick{})
	require.Equal(t, []machine.ProposeISR{{ISR: []int{1, 2}, LeaderEpoch: 5, PartitionEpoch: 10}}, only[machine.ProposeISR](acts))
	require.Empty(t, only[machine.SetHW](acts), "the leaving follower still holds the HW")
	require.Equal(t, []int{1, 2, 3}, l.m.MaximalISR())
	require.Empty(t, only[machine.ProposeISR](l.step(machine.Tick{})), "one AlterPartition in flight")
	acts = l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterAccepted, ISR: []int{1, 2}, PartitionEpoch: 11})
	require.Equal(t, []machine.SetHW{{HW: 10}}, only[machine.SetHW](acts))
	require.Equal(t, []int{1, 2}, l.m.ISR())
}

// Kafka's lastCaughtUpTime rule: a fetch at or past the leader's LEO as of
// the follower's previous fetch makes it caught up as of that previous
// fetch, even if the leader has appended since.
func TestLeaderLastCaughtUpTimeRule(t *testing.T) {
	cases := []struct {
		name        string
		thirdOffset int64 // the third fetch's offset; the leader's LEO was 20 at the second
		shrinkAt    time.Duration
	}{
		// Third fetch at 20 (the LEO at the second fetch, at 20s): caught
		// up as of 20s, so in sync until 20s+lag.
		{"previous LEO reached", 20, 20*time.Second + lag + 1},
		// Third fetch at 19: not past the LEO of any fetch; caught up last
		// at 0s (the second fetch reached the first's LEO, 10).
		{"previous LEO missed", 19, lag + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLeader(t, []int{1, 2}, []int{1, 2}, 1, 10, 0)
			l.fetch(2, 5) // at 0s, LEO 10: behind
			l.append(20)
			l.at(20*time.Second).fetch(2, 10) // reached the LEO of its previous fetch → caught up as of 0s
			l.append(30)
			l.at(40*time.Second).fetch(2, c.thirdOffset)
			for d := 40 * time.Second; d < c.shrinkAt; d += time.Second {
				require.Empty(t, only[machine.ProposeISR](l.at(d).step(machine.Tick{})), "no shrink at %v", d)
			}
			require.Equal(t, []machine.ProposeISR{{ISR: []int{1}, LeaderEpoch: 5, PartitionEpoch: 10}},
				only[machine.ProposeISR](l.at(c.shrinkAt).step(machine.Tick{})))
		})
	}
}

func TestLeaderFollowerAtLogEndIsCaughtUp(t *testing.T) {
	// A follower at the leader's LEO stays in sync however long ago it last
	// fetched (no appends since: nothing to catch up with).
	l := newLeader(t, []int{1, 2}, []int{1, 2}, 1, 10, 0)
	l.fetch(2, 10)
	require.Empty(t, only[machine.ProposeISR](l.at(10*lag).step(machine.Tick{})))
	// Once the leader appends, the clock runs from its last catch-up.
	l.append(11)
	require.Equal(t, []machine.ProposeISR{{ISR: []int{1}, LeaderEpoch: 5, PartitionEpoch: 10}},
		only[machine.ProposeISR](l.step(machine.Tick{})))
}

func TestLeaderShrinkAfterLag(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0)
	l.append(10)
	for d := time.Duration(0); d <= lag; d += time.Second {
		l.at(d).fetch(2, 10)
		require.Empty(t, only[machine.ProposeISR](l.step(machine.Tick{})), "at %v: follower 3 counts as caught up at the election", d)
	}
	l.at(lag+time.Nanosecond).fetch(2, 10)
	require.Equal(t, []machine.ProposeISR{{ISR: []int{1, 2}, LeaderEpoch: 5, PartitionEpoch: 10}},
		only[machine.ProposeISR](l.step(machine.Tick{})))
}

// Expansion only past the HW and the start offset of the leader's epoch
// (Kafka's isFollowerInSync).
func TestLeaderExpansionNeedsHWAndEpochStart(t *testing.T) {
	cases := []struct {
		offset int64
		expand bool
	}{
		{70, false},  // below the HW
		{80, false},  // at the HW, below the epoch start
		{99, false},  // below the epoch start
		{100, true},  // at the epoch start
		{120, true},  // past it
		{121, false}, // past the LEO: out of range
	}
	for _, c := range cases {
		// A new leader at epoch 5 whose log ends at 100 with HW 80.
		l := newLeader(t, []int{1, 2, 3}, []int{1, 2}, 1, 100, 80)
		l.append(120)
		acts := l.fetch(3, c.offset)
		if c.expand {
			require.Equal(t, []machine.ProposeISR{{ISR: []int{1, 2, 3}, LeaderEpoch: 5, PartitionEpoch: 10}}, only[machine.ProposeISR](acts), "offset %d", c.offset)
		} else {
			require.Empty(t, only[machine.ProposeISR](acts), "offset %d", c.offset)
		}
	}
}

func TestLeaderAlterPartitionAnswers(t *testing.T) {
	shrinking := func(t *testing.T) *leader {
		l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 1, 0, 0)
		l.append(10)
		l.at(lag+time.Second).fetch(2, 10)
		require.Len(t, only[machine.ProposeISR](l.step(machine.Tick{})), 1)
		return l
	}
	t.Run("rejected reverts and proposes again", func(t *testing.T) {
		l := shrinking(t)
		l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterRejected})
		require.Equal(t, []int{1, 2, 3}, l.m.ISR())
		_, pending := l.m.Pending()
		require.False(t, pending)
		require.Len(t, only[machine.ProposeISR](l.step(machine.Tick{})), 1, "still lagging: proposed again")
	})
	t.Run("stale waits for the metadata", func(t *testing.T) {
		l := shrinking(t)
		l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterStale})
		_, pending := l.m.Pending()
		require.True(t, pending)
		require.Empty(t, only[machine.ProposeISR](l.step(machine.Tick{})))
		// The metadata shows the controller took it (say, before a
		// controller failover hid the answer).
		acts := l.step(machine.Metadata{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 11, Replicas: []int{1, 2, 3}, ISR: []int{1, 2}, MinInSyncReplicas: 1})
		require.Equal(t, []machine.SetHW{{HW: 10}}, only[machine.SetHW](acts))
		require.Empty(t, only[machine.StartEpoch](acts), "same leader epoch")
		_, pending = l.m.Pending()
		require.False(t, pending)
	})
	t.Run("answer to an older proposal is ignored", func(t *testing.T) {
		l := shrinking(t)
		l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 9, Result: machine.AlterRejected})
		l.step(machine.AlterPartitionAnswer{LeaderEpoch: 4, BasedOn: 10, Result: machine.AlterAccepted, ISR: []int{1}, PartitionEpoch: 11})
		isr, pending := l.m.Pending()
		require.True(t, pending)
		require.Equal(t, []int{1, 2}, isr)
		require.Equal(t, []int{1, 2, 3}, l.m.ISR())
	})
	t.Run("metadata already applied the change", func(t *testing.T) {
		l := shrinking(t)
		l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterAccepted, ISR: []int{1, 2}, PartitionEpoch: 11})
		// The same state arriving with the metadata changes nothing.
		acts := l.step(machine.Metadata{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 11, Replicas: []int{1, 2, 3}, ISR: []int{1, 2}, MinInSyncReplicas: 1})
		require.Empty(t, acts)
		require.Equal(t, []int{1, 2}, l.m.ISR())
	})
}

func TestLeaderAcksAll(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 2, 0, 0)
	require.NoError(t, l.m.CheckProduce())
	l.append(10)
	require.Empty(t, l.step(machine.AwaitProduce{Token: 1, Required: 10}))
	l.append(20)
	require.Empty(t, l.step(machine.AwaitProduce{Token: 2, Required: 20}))
	require.Empty(t, l.step(machine.AwaitProduce{Token: 3, Required: 20}))
	l.fetch(2, 20)
	acts := l.fetch(3, 15)
	require.Equal(t, []machine.CompleteProduce{{Token: 1}}, only[machine.CompleteProduce](acts), "HW 15 covers produce 1 only")
	l.step(machine.CancelProduce{Token: 3})
	acts = l.fetch(3, 20)
	require.Equal(t, []machine.CompleteProduce{{Token: 2}}, only[machine.CompleteProduce](acts), "3 was cancelled")
	// Already covered: completes at once.
	require.Equal(t, []machine.Action{machine.CompleteProduce{Token: 4}}, l.step(machine.AwaitProduce{Token: 4, Required: 20}))

	// Follower 3 lags out; with ISR {1,2} and min 2 produce goes on.
	l.append(30)
	l.step(machine.AwaitProduce{Token: 5, Required: 30})
	l.at(lag+time.Second).fetch(2, 30)
	l.step(machine.Tick{})
	acts = l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 10, Result: machine.AlterAccepted, ISR: []int{1, 2}, PartitionEpoch: 11})
	require.Equal(t, []machine.CompleteProduce{{Token: 5}}, only[machine.CompleteProduce](acts))
	require.NoError(t, l.m.CheckProduce())

	// Follower 2 lags out too: produce is refused before the append, and
	// one waiting stays waiting (the HW is held under min ISR) until the
	// leader loses leadership.
	l.append(40)
	l.step(machine.AwaitProduce{Token: 6, Required: 40})
	l.at(3 * lag).step(machine.Tick{})
	l.step(machine.AlterPartitionAnswer{LeaderEpoch: 5, BasedOn: 11, Result: machine.AlterAccepted, ISR: []int{1}, PartitionEpoch: 12})
	err := l.m.CheckProduce()
	require.ErrorIs(t, err, replica.ErrNotEnoughReplicas)
	require.Equal(t, int64(30), l.m.HW())
	acts = l.step(machine.Metadata{Leader: 2, LeaderEpoch: 6, PartitionEpoch: 13, Replicas: []int{1, 2, 3}, ISR: []int{2}, MinInSyncReplicas: 2})
	require.Equal(t, []machine.Action{machine.CompleteProduce{Token: 6, Err: replica.ErrNotLeader}}, acts)
	require.ErrorIs(t, l.m.CheckProduce(), replica.ErrNotLeader)
	require.Equal(t, []machine.Action{machine.CompleteProduce{Token: 7, Err: replica.ErrNotLeader}}, l.step(machine.AwaitProduce{Token: 7, Required: 50}))
}

func TestLeaderFetchAnswers(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 1, 100, 50)
	// Epochs: 3 from 0, 5 from 100; the log ends at 120.
	l.append(120)
	l.step(machine.LogStartMoved{LogStart: 20})
	cases := []struct {
		name string
		ev   machine.FollowerFetch
		want machine.FetchAnswer
	}{
		{"in range", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 110, LastFetchedEpoch: 5, LogStart: 0},
			machine.FetchAnswer{Replica: 2, HW: 50, LogStart: 20, LogEnd: 120}},
		{"no current epoch sent", machine.FollowerFetch{Replica: 2, LeaderEpoch: machine.NoEpoch, FetchOffset: 110, LastFetchedEpoch: machine.NoEpoch},
			machine.FetchAnswer{Replica: 2, HW: 50, LogStart: 20, LogEnd: 120}},
		{"fenced", machine.FollowerFetch{Replica: 2, LeaderEpoch: 4, FetchOffset: 110},
			machine.FetchAnswer{Replica: 2, Err: replica.ErrFencedLeaderEpoch, HW: 50, LogStart: 20, LogEnd: 120}},
		{"unknown epoch", machine.FollowerFetch{Replica: 2, LeaderEpoch: 6, FetchOffset: 110},
			machine.FetchAnswer{Replica: 2, Err: replica.ErrUnknownLeaderEpoch, HW: 50, LogStart: 20, LogEnd: 120}},
		{"not a replica", machine.FollowerFetch{Replica: 4, LeaderEpoch: 5, FetchOffset: 110},
			machine.FetchAnswer{Replica: 4, Err: replica.ErrNotReplica, HW: 50, LogStart: 20, LogEnd: 120}},
		{"below log start", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 10, LastFetchedEpoch: 3},
			machine.FetchAnswer{Replica: 2, Err: replica.ErrOffsetOutOfRange, HW: 50, LogStart: 20, LogEnd: 120}},
		{"past log end", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 121, LastFetchedEpoch: machine.NoEpoch},
			machine.FetchAnswer{Replica: 2, Err: replica.ErrOffsetOutOfRange, HW: 50, LogStart: 20, LogEnd: 120}},
		// With its last epoch sent, a follower past the leader's end has
		// diverged: it holds records of epoch 5 the leader does not.
		{"diverging: past log end in the latest epoch", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 121, LastFetchedEpoch: 5},
			machine.FetchAnswer{Replica: 2, Diverging: &machine.EpochEnd{Epoch: 5, EndOffset: 120}, HW: 50, LogStart: 20, LogEnd: 120}},
		// Epoch 3 ended at 100 here; the follower has more of it.
		{"diverging: epoch ended earlier", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 105, LastFetchedEpoch: 3},
			machine.FetchAnswer{Replica: 2, Diverging: &machine.EpochEnd{Epoch: 3, EndOffset: 100}, HW: 50, LogStart: 20, LogEnd: 120}},
		{"epoch 3 up to its end", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 100, LastFetchedEpoch: 3},
			machine.FetchAnswer{Replica: 2, HW: 50, LogStart: 20, LogEnd: 120}},
		// Epoch 4 is not in the leader's log: the largest below is 3.
		{"diverging: epoch unknown to the leader", machine.FollowerFetch{Replica: 2, LeaderEpoch: 5, FetchOffset: 90, LastFetchedEpoch: 4},
			machine.FetchAnswer{Replica: 2, Diverging: &machine.EpochEnd{Epoch: 3, EndOffset: 100}, HW: 50, LogStart: 20, LogEnd: 120}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, _ := l.m.FollowerLogEnd(2)
			acts := l.step(c.ev)
			require.Equal(t, c.want, answerOf(t, acts))
			after, _ := l.m.FollowerLogEnd(2)
			if c.want.Err != nil || c.want.Diverging != nil {
				require.Equal(t, before, after, "a refused fetch is no progress")
			}
		})
	}
	l.step(machine.Metadata{Leader: 3, LeaderEpoch: 6, PartitionEpoch: 11, Replicas: []int{1, 2, 3}, ISR: []int{2, 3}})
	require.ErrorIs(t, answerOf(t, l.fetch(2, 110)).Err, replica.ErrNotLeader)
}

// A new leader does not know its followers' LEOs: the HW waits until every
// ISR member fetched (Kafka's resetReplicaState).
func TestLeaderNewLeaderWaitsForISRFetches(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2, 3}, 1, 100, 60)
	n, ok := l.m.FollowerLogEnd(2)
	require.True(t, ok)
	require.Equal(t, machine.NoOffset, n)
	require.Empty(t, only[machine.SetHW](l.fetch(2, 100)))
	require.Equal(t, []machine.SetHW{{HW: 90}}, only[machine.SetHW](l.fetch(3, 90)))
	// A stale metadata event (older leader epoch) changes nothing.
	require.Empty(t, l.step(machine.Metadata{Leader: 2, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: []int{1, 2, 3}, ISR: []int{2}}))
	require.True(t, l.m.Leading())
	// Re-elected with a new epoch (no leader change): the epoch starts at
	// the LEO and the HW stays.
	acts := l.step(machine.Metadata{Leader: 1, LeaderEpoch: 6, PartitionEpoch: 11, Replicas: []int{1, 2, 3}, ISR: []int{1, 2, 3}})
	require.Equal(t, []machine.StartEpoch{{Epoch: 6, StartOffset: 100}}, only[machine.StartEpoch](acts))
	require.Equal(t, int64(90), l.m.HW())
}

// A follower outside the ISR that is caught up holds the HW at its LEO even
// before its expansion is proposed (Kafka's shouldWaitForReplicaToJoinIsr),
// so that under a steady stream of appends it can still reach the HW.
func TestLeaderCaughtUpFollowerOutsideISRHoldsHW(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1}, 1, 0, 0)
	l.append(10)
	require.Equal(t, int64(10), l.m.HW())
	require.Len(t, only[machine.ProposeISR](l.fetch(2, 10)), 1) // expansion of 2 in flight
	require.Empty(t, only[machine.ProposeISR](l.fetch(3, 10)), "one AlterPartition at a time")
	l.append(20)
	require.Empty(t, only[machine.SetHW](l.fetch(2, 15)), "follower 3, caught up, holds the HW at 10")
	require.Empty(t, only[machine.SetHW](l.fetch(2, 20)))
	require.Equal(t, int64(10), l.m.HW())
	// Once it is past the lag time without catching up, it no longer does.
	l.at(lag + time.Second)
	require.Equal(t, []machine.SetHW{{HW: 20}}, only[machine.SetHW](l.step(machine.Tick{})))
}

func TestLeaderErrorsAreSentinels(t *testing.T) {
	l := newLeader(t, []int{1, 2}, []int{1}, 2, 0, 0)
	err := l.m.CheckProduce()
	require.True(t, errors.Is(err, replica.ErrNotEnoughReplicas))
	require.Contains(t, err.Error(), "ISR [1], min 2")
}

// A fenced or shutting-down follower is not proposed into the ISR and does
// not hold the HW (Kafka's isReplicaIsrEligible), until the metadata says it
// is eligible again.
func TestLeaderIneligibleFollower(t *testing.T) {
	l := newLeader(t, []int{1, 2, 3}, []int{1, 2}, 1, 0, 0)
	md := machine.Metadata{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10, Replicas: []int{1, 2, 3}, ISR: []int{1, 2}, MinInSyncReplicas: 1, Ineligible: []int{3}}
	require.Empty(t, l.step(md), "known partition state: only eligibility is taken")
	l.append(10)
	l.fetch(2, 10)
	require.Empty(t, only[machine.ProposeISR](l.fetch(3, 10)), "ineligible")
	l.append(20)
	require.Equal(t, []machine.SetHW{{HW: 20}}, only[machine.SetHW](l.fetch(2, 20)), "follower 3, caught up but ineligible, does not hold the HW")
	md.Ineligible = nil
	l.step(md)
	require.Equal(t, []machine.ProposeISR{{ISR: []int{1, 2, 3}, LeaderEpoch: 5, PartitionEpoch: 10}}, only[machine.ProposeISR](l.fetch(3, 20)))
}

// Under a steady stream of appends a follower outside the ISR is always one
// fetch behind the leader's LEO; it can still join, because once caught up
// (with the LEO of its previous fetch) it holds the HW at its own LEO.
func TestLeaderFollowerJoinsUnderSteadyAppends(t *testing.T) {
	l := newLeader(t, []int{1, 2}, []int{1}, 1, 0, 0)
	end := int64(0)
	for i := range 100 {
		l.at(time.Duration(i) * 100 * time.Millisecond)
		end += 5
		l.append(end)
		// The follower fetches what it got last time: the LEO of its
		// previous fetch, never the current one.
		if ps := only[machine.ProposeISR](l.fetch(2, end-5)); len(ps) > 0 {
			require.Equal(t, []int{1, 2}, ps[0].ISR)
			return
		}
	}
	t.Fatal("follower 2 never proposed into the ISR")
}
