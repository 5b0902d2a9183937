package log

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

func TestDeleteRecordsBefore(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		b := openT(t, fs, dir)
		p := createT(t, b, "t", small)
		appendN(t, p, 60, 3) // 180 records over several segments
		segs := p.Segments()
		require.Greater(t, segs, 3)
		end := p.EndOffset()

		// Refused, changing nothing.
		_, err := p.DeleteRecordsBefore(end + 1)
		var oor *OffsetOutOfRangeError
		require.ErrorAs(t, err, &oor)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		_, err = p.DeleteRecordsBefore(-2)
		require.ErrorIs(t, err, ErrInvalidOffset)
		require.EqualValues(t, 0, p.StartOffset())
		require.Equal(t, segs, p.Segments())

		// Inside a batch, past the first segments.
		const cut = 100
		low, err := p.DeleteRecordsBefore(cut)
		require.NoError(t, err)
		require.EqualValues(t, cut, low)
		require.EqualValues(t, cut, p.StartOffset())
		require.Less(t, p.Segments(), segs, "whole segments below the start are deleted")
		_, err = p.Read(cut-1, 1<<20)
		require.ErrorIs(t, err, ErrOffsetOutOfRange, "reads below the start fail")
		recs, err := p.Read(cut, 1<<20)
		require.NoError(t, err)
		require.NotEmpty(t, recs)
		require.EqualValues(t, cut, recs[0].Offset)
		off, err := b.ListOffset(context.Background(), TopicPartition{Topic: "t"}, EarliestOffset)
		require.NoError(t, err)
		require.EqualValues(t, cut, off)

		// At or below the start: nothing to do, the start is the answer.
		low, err = p.DeleteRecordsBefore(50)
		require.NoError(t, err)
		require.EqualValues(t, cut, low)

		// Through the broker; -1 is the high watermark.
		_, err = b.DeleteRecords(t.Context(), TopicPartition{Topic: "t", Partition: 1}, 0)
		require.ErrorIs(t, err, ErrUnknownPartition)
		low, err = b.DeleteRecords(t.Context(), TopicPartition{Topic: "t"}, -1)
		require.NoError(t, err)
		require.Equal(t, end, low)
		require.Equal(t, 1, p.Segments(), "only the active segment is left")
		recs, err = p.Read(end, 1<<20)
		require.NoError(t, err)
		require.Empty(t, recs)
		// The log goes on at its end.
		next, err := p.Append(rec(1))
		require.NoError(t, err)
		require.Equal(t, end, next)
		require.NoError(t, b.Close())

		b = openT(t, fs, dir)
		defer b.Close()
		p, err = b.Partition("t", 0)
		require.NoError(t, err)
		require.Equal(t, end, p.StartOffset(), "the start survives a restart")
		require.Equal(t, end+1, p.EndOffset())
	})
}

// TestCrashDuringDeleteRecords crashes at every file-system operation of a
// DeleteRecordsBefore inside a segment: after the reopen the start is
// either the old one, with every record, or exactly the requested one
// (never the base of the segment that holds it, which would bring deleted
// records back), with the records from there on intact; once the call
// returns, it is the requested one.
func TestCrashDuringDeleteRecords(t *testing.T) {
	const cut = 100
	for n := 0; ; n++ {
		mem := vfs.NewMem()
		efs, hook := injectable(mem)
		s := openStoreT(t, efs, StoreConfig{})
		p, err := s.CreatePartition("t", 0, small)
		require.NoError(t, err)
		appendN(t, p, 60, 3)
		_, err = p.SetHighWatermark(p.EndOffset())
		require.NoError(t, err)
		require.NoError(t, p.Flush())
		require.NoError(t, s.WriteCheckpoints())
		old := allBatches(t, p)
		oldEnd := p.EndOffset()
		seg := p.segmentFor(cut)
		require.Less(t, seg.BaseOffset(), int64(cut), "the cut is inside a segment")
		seg.Release()

		var crashed *vfs.MemFS
		s.roundMu.Lock() // the crash point is the same every run
		hook.set(crashAtOp(mem, n, &crashed, nil))
		_, err = p.DeleteRecordsBefore(cut)
		hook.set(nil)
		var after *vfs.MemFS // a crash right after the call
		if crashed == nil {
			after = mem.CrashClone()
		}
		s.roundMu.Unlock()
		s.Close()
		if crashed == nil {
			require.NoError(t, err)
			require.Positive(t, n)
			// Acknowledged: a crash now keeps it.
			s = openStoreT(t, after, StoreConfig{})
			p, err = s.OpenPartition("t", 0, small)
			require.NoError(t, err)
			require.EqualValues(t, cut, p.StartOffset())
			require.NoError(t, s.Close())
			break
		}
		s = openStoreT(t, crashed, StoreConfig{})
		p, err = s.OpenPartition("t", 0, small)
		require.NoError(t, err, "crash at operation %d", n)
		require.Equal(t, oldEnd, p.EndOffset(), "crash at operation %d", n)
		switch start := p.StartOffset(); start {
		case 0:
			require.Equal(t, old, allBatches(t, p), "crash at operation %d: untouched", n)
		case cut:
			_, err := p.Read(cut-1, 1<<20)
			require.ErrorIs(t, err, ErrOffsetOutOfRange, "crash at operation %d", n)
			got := allBatches(t, p)
			require.Equal(t, old[len(old)-len(got):], got, "crash at operation %d: the records kept are the old ones", n)
		default:
			t.Fatalf("crash at operation %d: start %d, neither 0 nor %d", n, start, cut)
		}
		require.NoError(t, s.Close())
	}
}

// TestDeleteRecordsDuringAppendsAndReads moves the start while a writer
// appends and a reader reads from the start (for the race detector): the
// reader gets records at or after the start it read, or an
// OffsetOutOfRangeError when the start passed it.
func TestDeleteRecordsDuringAppendsAndReads(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	p := createT(t, b, "t", small)
	appendN(t, p, 10, 3)
	stop := make(chan struct{})
	done := make(chan error, 2)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := p.Append(rec(1)); err != nil {
				done <- err
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			from := p.StartOffset()
			recs, err := p.Read(from, 1<<12)
			switch {
			case errors.Is(err, ErrOffsetOutOfRange):
			case err != nil:
				done <- err
				return
			case len(recs) > 0 && recs[0].Offset < from:
				done <- fmt.Errorf("read from %d got offset %d", from, recs[0].Offset)
				return
			}
		}
	}()
	last := int64(0)
	for i := 0; i < 100; i++ {
		low, err := p.DeleteRecordsBefore(min(p.HighWatermark(), last+7))
		require.NoError(t, err)
		require.GreaterOrEqual(t, low, last, "the start never goes back")
		last = low
	}
	close(stop)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	require.Equal(t, last, p.StartOffset())
}
