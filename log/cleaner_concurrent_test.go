package log

import (
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestReadersDuringCleaning: while one goroutine appends and the cleaner
// runs pass after pass, readers scan the partition from its start to its
// end again and again. A scan never errors, sees only records as they were
// appended, and sees for every key a record at or after the key's latest
// offset when the scan began: a pass beside it never hides a latest value.
// With batches uncompressed, and on the MemFS (faster: no fsync) also with
// the topic compressing them.
func TestReadersDuringCleaning(t *testing.T) {
	fss(t, func(t *testing.T, fs vfs.FS, dir string) {
		codecs := []TopicCompression{TopicCompressionProducer}
		if _, mem := fs.(*vfs.MemFS); mem {
			codecs = append(codecs, TopicCompressionLz4)
		}
		for _, codec := range codecs {
			t.Run(codec.String(), func(t *testing.T) { readersDuringCleaning(t, fs, filepath.Join(dir, codec.String()), codec) })
		}
	})
}

func readersDuringCleaning(t *testing.T, fs vfs.FS, dir string, codec TopicCompression) {
	{
		leaktest.Check(t)
		b, err := Open(dir, Config{FS: fs, RetentionCheckInterval: time.Hour, CleanerBufferBytes: 4 << 10})
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Close()) }()
		p := createT(t, b, "c", TopicConfig{Cleanup: CleanupCompact, SegmentBytes: 20000, MaxIndexBytes: 4096, MinCleanableDirtyRatio: 0.01, Compression: codec})
		const keys, n = 60, 10000
		var (
			mu     sync.Mutex
			latest = map[string]int64{}
			done   atomic.Bool
			passes atomic.Int64
			ran    = make(chan struct{}, 1) // a cleaner run ended
			wg     sync.WaitGroup
			errs   = make(chan error, 8)
		)
		wg.Add(1)
		go func() { // the writer
			defer wg.Done()
			defer done.Store(true)
			// At least n records, and until the cleaner made 30 passes.
			// At most 1000 records per cleaner run, so that passes and
			// appends interleave.
			for i := 0; i < n || passes.Load() < 30; i++ {
				if i%1000 == 999 {
					<-ran
				}
				k := fmt.Sprint("k", i%keys)
				off := p.EndOffset()
				if _, err := p.Append(Record{Key: []byte(k), Value: []byte(k + ":" + strconv.FormatInt(off, 10))}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				latest[k] = off
				mu.Unlock()
			}
		}()
		var scans atomic.Int64
		for range 3 {
			wg.Add(1)
			go func() { // a reader
				defer wg.Done()
				for last := false; !last; {
					last = done.Load()
					mu.Lock()
					snap := maps.Clone(latest)
					mu.Unlock()
					seen := map[string]int64{}
					for off := p.StartOffset(); off < p.HighWatermark(); {
						recs, err := p.Read(off, 1+int(off%3000))
						if err != nil {
							errs <- fmt.Errorf("read at %d: %w", off, err)
							return
						}
						if len(recs) == 0 {
							var list []string
							for _, s := range *p.segs.Load() {
								list = append(list, fmt.Sprintf("[%d,%d) %dB", s.BaseOffset(), s.NextOffset(), s.Size()))
							}
							again, err := p.Read(off, 1+int(off%3000))
							raw, _ := p.ReadBatches(off, 1+int(off%3000), p.EndOffset())
							var hs []string
							batch.Batches(raw, func(_ []byte, h batch.Header) error {
								hs = append(hs, fmt.Sprintf("%d-%d n%d", h.BaseOffset, h.LastOffset(), h.NumRecords))
								return nil
							})
							errs <- fmt.Errorf("read at %d of %d (max %d): nothing; segments %v; read again: %d records, %v; batches %v", off, p.EndOffset(), 1+int(off%3000), list, len(again), err, hs)
							return
						}
						for _, r := range recs {
							k, v, _ := strings.Cut(string(r.Value), ":")
							if k != string(r.Key) || v != strconv.FormatInt(r.Offset, 10) {
								errs <- fmt.Errorf("record at %d is %s=%s", r.Offset, r.Key, r.Value)
								return
							}
							seen[k] = r.Offset
							off = r.Offset + 1
						}
					}
					for k, off := range snap {
						if seen[k] < off {
							errs <- fmt.Errorf("key %s: latest at %d when the scan began, scan saw up to %d", k, off, seen[k])
							return
						}
					}
					scans.Add(1)
				}
			}()
		}
		now := t0
		for !done.Load() {
			now = now.Add(time.Second)
			n, err := b.cleaner.run(now)
			require.NoError(t, err)
			passes.Add(int64(n))
			select {
			case ran <- struct{}{}:
			default:
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.Empty(t, b.cleaner.uncleanable)
		left := p.Size()
		// Settled (rolled and cleaned once more), the log holds about one
		// record per key.
		require.NoError(t, p.Roll())
		_, err = b.cleaner.run(now.Add(time.Second))
		require.NoError(t, err)
		t.Logf("%d cleaner passes, %d scans, %d records appended, %d bytes left, %d once settled", passes.Load(), scans.Load(), p.EndOffset(), left, p.Size())
		require.Less(t, p.Size(), int64(keys*200), "compaction keeps the log small")
	}
}

// TestReadAcrossPassPastHighWatermark is the interleaving behind the empty
// reads TestReadersDuringCleaning found, made deterministic: a Read takes
// the high watermark (10), finds only an emptied batch (offsets 0-4, keys
// superseded), and goes on at 5; meanwhile (injected at its first read of a
// segment file) 5 records are appended, superseding 5-9, and a cleaning
// pass merges the log into one segment holding only them (10-14). Below the
// high watermark the Read took there is nothing left from 5 on: it must
// read up to the high watermark as it is now and return 10, not nothing.
func TestReadAcrossPassPastHighWatermark(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	var during func()
	inject := func(op vfs.Op, path string) error {
		if op == vfs.OpRead && strings.Contains(path, ".log") && armed.CompareAndSwap(true, false) {
			during()
		}
		return nil
	}
	b, p := compacted(t, vfs.WithErrors(mem, inject), TopicConfig{SegmentBytes: 1 << 20, MinCleanableDirtyRatio: 0.01}, Config{})
	defer func() { require.NoError(t, b.Close()) }()
	appendKeys := func(from int) {
		for i := range 5 {
			_, err := p.Append(Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", from+i)})
			require.NoError(t, err)
		}
		require.NoError(t, p.Roll())
	}
	appendKeys(0) // [0,5)
	appendKeys(5) // [5,10)
	// One segment a group: the first is cleaned into its emptied last batch.
	p.editConfig(func(c *TopicConfig) { c.SegmentBytes = 100 })
	_, err := b.cleaner.run(t0)
	require.NoError(t, err)
	p.editConfig(func(c *TopicConfig) { c.SegmentBytes = 1 << 20 })
	raw, err := p.ReadBatches(0, 1, 10)
	require.NoError(t, err)
	h, err := batch.ParseHeader(raw)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 0}, []int64{h.BaseOffset, int64(h.NumRecords)}, "the first segment holds only an emptied batch")

	passes := 0
	during = func() {
		appendKeys(10) // [10,15) supersedes [5,10)
		passes, err = b.cleaner.run(t0.Add(time.Second))
		require.NoError(t, err)
	}
	armed.Store(true)
	recs, err := p.Read(0, 1)
	require.NoError(t, err)
	require.Positive(t, passes, "a pass ran during the read")
	require.Equal(t, 1, p.Segments()-1, "the pass merged the sealed segments into one")
	require.NotEmpty(t, recs, "Read returns a record when one exists")
	require.EqualValues(t, 10, recs[0].Offset)
	require.Equal(t, "v10", string(recs[0].Value))
}
