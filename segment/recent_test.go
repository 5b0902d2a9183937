package segment

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// logReads wraps fs so that n counts the reads of .log files.
func logReads(fs vfs.FS, n *atomic.Int64) vfs.FS {
	return vfs.WithErrors(fs, func(op vfs.Op, path string) error {
		if op == vfs.OpRead && strings.HasSuffix(path, ".log") {
			n.Add(1)
		}
		return nil
	})
}

// checkAgainstModel asks Read, Range and Locate of s for every batch of ws
// (first and last offset, a few budgets and bounds) and compares them with
// modelRead.
func checkAgainstModel(t *testing.T, s *Segment, ws []written) {
	t.Helper()
	next := ws[len(ws)-1].h.NextOffset()
	for _, w := range ws {
		for _, off := range []int64{w.h.BaseOffset, w.h.LastOffset()} {
			pos, h, err := s.Locate(off)
			require.NoError(t, err)
			require.Equal(t, w.pos, pos, "Locate(%d)", off)
			require.Equal(t, w.h, h, "Locate(%d)", off)
			for _, bound := range []int64{w.h.BaseOffset + 1, next - 1, NoBound} {
				for _, maxBytes := range []int{1, 700, 1 << 20} {
					wantPos, wantLen, wantNext, wantData := modelRead(ws, off, maxBytes, bound, true)
					data, gotNext, err := s.Read(off, maxBytes, bound, true)
					require.NoError(t, err)
					require.Equal(t, wantData, data, "Read(%d, %d, %d)", off, maxBytes, bound)
					require.Equal(t, wantNext, gotNext, "Read(%d, %d, %d) next", off, maxBytes, bound)
					pos, length, gotNext, err := s.Range(off, maxBytes, bound, true)
					require.NoError(t, err)
					require.Equal(t, wantPos, pos, "Range(%d, %d, %d)", off, maxBytes, bound)
					require.Equal(t, wantLen, length, "Range(%d, %d, %d)", off, maxBytes, bound)
					require.Equal(t, wantNext, gotNext, "Range(%d, %d, %d) next", off, maxBytes, bound)
				}
			}
		}
	}
	_, _, err := s.Locate(next)
	require.ErrorIs(t, err, io.EOF)
	_, _, _, err = s.Range(next, 1<<20, NoBound, true)
	require.ErrorIs(t, err, io.EOF)
}

// TestRecentTailReadsNothing: at the end of the active segment, Range (what
// a fetch asks) finds the batches without reading the .log, and a read of a
// batch the ring no longer holds reads it in a few reads, not one per
// header; both return what the model says.
func TestRecentTailReadsNothing(t *testing.T) {
	fss(t, func(t *testing.T, base vfs.FS, dir string) {
		var reads atomic.Int64
		fs := logReads(base, &reads)
		s := create(t, fs, dir, 0, Config{}) // an index entry every 4 KiB
		defer s.Close()
		var ws []written
		for i := range 3 * recentSlots {
			ws = append(ws, appendRecs(t, s, simple(1+i%3, int64(i), 60)))
		}
		last := ws[len(ws)-1]
		for _, w := range ws[len(ws)-recentSlots/2:] {
			reads.Store(0)
			pos, length, next, err := s.Range(w.h.BaseOffset, 1<<20, NoBound, true)
			require.NoError(t, err)
			require.Zero(t, reads.Load(), "Range at %d of the tail read the .log", w.h.BaseOffset)
			require.Equal(t, w.pos, pos)
			require.Equal(t, last.pos+int64(len(last.b))-w.pos, length)
			require.Equal(t, last.h.NextOffset(), next)
		}
		reads.Store(0)
		_, _, _, err := s.Range(s.NextOffset(), 1<<20, NoBound, true)
		require.ErrorIs(t, err, io.EOF)
		require.Zero(t, reads.Load())

		// Before the ring: a read per 4 KiB walked, at most two here,
		// where one per header would be about 30.
		w := ws[10]
		reads.Store(0)
		_, length, _, err := s.Range(w.h.BaseOffset, 1000, NoBound, true)
		require.NoError(t, err)
		require.LessOrEqual(t, reads.Load(), int64(2))
		require.Positive(t, length)

		checkAgainstModel(t, s, ws)

		// Sealed: the ring is dropped, reads go through the index and
		// still agree.
		require.NoError(t, s.Seal())
		require.Nil(t, s.recent.Load())
		checkAgainstModel(t, s, ws)
	})
}

