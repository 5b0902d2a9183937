package segment

import (
	"math"
	"testing"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestTxnIndexLifecycle: the .txnindex is created by the first abort,
// durable after Sync, cut by TruncateTo, emptied by Recover (the partition
// rebuilds it), repaired of a torn tail when opened, and removed with its
// segment; BatchHeadersControl hands over the markers whole.
func TestTxnIndexLifecycle(t *testing.T) {
	fs := vfs.NewMem()
	dir := "/d"
	require.NoError(t, fs.MkdirAll(dir, 0o755))
	s := create(t, fs, dir, 100, tiny)
	name := s.path(".txnindex")

	txns, complete, err := s.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Empty(t, txns)
	require.False(t, complete)
	_, err = fs.Stat(name)
	require.Error(t, err, "no file before the first abort")

	var markers []int64
	var want []index.AbortedTxn
	for i := range 4 {
		appendRecs(t, s, simple(3, t0.UnixMilli(), 10))
		w := appendB(t, s, batch.AppendMarker(nil, batch.Marker{ProducerID: int64(i), Timestamp: t0.UnixMilli()}))
		markers = append(markers, w.h.BaseOffset)
		a := index.AbortedTxn{ProducerID: int64(i), FirstOffset: w.h.BaseOffset - 3, LastOffset: w.h.BaseOffset, LastStableOffset: w.h.BaseOffset + 1}
		require.NoError(t, s.AppendAbortedTxn(a))
		want = append(want, a)
	}
	require.ErrorIs(t, s.AppendAbortedTxn(index.AbortedTxn{LastOffset: 99}), index.ErrInvalidEntry)
	txns, _, err = s.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, want, txns)

	var seen []int64
	require.NoError(t, s.BatchHeadersControl(func(h batch.Header, control []byte) bool {
		require.Equal(t, h.Control(), control != nil)
		if control != nil {
			m, _, err := batch.ParseMarker(control)
			require.NoError(t, err)
			require.EqualValues(t, len(seen), m.ProducerID)
			seen = append(seen, h.BaseOffset)
		}
		return true
	}))
	require.Equal(t, markers, seen)

	// Only what Sync made durable survives a crash.
	require.NoError(t, s.Sync())
	crashed := fs.CrashClone()
	st, err := crashed.Stat(name)
	require.NoError(t, err)
	require.EqualValues(t, 4*index.TxnEntrySize, st.Size())

	// TruncateTo the third marker: two entries left, durably.
	_, err = s.TruncateTo(markers[2], 0)
	require.NoError(t, err)
	txns, _, err = s.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, want[:2], txns)
	st, err = fs.CrashClone().Stat(name)
	require.NoError(t, err)
	require.EqualValues(t, 2*index.TxnEntrySize, st.Size())
	require.NoError(t, s.Close())

	// A torn tail is cut when the index is opened: never read as an entry.
	f, err := fs.OpenReadWrite(name)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0, 0, 1, 2, 3}, 2*index.TxnEntrySize)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s, _ = open(t, fs, dir, 100, tiny, false)
	txns, _, err = s.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, want[:2], txns)
	require.NoError(t, s.Close())

	// Recover empties it for the partition to rebuild.
	s, _ = open(t, fs, dir, 100, tiny, true)
	txns, _, err = s.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Empty(t, txns)
	require.NoError(t, s.AppendAbortedTxn(want[0]))

	require.NoError(t, s.Delete())
	_, err = fs.Stat(name)
	require.Error(t, err, "deleted with its segment")
	_, _, err = s.AbortedTxns(0, math.MaxInt64)
	require.ErrorIs(t, err, ErrClosed)

	// A new segment at the same base starts without the old entries.
	f, err = fs.Create(name)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, index.TxnEntrySize))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s = create(t, fs, dir, 100, tiny)
	defer s.Close()
	txns, _, err = s.AbortedTxns(0, math.MaxInt64)
	require.NoError(t, err)
	require.Empty(t, txns)
}
