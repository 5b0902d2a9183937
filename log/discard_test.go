package log

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/vfs"
)

// TestDiscard: Discard ends the broker as Close does, writes no checkpoint
// and no clean-shutdown marker, and a later Open (which a private data dir
// never gets, but may) recovers every record, as after a crash.
func TestDiscard(t *testing.T) {
	fs := vfs.NewMem()
	b, err := Open("/d", Config{FS: fs})
	require.NoError(t, err)
	top, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	p, err := top.Partition(1)
	require.NoError(t, err)
	for i := range 3 {
		_, err := p.Append(Record{Value: []byte{byte(i)}})
		require.NoError(t, err)
	}
	require.NoError(t, b.Discard())
	require.NoError(t, b.Discard(), "a second Discard does nothing")
	require.NoError(t, b.Close(), "nor does Close after it")
	_, err = p.Append(Record{Value: []byte("late")})
	require.ErrorIs(t, err, ErrClosed)
	_, err = b.CreateTopic("u", TopicConfig{})
	require.ErrorIs(t, err, ErrClosed)
	for _, name := range []string{recoveryPointFile, logStartFile, highWatermarkFile, cleanShutdown} {
		_, err := fs.Stat(filepath.Join("/d", name))
		require.Truef(t, isNotExist(err), "%s written: %v", name, err)
	}

	// What a crash would leave (only synced bytes) holds every record.
	b, err = Open("/d", Config{FS: fs.CrashClone()})
	require.NoError(t, err)
	require.False(t, b.store.clean, "no marker: recovered")
	p, err = b.Partition("t", 1)
	require.NoError(t, err)
	recs, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, []byte{2}, recs[2].Value)
	require.NoError(t, b.Close())
}

// TestOpenEphemeral: an ephemeral broker serves as any other, writes no
// topics.json, checkpoint or marker, and Close discards; an Open of its dir
// afterwards finds no topic, as documented.
func TestOpenEphemeral(t *testing.T) {
	fs := vfs.NewMem()
	b, err := OpenEphemeral("/d", Config{FS: fs})
	require.NoError(t, err)
	top, err := b.CreateTopic("t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	_, err = b.CreateTopic("gone", TopicConfig{})
	require.NoError(t, err)
	require.NoError(t, b.DeleteTopic("gone"))
	_, err = b.CreateTopic("t", TopicConfig{})
	require.ErrorIs(t, err, ErrTopicExists)
	require.Equal(t, []string{"t"}, b.Topics())
	p, err := top.Partition(0)
	require.NoError(t, err)
	_, err = p.Append(Record{Value: []byte("v")})
	require.NoError(t, err)
	recs, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.NoError(t, b.Close())
	_, err = p.Append(Record{Value: []byte("late")})
	require.ErrorIs(t, err, ErrClosed)
	for _, name := range []string{topicsFile, recoveryPointFile, logStartFile, highWatermarkFile, cleanShutdown} {
		_, err := fs.Stat(filepath.Join("/d", name))
		require.Truef(t, isNotExist(err), "%s written: %v", name, err)
	}

	b, err = Open("/d", Config{FS: fs})
	require.NoError(t, err)
	require.Empty(t, b.Topics(), "no topics.json: no topic")
	dirs, err := b.Store().PartitionDirs()
	require.NoError(t, err)
	require.Empty(t, dirs, "the partition directories of no topic are removed")
	require.NoError(t, b.Close())
}