// TestRecentAfterTruncate: a truncation into the batches the ring holds,
// followed by appends of other sizes at the cut, is read as the new batches
// only, at every offset, from the ring and from the file.
func TestRecentAfterTruncate(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, tiny)
		defer s.Close()
		rng := rand.New(rand.NewPCG(31, 32))
		ts := int64(0)
		ws := fill(t, s, rng, recentSlots+40, &ts)
		for _, cut := range []int{len(ws) - 3, len(ws) - 20, 5} {
			// A reader's view from before the cut still reads at the end.
			at := ws[cut].h.BaseOffset + int64(ws[cut].h.LastOffsetDelta)/2
			next, err := s.TruncateTo(at, 0)
			require.NoError(t, err)
			require.Equal(t, ws[cut].h.BaseOffset, next)
			ws = ws[:cut]
			_, _, _, err = s.Range(next, 1<<20, NoBound, true)
			require.ErrorIs(t, err, io.EOF)
			ws = append(ws, fill(t, s, rng, 30, &ts)...)
			checkAgainstModel(t, s, ws)
		}
		// The bytes on file are the model's, batch for batch.
		require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
	})
}

// TestRecentAfterCrash: a segment recovered after a crash that lost its
// unsynced tail, then appended to, is read as what survived plus the new
// batches; the lost batches are never found, though the ring of the
// crashed segment held them.
func TestRecentAfterCrash(t *testing.T) {
	fs := vfs.NewMem()
	require.NoError(t, fs.MkdirAll("/seg", 0o755))
	s := create(t, fs, "/seg", 0, tiny)
	require.NoError(t, fs.SyncDir("/seg"))
	ts := int64(0)
	rng := rand.New(rand.NewPCG(33, 34))
	ws := fill(t, s, rng, 50, &ts)
	require.NoError(t, s.Sync())
	lost := fill(t, s, rng, 20, &ts) // not synced
	crashed := fs.CrashClone()
	// A torn write: half of a batch past what survives.
	modify(t, crashed, "/seg/"+Name(0, ".log"), func(f vfs.File) {
		writeAt(t, f, lost[0].b[:len(lost[0].b)/2], lost[0].pos)
	})
	require.NoError(t, s.Close())

	r, truncated := open(t, crashed, "/seg", 0, tiny, true)
	defer r.Close()
	require.Equal(t, int64(len(lost[0].b)/2), truncated)
	require.Nil(t, r.recent.Load())
	_, _, err := r.Locate(lost[0].h.BaseOffset)
	require.ErrorIs(t, err, io.EOF)
	// New batches at the offsets the lost ones had, of other sizes.
	ws = append(ws, fill(t, r, rng, recentSlots+10, &ts)...)
	require.NotEqual(t, lost[0].b, ws[50].b)
	checkAgainstModel(t, r, ws)
	require.Equal(t, logBytes(ws), readAll(t, r, 1<<20))
}

