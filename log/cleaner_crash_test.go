package log

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/segment"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// crashBefore takes the image a crash leaves of a MemFS just before the
// first operation that match accepts.
type crashBefore struct {
	mu    sync.Mutex
	mem   *vfs.MemFS
	match func(op vfs.Op, path string) bool
	image *vfs.MemFS
}

func (c *crashBefore) inject(op vfs.Op, path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.image == nil && c.match != nil && c.match(op, path) {
		c.image = c.mem.CrashClone()
	}
	return nil
}

// TestOpenFinishesInterruptedCleaning crashes a cleaner pass at each step
// of its swap and checks that Open completes it (or, before the commit,
// discards it), leaving no .cleaned or .swap file, no segment inside
// another's offsets, and every key's latest value.
func TestOpenFinishesInterruptedCleaning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match func(op vfs.Op, path string) bool
	}{
		{"before the commit", func(op vfs.Op, p string) bool {
			return op == vfs.OpRename && strings.HasSuffix(p, ".log"+segment.CleanedSuffix)
		}},
		{"committed, nothing installed", func(op vfs.Op, p string) bool {
			return op == vfs.OpRename && strings.HasSuffix(p, ".index"+segment.SwapSuffix)
		}},
		{"indexes installed, not the log", func(op vfs.Op, p string) bool {
			return op == vfs.OpRename && strings.HasSuffix(p, ".log"+segment.SwapSuffix)
		}},
		{"installed, replaced segments not deleted", func(op vfs.Op, p string) bool {
			return op == vfs.OpRemove && strings.HasSuffix(p, ".log")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			cb := &crashBefore{mem: mem}
			cfg := TopicConfig{SegmentBytes: 600, MinCleanableDirtyRatio: 0.01}
			b, p := compacted(t, vfs.WithErrors(mem, cb.inject), cfg, Config{})
			want := map[string]string{}
			for i := range 300 {
				k, v := fmt.Sprint("k", i%7), fmt.Sprint(i)
				want[k] = v
				_, err := p.Append(Record{Key: []byte(k), Value: []byte(v)})
				require.NoError(t, err)
			}
			require.NoError(t, p.Roll())
			// A first pass makes small segments that the second groups, so
			// that a cleaned segment replaces several.
			_, err := b.cleaner.run(t0)
			require.NoError(t, err)
			_, err = p.Append(Record{Key: []byte("k0"), Value: []byte("last")})
			require.NoError(t, err)
			want["k0"] = "last"
			require.NoError(t, p.Roll())
			require.NoError(t, p.Flush())
			end := p.EndOffset()
			cb.mu.Lock()
			cb.match = tc.match
			cb.mu.Unlock()
			_, err = b.cleaner.run(t0.Add(time.Second))
			require.NoError(t, err)
			require.NoError(t, b.Close())
			require.NotNil(t, cb.image, "the pass reached the crash point")

			// The image as it is, then reopened.
			b, p = compacted(t, cb.image, cfg, Config{})
			defer b.Close()
			names, err := cb.image.ReadDir(p.dir)
			require.NoError(t, err)
			for _, n := range names {
				require.False(t, strings.HasSuffix(n, segment.CleanedSuffix) || strings.HasSuffix(n, segment.SwapSuffix), "left after open: %s", n)
			}
			segs := *p.segs.Load()
			for i := 1; i < len(segs); i++ {
				require.Equal(t, segs[i-1].NextOffset(), segs[i].BaseOffset(), "segments follow one another")
			}
			require.Equal(t, end, p.EndOffset())
			require.Equal(t, want, valuesOf(scan(t, p)))
			// And the cleaner goes on from there.
			_, err = p.Append(Record{Key: []byte("k1"), Value: []byte("after")})
			require.NoError(t, err)
			want["k1"] = "after"
			require.NoError(t, p.Roll())
			_, err = b.cleaner.run(t0.Add(2 * time.Second))
			require.NoError(t, err)
			require.Empty(t, b.cleaner.uncleanable)
			require.Equal(t, want, valuesOf(scan(t, p)))
		})
	}
}

// TestOpenDiscardsCleanedFiles: a cleaned segment that was never committed
// (its .cleaned files survived a crash) is deleted at Open, the segments it
// would have replaced untouched; stray .index.swap files go too.
func TestOpenDiscardsCleanedFiles(t *testing.T) {
	mem := vfs.NewMem()
	b, p := compacted(t, mem, TopicConfig{SegmentBytes: 600}, Config{})
	for i := range 50 {
		_, err := p.Append(Record{Key: []byte(fmt.Sprint("k", i%5)), Value: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	want := valuesOf(scan(t, p))
	dir := p.dir
	// A cleaned segment with one batch, and a stray index swap file.
	cw, err := segment.CreateCleaned(mem, dir, 0, segment.Config{}, t0, nil)
	require.NoError(t, err)
	var bd batch.Builder
	bd.Reset(1)
	bd.Append(1, []byte("k0"), []byte("bogus"), nil)
	bb := bd.Bytes()
	h, err := batch.Validate(bb)
	require.NoError(t, err)
	require.NoError(t, cw.Append(bb, h))
	stray, err := mem.Create(filepath.Join(dir, segment.Name(0, ".timeindex")+segment.SwapSuffix))
	require.NoError(t, err)
	require.NoError(t, stray.Close())
	require.NoError(t, mem.SyncDir(dir))
	require.NoError(t, b.Close())
	image := mem.CrashClone()
	cw.Abort()
	_, err = image.Stat(filepath.Join(dir, segment.Name(0, ".log")+segment.CleanedSuffix))
	require.NoError(t, err, "the crash left the cleaned file")
	b, p = compacted(t, image, TopicConfig{SegmentBytes: 600}, Config{})
	defer b.Close()
	require.Equal(t, want, valuesOf(scan(t, p)))
	names, err := image.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		require.False(t, strings.HasSuffix(n, segment.CleanedSuffix) || strings.HasSuffix(n, segment.SwapSuffix), "left after open: %s", n)
	}
}
