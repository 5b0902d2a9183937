package log

import (
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// TestCreateAssignsEpoch: a new partition holds its leader epoch from
// offset 0 from its creation, checkpointed (as Kafka's makeLeader assigns
// it), so that the first append does not wait for the checkpoint's fsyncs.
// A follower's first batch, of another epoch, replaces the entry.
func TestCreateAssignsEpoch(t *testing.T) {
	fs := vfs.NewMem()
	s := openStoreT(t, fs, StoreConfig{})
	p, err := s.CreatePartition("t", 0, small)
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{0, 0}}, p.EpochEntries())
	data, err := vfs.ReadFile(fs, filepath.Join("/d", "t-0", epochCheckpointFile))
	require.NoError(t, err)
	c, err := parseEpochCheckpoint(data)
	require.NoError(t, err)
	require.Equal(t, epochCache{{0, 0}}, c)
	appendN(t, p, 2, 1)
	require.Equal(t, []EpochEntry{{0, 0}}, p.EpochEntries())

	leader, err := s.CreatePartition("u", 0, small)
	require.NoError(t, err)
	require.NoError(t, leader.SetLeaderEpoch(3))
	appendN(t, leader, 2, 1)
	follower, err := s.CreatePartition("v", 0, small)
	require.NoError(t, err)
	_, _, err = follower.AppendAsFollower(allBatches(t, leader))
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{3, 0}}, follower.EpochEntries())
	require.NoError(t, s.Close())

	s = openStoreT(t, fs, StoreConfig{})
	defer s.Close()
	p, err = s.OpenPartition("t", 0, small)
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{0, 0}}, p.EpochEntries())
}
