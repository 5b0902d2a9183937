package replica_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/machine/machinetest"
)

// testLog is a log as the tests see it: the epoch of every record (offsets
// from 0) and its leader-epoch cache, kept in step.
type testLog struct {
	epochs []int32
	cache  machinetest.Epochs
}

// logOf builds a log of end records whose epochs start at the given
// (epoch, start offset) pairs.
func logOf(end int64, starts ...machine.EpochEnd) *testLog {
	l := &testLog{}
	for i, s := range starts {
		next := end
		if i+1 < len(starts) {
			next = starts[i+1].EndOffset
		}
		l.append(s.Epoch, next-s.EndOffset)
	}
	return l
}

func ep(epoch int32, start int64) machine.EpochEnd {
	return machine.EpochEnd{Epoch: epoch, EndOffset: start}
}

func (l *testLog) end() int64 { return int64(len(l.epochs)) }

func (l *testLog) append(epoch int32, n int64) {
	if n <= 0 {
		return
	}
	l.cache.Assign(epoch, l.end())
	for range n {
		l.epochs = append(l.epochs, epoch)
	}
	l.cache.End = l.end()
}

func (l *testLog) truncate(to int64) {
	l.epochs = l.epochs[:to]
	l.cache.TruncateTo(to)
}

func (l *testLog) lastEpoch() int32 { return l.cache.Latest() }

// divergence is what a leader with log l answers a Fetch at off with last
// fetched epoch e (nil: no divergence).
func (l *testLog) divergence(off int64, e int32) *machine.EpochEnd {
	if e == machine.NoEpoch {
		return nil
	}
	le, end := l.cache.EndOffsetFor(e)
	if le < e || end < off {
		return &machine.EpochEnd{Epoch: le, EndOffset: end}
	}
	return nil
}

func becomeFrom(l *testLog, hw int64, kip320 bool) machine.BecomeFollower {
	return machine.BecomeFollower{Leader: 2, LeaderEpoch: 7, TruncateOnFetch: kip320, LogEnd: l.end(), LastEpoch: l.lastEpoch(), HW: hw}
}

// reconcile plays a follower with log f against a leader with log ld until
// the follower fetches without divergence, carrying out truncations; it
// returns the offset of that fetch and the truncations done.
func reconcile(t *testing.T, f, ld *testLog, hw int64, kip320 bool) (int64, []int64) {
	t.Helper()
	m := machine.NewFollowerMachine(&f.cache)
	acts := m.Step(becomeFrom(f, hw, kip320), nil)
	var truncs []int64
	for range 20 {
		require.Len(t, acts, 1, "one action at a time: %v", acts)
		switch a := acts[0].(type) {
		case machine.Truncate:
			require.LessOrEqual(t, a.To, f.end())
			truncs = append(truncs, a.To)
			f.truncate(a.To)
			acts = m.Step(machine.Truncated{LogEnd: f.end(), LastEpoch: f.lastEpoch()}, nil)
		case machine.FetchEpochEnd:
			require.Equal(t, int32(7), a.LeaderEpoch)
			e, end := ld.cache.EndOffsetFor(a.Epoch)
			acts = m.Step(machine.EpochEndResponse{LeaderEpoch: 7, End: machine.EpochEnd{Epoch: e, EndOffset: end}}, nil)
		case machine.Fetch:
			require.Equal(t, machine.Fetch{Leader: 2, LeaderEpoch: 7, Offset: f.end(), LastFetchedEpoch: a.LastFetchedEpoch}, a)
			d := ld.divergence(a.Offset, a.LastFetchedEpoch)
			if d == nil || !kip320 {
				return a.Offset, truncs
			}
			acts = m.Step(machine.FetchResponse{LeaderEpoch: 7, Diverging: d, HW: hw, LogEnd: ld.end()}, nil)
		default:
			t.Fatalf("unexpected action %#v", a)
		}
	}
	t.Fatal("no fetch after 20 steps")
	return 0, nil
}

