package log

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/vfs"
)

// TestGroupCommitsAreDurable: commits go to __consumer_offsets and come back
// after a reopen; the internal topic is neither listed nor user-creatable.
func TestGroupCommitsAreDurable(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	_, err := b.CreateTopic("t", TopicConfig{Partitions: 3})
	require.NoError(t, err)
	_, err = b.CreateTopic(OffsetsTopic, TopicConfig{})
	require.ErrorIs(t, err, ErrInvalidTopic)

	resp, err := b.JoinGroup(ctx, group.JoinRequest{Group: "g", Topics: []string{"t"}})
	require.NoError(t, err)
	require.Len(t, resp.Assignment, 3)
	tp0, tp2 := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 2}
	require.NoError(t, b.CommitOffsets(ctx, "g", resp.MemberID, resp.Generation, map[TopicPartition]int64{tp0: 5, tp2: 7}))
	require.NoError(t, b.CommitOffsets(ctx, "g", resp.MemberID, resp.Generation, map[TopicPartition]int64{tp0: 9}))
	err = b.CommitOffsets(ctx, "g", resp.MemberID, resp.Generation-1, map[TopicPartition]int64{tp0: 1})
	require.ErrorIs(t, err, ErrIllegalGeneration)
	got, err := b.FetchOffsets(ctx, "g", []TopicPartition{tp0, tp2, {Topic: "t", Partition: 1}})
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{tp0: 9, tp2: 7}, got)
	require.Equal(t, []string{"t"}, b.Topics())
	require.ErrorIs(t, b.DeleteTopic(OffsetsTopic), ErrInvalidTopic)

	// A crash keeps them too: commits are fsynced.
	crashed := fs.CrashClone()
	require.NoError(t, b.Close())
	for _, fs := range []vfs.FS{fs, crashed} {
		b = openT(t, fs, "/d")
		got, err = b.FetchOffsets(ctx, "g", []TopicPartition{tp0, tp2})
		require.NoError(t, err)
		require.Equal(t, map[TopicPartition]int64{tp0: 9, tp2: 7}, got)
		require.NoError(t, b.Close())
	}
}