// TestRecentConcurrentAppends: readers at the end of a segment being
// appended to (the ring wrapping many times under them) get whole batches,
// in order, each the bytes that were appended at its offset.
func TestRecentConcurrentAppends(t *testing.T) {
	leaktest.Check(t)
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		s := create(t, fs, dir, 0, Config{MaxIndexBytes: 1 << 20})
		defer s.Close()
		const batches = 20 * recentSlots
		// The bytes of each batch by base offset, published before the
		// batch is appended.
		var byBase sync.Map
		done := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for r := range 3 {
			wg.Go(func() {
				off := int64(0)
				for {
					select {
					case <-done:
						return
					default:
					}
					if r == 2 {
						off = max(0, s.NextOffset()-int64(rand.IntN(300))) // behind the end
					}
					f, err := s.files()
					if err != nil {
						errs <- err
						return
					}
					pos, length, next, err := s.Range(off, 1+rand.IntN(4000), NoBound, true)
					if errors.Is(err, io.EOF) {
						continue
					}
					if err == nil && length > 0 {
						raw := make([]byte, length)
						if _, err = f.log.ReadAt(raw, pos); err == nil {
							err = batch.Batches(raw, func(b []byte, h batch.Header) error {
								want, ok := byBase.Load(h.BaseOffset)
								if !ok || !bytes.Equal(want.([]byte), b) {
									return errors.New("read a batch other than the one appended at its offset")
								}
								if h.NextOffset() > next {
									return errors.New("batch past next")
								}
								return nil
							})
						}
					}
					if err != nil {
						errs <- err
						return
					}
					if r == 0 {
						off = next
					}
				}
			})
		}
		var ws []written
		for i := range batches {
			b := encode(s.NextOffset(), simple(1+i%4, int64(i), 20+i%90))
			byBase.Store(s.NextOffset(), b)
			ws = append(ws, appendB(t, s, b))
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, logBytes(ws), readAll(t, s, 1<<20))
	})
}

// TestHeaderWalkReadsInBulk: a walk of batch headers (BatchHeaders, which
// a partition's load does over whole segments, and a lookup after an index
// entry) reads the .log 4 KiB at a time, not once per header, and sees
// every header.
func TestHeaderWalkReadsInBulk(t *testing.T) {
	fss(t, func(t *testing.T, base vfs.FS, dir string) {
		var reads atomic.Int64
		fs := logReads(base, &reads)
		s := create(t, fs, dir, 0, Config{})
		var ws []written
		for i := range 400 {
			ws = append(ws, appendRecs(t, s, simple(1+i%2, int64(i), 40)))
		}
		require.NoError(t, s.Seal())
		reads.Store(0)
		var got []batch.Header
		require.NoError(t, s.BatchHeaders(func(h batch.Header) bool {
			got = append(got, h)
			return true
		}))
		want := make([]batch.Header, len(ws))
		for i, w := range ws {
			want[i] = w.h
		}
		require.Equal(t, want, got)
		most := s.Size()/headerReadSize + 2
		require.LessOrEqual(t, reads.Load(), most, "%d reads for %d headers", reads.Load(), len(ws))
		t.Logf("%d headers, %d bytes: %d reads", len(ws), s.Size(), reads.Load())

		// Stop early: fn's false ends the walk.
		n := 0
		require.NoError(t, s.BatchHeaders(func(batch.Header) bool { n++; return n < 10 }))
		require.Equal(t, 10, n)

		// A batch past the end of what the walk may read is torn.
		hr := newHeaderReader(s.f.Load().log, ws[5].pos+int64(len(ws[5].b))-1)
		defer hr.close()
		_, err := hr.header(ws[4].pos)
		require.NoError(t, err)
		_, err = hr.header(ws[5].pos)
		require.ErrorIs(t, err, batch.ErrShort)
		require.NoError(t, s.Close())

		// Reopened cleanly: the walk after the last index entries is a
		// read or two as well.
		reads.Store(0)
		r, _ := open(t, fs, dir, 0, Config{}, false)
		defer r.Close()
		require.False(t, r.Recovered())
		require.LessOrEqual(t, reads.Load(), int64(4))
		require.Equal(t, ws[len(ws)-1].h.NextOffset(), r.NextOffset())
		checkAgainstModel(t, r, ws)
	})
}
