package log

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/vfs"
)

// TestBackgroundStartsWithFirstRecord: the store's loop and the cleaner
// start with the first append, not at Open, so a broker that never holds a
// record starts no goroutine; one opened on a data dir with partitions
// starts them at Open; and none starts once Close has begun.
func TestBackgroundStartsWithFirstRecord(t *testing.T) {
	before := runtime.NumGoroutine()
	fs := vfs.NewMem()
	b, err := Open("/d", Config{FS: fs})
	require.NoError(t, err)
	top, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	require.False(t, b.store.loopOn.Load(), "no record: no loop")
	require.False(t, b.cleanerOn, "no record: no cleaner")
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "an empty broker runs no goroutine")

	p, err := top.Partition(1)
	require.NoError(t, err)
	_, err = p.Append(Record{Value: []byte("v")})
	require.NoError(t, err)
	require.True(t, b.store.loopOn.Load(), "the append started the loop")
	b.cleanerMu.Lock()
	on := b.cleanerOn
	b.cleanerMu.Unlock()
	require.True(t, on, "and the cleaner")
	require.NoError(t, b.Close())
	leaktest.Wait(t, before)

	// Reopened, the partitions are open from disk: both start at Open.
	b, err = Open("/d", Config{FS: fs})
	require.NoError(t, err)
	require.True(t, b.store.loopOn.Load())
	b.cleanerMu.Lock()
	on = b.cleanerOn
	b.cleanerMu.Unlock()
	require.True(t, on)
	require.NoError(t, b.Close())
	leaktest.Wait(t, before)

	// Nothing starts after Close (an append racing with it).
	b, err = Open("/e", Config{FS: fs})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	b.store.startLoop()
	b.startCleaner()
	require.False(t, b.store.loopOn.Load())
	require.False(t, b.cleanerOn)
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}