func TestFollowerTruncation(t *testing.T) {
	cases := []struct {
		name     string
		follower *testLog
		leader   *testLog
		hw       int64
		wantAt   int64   // where the follower fetches, its log truncated there
		truncs   []int64 // the truncations, in order
	}{
		{"same log", logOf(100, ep(1, 0), ep(3, 50)), logOf(120, ep(1, 0), ep(3, 50)), 40, 100, nil},
		{"follower behind", logOf(60, ep(1, 0), ep(3, 50)), logOf(120, ep(1, 0), ep(3, 50), ep(4, 90)), 40, 60, nil},
		// The leader's epoch for the follower's last (3) is lower: 2, which
		// ended at 90 on the leader and 80 here.
		{"diverging epoch lower than own", logOf(100, ep(1, 0), ep(2, 50), ep(3, 80)), logOf(120, ep(1, 0), ep(2, 50), ep(4, 90)), 40, 80, []int64{80}},
		// Same last epoch, ended earlier on the leader (a new leader took
		// over at 70).
		{"diverging epoch equal", logOf(100, ep(1, 0), ep(2, 50)), logOf(120, ep(1, 0), ep(2, 50), ep(3, 70)), 40, 70, []int64{70}},
		// The leader answers epoch 2, which the follower never had: cut to
		// the end of its epoch 1 (50), ask again with 1, cut to the
		// leader's end of 1 (40).
		{"leader's epoch unknown to the follower", logOf(100, ep(1, 0), ep(3, 50)), logOf(120, ep(1, 0), ep(2, 40), ep(4, 60)), 30, 40, []int64{50, 40}},
		// Epoch 1 ended at 40 on the leader, the follower's 1 is shorter:
		// nothing is cut.
		{"follower's epoch ended first", logOf(30, ep(1, 0)), logOf(120, ep(1, 0), ep(2, 40)), 30, 30, nil},
		// The leader's epoch 0 (below the follower's first) ended at 20;
		// the follower's cache answers for 0 with its first epoch's
		// start: everything goes.
		{"all of the follower's epochs unknown to the leader", logOf(50, ep(1, 0)), logOf(80, ep(0, 0), ep(4, 20)), 10, 0, []int64{0}},
	}
	for _, c := range cases {
		for _, kip320 := range []bool{true, false} {
			name := c.name + "/OffsetForLeaderEpoch"
			if kip320 {
				name = c.name + "/DivergingEpoch"
			}
			t.Run(name, func(t *testing.T) {
				f := logOf(0)
				f.epochs = append(f.epochs, c.follower.epochs...)
				f.cache = machinetest.Epochs{Entries: append([]machine.EpochEnd(nil), c.follower.cache.Entries...), End: c.follower.cache.End}
				at, truncs := reconcile(t, f, c.leader, c.hw, kip320)
				require.Equal(t, c.wantAt, at)
				require.Equal(t, c.truncs, truncs)
				require.Equal(t, c.leader.epochs[:at], f.epochs, "the follower's log is a prefix of the leader's")
			})
		}
	}
}

func TestFollowerWithoutEpochsTruncatesToHW(t *testing.T) {
	m := machine.NewFollowerMachine(&machinetest.Epochs{})
	acts := m.Step(machine.BecomeFollower{Leader: 2, LeaderEpoch: 7, TruncateOnFetch: true, LogEnd: 100, LastEpoch: machine.NoEpoch, HW: 60}, nil)
	require.Equal(t, []machine.Action{machine.Truncate{To: 60}}, acts)
	acts = m.Step(machine.Truncated{LogEnd: 60, LastEpoch: machine.NoEpoch}, nil)
	require.Equal(t, []machine.Action{machine.Fetch{Leader: 2, LeaderEpoch: 7, Offset: 60, LastFetchedEpoch: machine.NoEpoch}}, acts)
}

func TestFollowerLeaderWithoutOurEpochFallsBackToHW(t *testing.T) {
	f := logOf(100, ep(1, 0), ep(9, 50))
	m := machine.NewFollowerMachine(&f.cache)
	acts := m.Step(becomeFrom(f, 60, true), nil)
	require.Equal(t, []machine.Action{machine.Fetch{Leader: 2, LeaderEpoch: 7, Offset: 100, LastFetchedEpoch: 9}}, acts)
	acts = m.Step(machine.FetchResponse{LeaderEpoch: 7, Diverging: &machine.EpochEnd{Epoch: machine.NoEpoch, EndOffset: machine.NoOffset}, HW: 60, LogEnd: 100}, nil)
	require.Equal(t, []machine.Action{machine.Truncate{To: 60}}, acts)
	f.truncate(60)
	acts = m.Step(machine.Truncated{LogEnd: 60, LastEpoch: f.lastEpoch()}, nil)
	require.Equal(t, []machine.Action{machine.Fetch{Leader: 2, LeaderEpoch: 7, Offset: 60, LastFetchedEpoch: machine.NoEpoch}}, acts)
}

