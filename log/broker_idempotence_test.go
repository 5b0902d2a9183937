package log

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

func TestBrokerInitProducerID(t *testing.T) {
	fs := vfs.NewMem()
	b, err := Open("/data", Config{FS: fs})
	require.NoError(t, err)
	seen := map[int64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				pid, err := b.InitProducerID(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[pid.ID] {
					t.Errorf("producer id %d given twice", pid.ID)
				}
				seen[pid.ID] = true
				mu.Unlock()
				if pid.Epoch != 0 {
					t.Errorf("epoch %d, want 0", pid.Epoch)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 40)
	crashed := fs.CrashClone() // what a kill -9 now would leave: only synced data
	require.NoError(t, b.Close())
	_, err = b.InitProducerID(t.Context())
	require.ErrorIs(t, err, ErrClosed)

	// After a restart or a crash (each id is durable before it is given),
	// ids are new. The two are alternative histories of the same broker.
	for _, fs := range []*vfs.MemFS{fs, crashed} {
		b, err = Open("/data", Config{FS: fs})
		require.NoError(t, err)
		pid, err := b.InitProducerID(t.Context())
		require.NoError(t, err)
		require.False(t, seen[pid.ID], "id %d reused after a restart", pid.ID)
		require.NoError(t, b.Close())
	}
}
