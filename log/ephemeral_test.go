package log

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

var errNoSyncDir = errors.New("test: no directory fsync here")

// failSyncDir is a MemFS on which every directory fsync fails.
func failSyncDir() (*vfs.MemFS, vfs.FS) {
	mem := vfs.NewMem()
	return mem, vfs.WithErrors(mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir {
			return errNoSyncDir
		}
		return nil
	})
}

// TestEphemeralSkipsDirSyncs: an ephemeral broker fsyncs no directory
// and writes no leader-epoch checkpoint (only a later Open would need
// them), yet serves as any broker, its new partitions' epoch cache in
// memory; Open's broker on the same FS does fsync directories.
func TestEphemeralSkipsDirSyncs(t *testing.T) {
	mem, fs := failSyncDir()
	b, err := OpenEphemeral("/d", Config{FS: fs})
	require.NoError(t, err)
	top, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	p, err := top.Partition(1)
	require.NoError(t, err)
	require.Equal(t, epochCache{{Epoch: 0, StartOffset: 0}}, p.loadEpochs())
	_, err = p.Append(Record{Value: []byte("v")})
	require.NoError(t, err)
	require.NoError(t, p.Flush())
	recs, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	_, err = mem.Stat(filepath.Join("/d", "t-1", epochCheckpointFile))
	require.True(t, isNotExist(err), "leader-epoch checkpoint written: %v", err)
	require.NoError(t, b.DeleteTopic("t"))
	require.NoError(t, b.Close())

	_, fs = failSyncDir()
	b, err = Open("/d", Config{FS: fs})
	require.NoError(t, err)
	_, err = b.CreateTopic("t", TopicConfig{Partitions: 1})
	require.ErrorIs(t, err, errNoSyncDir, "Open's broker fsyncs the directories it changes")
	require.ErrorIs(t, b.Close(), errNoSyncDir, "and its checkpoints'")
}

// TestCreateTopicOverLeftovers: a partition directory of no topic (a
// crash's leftover) and a partition made through the Store give way to
// the topic's new, empty partitions.
func TestCreateTopicOverLeftovers(t *testing.T) {
	for _, ephemeral := range []bool{false, true} {
		fs := vfs.NewMem()
		open := Open
		if ephemeral {
			open = OpenEphemeral
		}
		b, err := open("/d", Config{FS: fs})
		require.NoError(t, err)
		require.NoError(t, fs.MkdirAll(filepath.Join("/d", "t-0"), 0o755))
		f, err := fs.Create(filepath.Join("/d", "t-0", "junk"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		made, err := b.Store().CreatePartition("t", 1, TopicConfig{})
		require.NoError(t, err)
		_, err = made.Append(Record{Value: []byte("old")})
		require.NoError(t, err)

		top, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
		require.NoError(t, err)
		for i := range 2 {
			p, err := top.Partition(i)
			require.NoError(t, err)
			require.Zero(t, p.EndOffset(), "partition %d is new", i)
		}
		_, err = fs.Stat(filepath.Join("/d", "t-0", "junk"))
		require.True(t, isNotExist(err), "the leftover's files are gone: %v", err)
		_, err = made.Append(Record{Value: []byte("late")})
		require.ErrorIs(t, err, ErrClosed, "the Store's partition was closed")
		require.NoError(t, b.Close())
	}
}

// TestOpenNotADirectory: a data dir that is a file is refused, on the OS's
// FS and on MemFS, and nothing is created.
func TestOpenNotADirectory(t *testing.T) {
	osDir := t.TempDir()
	mem := vfs.NewMem()
	for _, fs := range []vfs.FS{vfs.Default, mem} {
		root := "/m"
		if fs == vfs.Default {
			root = osDir
		}
		require.NoError(t, fs.MkdirAll(root, 0o755))
		f, err := fs.Create(filepath.Join(root, "file"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		for _, open := range []func(string, Config) (*Broker, error){Open, OpenEphemeral} {
			_, err = open(filepath.Join(root, "file"), Config{FS: fs})
			require.Error(t, err)
			_, err = open(filepath.Join(root, "file", "sub"), Config{FS: fs})
			require.Error(t, err)
		}
		names, err := fs.ReadDir(root)
		require.NoError(t, err)
		require.Equal(t, []string{"file"}, names)
	}
}
