package log

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// epochOp is one step of an epoch-cache table test: assign (epoch, off),
// truncate from the end or the start at off, or clear.
type epochOp struct {
	op    byte // 'a' assign, 'e' truncateFromEnd, 's' truncateFromStart, 'c' clear
	epoch int32
	off   int64
}

func assignOp(epoch int32, off int64) epochOp { return epochOp{op: 'a', epoch: epoch, off: off} }
func endOp(off int64) epochOp                 { return epochOp{op: 'e', off: off} }
func startOp(off int64) epochOp               { return epochOp{op: 's', off: off} }

// endQuery is one endOffsetFor(epoch, leo) call and its expected answer.
type endQuery struct {
	epoch   int32
	leo     int64
	wantEp  int32
	wantEnd int64
}

// TestEpochCacheKafkaCases runs the cases of Kafka's LeaderEpochFileCacheTest
// against epochCache.
func TestEpochCacheKafkaCases(t *testing.T) {
	U, UO := UndefinedEpoch, UndefinedEpochOffset
	cases := []struct {
		name    string
		ops     []epochOp
		want    []EpochEntry // nil: not checked; empty: must be empty
		latest  int32        // -1: empty
		queries []endQuery
	}{
		{name: "add epoch and offset", ops: []epochOp{assignOp(2, 10)},
			want: []EpochEntry{{2, 10}}, latest: 2, queries: []endQuery{{2, 11, 2, 11}}},
		{name: "latest epoch answers the log end offset", ops: []epochOp{assignOp(2, 11), assignOp(2, 12)},
			latest: 2, queries: []endQuery{{2, 14, 2, 14}}},
		{name: "undefined epoch requested", ops: []epochOp{assignOp(2, 11), assignOp(3, 12)},
			latest: 3, queries: []endQuery{{U, 0, U, UO}}},
		{name: "offset of an epoch is not overwritten by a later one", ops: []epochOp{assignOp(2, 9), assignOp(2, 10)},
			want: []EpochEntry{{2, 9}}, latest: 2},
		{name: "start offsets increase: same start replaces", ops: []epochOp{assignOp(2, 9), assignOp(3, 9)},
			want: []EpochEntry{{3, 9}}, latest: 3},
		{name: "same epoch later offset keeps the first", ops: []epochOp{assignOp(2, 6), assignOp(2, 10)},
			want: []EpochEntry{{2, 6}}, latest: 2},
		{name: "nothing recorded", latest: -1, want: []EpochEntry{},
			queries: []endQuery{{0, 0, U, UO}, {U, 73, U, UO}, {7, 0, U, UO}}},
		{name: "epoch below the first answers the first start (KIP-279)", ops: []epochOp{assignOp(5, 11), assignOp(6, 12), assignOp(7, 13)},
			latest: 7, queries: []endQuery{{4, 0, 4, 11}}},
		{name: "matching epoch with an earlier start truncates", ops: []epochOp{assignOp(5, 11), assignOp(6, 12), assignOp(7, 13), assignOp(7, 12)},
			want: []EpochEntry{{5, 11}, {7, 12}}, latest: 7, queries: []endQuery{{5, 0, 5, 12}, {6, 0, 5, 12}}},
		{name: "previous epoch ends where the next starts", ops: []epochOp{assignOp(1, 11), assignOp(1, 12), assignOp(2, 13), assignOp(2, 14), assignOp(3, 15), assignOp(3, 16)},
			latest: 3, queries: []endQuery{{2, 17, 2, 15}}},
		{name: "no exact epoch: the one below it", ops: []epochOp{assignOp(0, 10), assignOp(2, 13), assignOp(4, 17)},
			latest: 4, queries: []endQuery{{1, 0, 0, 13}, {2, 0, 2, 17}, {3, 0, 2, 17}}},
		{name: "unchanged epoch and start", ops: []epochOp{assignOp(2, 6), assignOp(2, 7)},
			want: []EpochEntry{{2, 6}}, latest: 2},
		{name: "epoch above the latest is not tracked", ops: []epochOp{assignOp(2, 100)},
			latest: 2, queries: []endQuery{{3, 100, U, UO}}},
		{name: "epochs need not start from zero", ops: []epochOp{assignOp(2, 6)},
			want: []EpochEntry{{2, 6}}, latest: 2, queries: []endQuery{{2, 7, 2, 7}}},
		{name: "epochs increase: a lower one replaces the higher", ops: []epochOp{assignOp(1, 5), assignOp(2, 6), assignOp(1, 7)},
			want: []EpochEntry{{1, 7}}, latest: 1, queries: []endQuery{{1, 8, 1, 8}, {2, 8, U, UO}}},
		{name: "offsets increase: a lower start replaces", ops: []epochOp{assignOp(2, 6), assignOp(3, 5)},
			want: []EpochEntry{{3, 5}}, latest: 3},
		{name: "leaders change many times", ops: []epochOp{assignOp(0, 0), assignOp(1, 0), assignOp(2, 5)},
			want: []EpochEntry{{1, 0}, {2, 5}}, latest: 2,
			queries: []endQuery{{2, 10, 2, 10}, {1, 10, 1, 5}, {0, 10, 0, 0}}},
		{name: "leaders change many times, before epoch 2", ops: []epochOp{assignOp(0, 0), assignOp(1, 0)},
			latest: 1, queries: []endQuery{{1, 0, 1, 0}, {0, 0, 0, 0}, {1, 5, 1, 5}, {0, 5, 0, 0}}},
		{name: "follower receives many messages", ops: []epochOp{
			assignOp(0, 0), assignOp(0, 1), assignOp(0, 2), assignOp(1, 3), assignOp(1, 4), assignOp(1, 5),
			assignOp(2, 6), assignOp(2, 7), assignOp(2, 8)},
			want: []EpochEntry{{0, 0}, {1, 3}, {2, 6}}, latest: 2,
			queries: []endQuery{{2, 9, 2, 9}, {0, 9, 0, 3}, {1, 9, 1, 6}}},
		{name: "truncate from end on an epoch boundary", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), endOp(8)},
			want: []EpochEntry{{2, 6}}, latest: 2},
		{name: "truncate from end between boundaries", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), endOp(9)},
			want: []EpochEntry{{2, 6}, {3, 8}}, latest: 3},
		{name: "truncate from end, previous epoch", ops: []epochOp{assignOp(2, 10), assignOp(4, 15), assignOp(10, 20), endOp(18)},
			want: []EpochEntry{{2, 10}, {4, 15}}, latest: 4},
		{name: "truncate from start on a boundary", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(8)},
			want: []EpochEntry{{3, 8}, {4, 11}}, latest: 4},
		{name: "truncate from start too early", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(1)},
			want: []EpochEntry{{2, 6}, {3, 8}, {4, 11}}, latest: 4},
		{name: "truncate from start at the first offset", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(6)},
			want: []EpochEntry{{2, 6}, {3, 8}, {4, 11}}, latest: 4},
		{name: "truncate from start keeps the latest", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(11)},
			want: []EpochEntry{{4, 11}}, latest: 4},
		{name: "truncate from start between boundaries", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(9)},
			want: []EpochEntry{{3, 9}, {4, 11}}, latest: 4},
		{name: "truncate from start between the first two", ops: []epochOp{assignOp(0, 0), assignOp(1, 7), assignOp(2, 10), startOp(5)},
			want: []EpochEntry{{0, 5}, {1, 7}, {2, 10}}, latest: 2},
		{name: "truncate from start past every epoch moves the latest", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(15)},
			want: []EpochEntry{{4, 15}}, latest: 4},
		{name: "clear", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), {op: 'c'}},
			want: []EpochEntry{}, latest: -1},
		{name: "undefined start changes nothing", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), startOp(UO)},
			want: []EpochEntry{{2, 6}, {3, 8}, {4, 11}}, latest: 4},
		{name: "undefined end changes nothing", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), endOp(UO)},
			want: []EpochEntry{{2, 6}, {3, 8}, {4, 11}}, latest: 4},
		{name: "truncate an empty cache", ops: []epochOp{startOp(7), endOp(7)}, want: []EpochEntry{}, latest: -1},
		{name: "truncate from end and start", ops: []epochOp{assignOp(2, 6), assignOp(3, 8), assignOp(4, 11), endOp(11), startOp(8)},
			want: []EpochEntry{{3, 8}}, latest: 3},
		{name: "negative epoch (no epoch) is not recorded", ops: []epochOp{assignOp(-1, 0), assignOp(1, 3)},
			want: []EpochEntry{{1, 3}}, latest: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c epochCache
			for _, op := range tc.ops {
				switch op.op {
				case 'a':
					c, _ = c.assign(op.epoch, op.off)
				case 'e':
					c, _ = c.truncateFromEnd(op.off)
				case 's':
					c, _ = c.truncateFromStart(op.off)
				case 'c':
					c = nil
				}
				require.True(t, c.valid(), "after %+v: %v", op, c)
			}
			if tc.want != nil {
				require.Equal(t, tc.want, append([]EpochEntry{}, c...))
			}
			l, ok := c.latest()
			if tc.latest < 0 {
				require.False(t, ok)
			} else {
				require.True(t, ok)
				require.Equal(t, tc.latest, l.Epoch)
			}
			for _, q := range tc.queries {
				ep, end := c.endOffsetFor(q.epoch, q.leo)
				require.Equal(t, q.wantEp, ep, "endOffsetFor(%d, %d) epoch", q.epoch, q.leo)
				require.Equal(t, q.wantEnd, end, "endOffsetFor(%d, %d) offset", q.epoch, q.leo)
			}
			// The checkpoint format round-trips.
			back, err := parseEpochCheckpoint(formatEpochCheckpoint(c))
			require.NoError(t, err)
			require.Equal(t, append(epochCache{}, c...), append(epochCache{}, back...))
		})
	}
}