func TestFollowerAdoptsHWAndLogStart(t *testing.T) {
	f := logOf(100, ep(1, 0))
	m := machine.NewFollowerMachine(&f.cache)
	m.Step(becomeFrom(f, 40, true), nil)
	fetchAt := func(off int64) machine.Action {
		return machine.Fetch{Leader: 2, LeaderEpoch: 7, Offset: off, LastFetchedEpoch: 1}
	}
	// No records: the HW is the leader's, at most our LEO.
	acts := m.Step(machine.FetchResponse{LeaderEpoch: 7, HW: 120, LogStart: 10, LogEnd: 130}, nil)
	require.Equal(t, []machine.Action{machine.SetFollowerHW{HW: 100}, machine.SetLogStart{Offset: 10}, fetchAt(100)}, acts)
	// Records: appended first, then the HW and the next fetch.
	acts = m.Step(machine.FetchResponse{LeaderEpoch: 7, HW: 125, LogStart: 10, LogEnd: 130, Records: true}, nil)
	require.Equal(t, []machine.Action{machine.AppendRecords{}}, acts)
	require.Empty(t, m.Step(machine.FetchResponse{LeaderEpoch: 7, HW: 130}, nil), "no fetch is out while appending")
	acts = m.Step(machine.FollowerAppended{LogEnd: 130, LastEpoch: 1}, nil)
	require.Equal(t, []machine.Action{machine.SetFollowerHW{HW: 125}, fetchAt(130)}, acts)
	require.Equal(t, int64(125), m.HW())
	// The log start moves only up; the HW may move down (a new leader).
	acts = m.Step(machine.FetchResponse{LeaderEpoch: 7, HW: 110, LogStart: 5, LogEnd: 130}, nil)
	require.Equal(t, []machine.Action{machine.SetFollowerHW{HW: 110}, fetchAt(130)}, acts)
	// An answer of another epoch is ignored; errors wait for a retry.
	require.Empty(t, m.Step(machine.FetchResponse{LeaderEpoch: 6, HW: 130, LogEnd: 130}, nil))
	require.Empty(t, m.Step(machine.FetchResponse{LeaderEpoch: 7, Err: replica.ErrUnknownLeaderEpoch}, nil))
	require.Equal(t, int64(110), m.HW())
}

func TestFollowerOutOfRange(t *testing.T) {
	t.Run("below the leader's log start", func(t *testing.T) {
		f := logOf(100, ep(1, 0))
		m := machine.NewFollowerMachine(&f.cache)
		m.Step(becomeFrom(f, 90, true), nil)
		acts := m.Step(machine.FetchResponse{LeaderEpoch: 7, Err: replica.ErrOffsetOutOfRange, LogStart: 500, LogEnd: 800}, nil)
		require.Equal(t, []machine.Action{machine.TruncateFully{StartAt: 500}}, acts)
		acts = m.Step(machine.Truncated{LogEnd: 500, LastEpoch: machine.NoEpoch}, nil)
		require.Equal(t, []machine.Action{machine.Fetch{Leader: 2, LeaderEpoch: 7, Offset: 500, LastFetchedEpoch: machine.NoEpoch}}, acts)
		require.Equal(t, int64(500), m.LogStart())
		require.Equal(t, int64(500), m.HW())
	})
	t.Run("past the leader's end", func(t *testing.T) {
		f := logOf(100, ep(1, 0))
		m := machine.NewFollowerMachine(&f.cache)
		m.Step(becomeFrom(f, 90, true), nil)
		acts := m.Step(machine.FetchResponse{LeaderEpoch: 7, Err: replica.ErrOffsetOutOfRange, LogStart: 0, LogEnd: 95}, nil)
		require.Equal(t, []machine.Action{machine.Truncate{To: 95}}, acts)
	})
}

func TestFollowerIgnoresStaleEvents(t *testing.T) {
	f := logOf(100, ep(1, 0))
	m := machine.NewFollowerMachine(&f.cache)
	require.Empty(t, m.Step(machine.Truncated{LogEnd: 3}, nil), "idle")
	m.Step(becomeFrom(f, 90, false), nil) // asks OffsetForLeaderEpoch
	require.Empty(t, m.Step(machine.FetchResponse{LeaderEpoch: 7, HW: 100}, nil), "no fetch is out")
	require.Empty(t, m.Step(machine.EpochEndResponse{LeaderEpoch: 6, End: ep(1, 50)}, nil), "older epoch")
	old := becomeFrom(f, 90, true)
	old.LeaderEpoch = 6
	require.Empty(t, m.Step(old, nil), "older metadata")
	require.Empty(t, m.Step(becomeFrom(f, 90, true), nil), "known")
	leader, epoch, ok := m.Following()
	require.Equal(t, []any{2, int32(7), true}, []any{leader, epoch, ok})
	// A new epoch starts over, even mid-request.
	newer := becomeFrom(f, 90, true)
	newer.LeaderEpoch, newer.Leader = 8, 3
	require.Equal(t, []machine.Action{machine.Fetch{Leader: 3, LeaderEpoch: 8, Offset: 100, LastFetchedEpoch: 1}}, m.Step(newer, nil))
	m.Stop()
	require.Empty(t, m.Step(machine.FetchResponse{LeaderEpoch: 8, HW: 100}, nil))
}

// A broker that led epoch 7 without appending has (7, 57) at the end of its
// cache. Following a leader whose epoch 6 goes past 57, it must drop that
// entry (a truncation at its log end) before it appends records of epoch 6,
// or its cache would lose where epoch 6 starts.
func TestFollowerDropsEmptyEpochAtLogEnd(t *testing.T) {
	for _, kip320 := range []bool{true, false} {
		f := logOf(57, ep(5, 0), ep(6, 52))
		f.cache.Assign(7, 57)
		ld := logOf(70, ep(5, 0), ep(6, 52), ep(8, 62))
		at, truncs := reconcile(t, f, ld, 50, kip320)
		require.Equal(t, int64(57), at)
		require.Equal(t, []int64{57}, truncs)
		require.Equal(t, int32(6), f.cache.Latest(), "the empty epoch is gone")
	}
}