func TestEpochCacheEpochForOffset(t *testing.T) {
	var c epochCache
	c, _ = c.assign(0, 10)
	c, _ = c.assign(1, 20)
	c, _ = c.assign(5, 30)
	for _, tc := range []struct {
		off  int64
		want int32
		ok   bool
	}{{25, 1, true}, {20, 1, true}, {30, 5, true}, {50, 5, true}, {5, 0, false}} {
		e, ok := c.epochForOffset(tc.off)
		require.Equal(t, tc.ok, ok, "offset %d", tc.off)
		if ok {
			require.Equal(t, tc.want, e, "offset %d", tc.off)
		}
	}
}

// TestParseEpochCheckpointRefusesDamage: a torn or inconsistent
// leader-epoch-checkpoint is ErrCorrupt, never a cache.
func TestParseEpochCheckpointRefusesDamage(t *testing.T) {
	for _, data := range []string{
		"",
		"0\n",
		"0\n2\n0 0\n",           // fewer entries than announced
		"0\n1\n0 0\n3 5\n",      // more
		"0\n2\n0 0\n3 1",        // torn: no final newline
		"1\n1\n0 0\n",           // unknown version
		"0\n1\n0\n",             // malformed line
		"0\n1\nx 0\n",           // not a number
		"0\n2\n3 5\n2 9\n",      // epochs go back
		"0\n2\n2 9\n3 5\n",      // offsets go back
		"0\n1\n-1 0\n",          // negative epoch
		"0\n1\n0 -4\n",          // negative offset
		"0\n1\n0 0 7\n",         // extra field
		"0\n1\n0  0\n",          // not Kafka's single space
		"0\n1\n99999999999 0\n", // epoch overflows int32
	} {
		_, err := parseEpochCheckpoint([]byte(data))
		require.ErrorIs(t, err, ErrCorrupt, "%q", data)
	}
	c, err := parseEpochCheckpoint([]byte("0\n0\n"))
	require.NoError(t, err)
	require.Empty(t, c)
}
