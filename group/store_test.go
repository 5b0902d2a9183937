package group_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

func openOn(t *testing.T, l group.OffsetsLog) *group.Coordinator {
	t.Helper()
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, l)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// A Coordinator opened over an OffsetsLog writes its commits — leader
// epochs and metadata included — and its groups' metadata there; one
// opened later over the same log (a restart, or a new coordinator of the
// partition) has all of it back.
func TestOpenReplaysCommitsAndGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c1 := openOn(t, l)
		_, _, a, _ := twoMembers(t, c1)
		a0, a1, b0 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "a", Partition: 1}, group.TopicPartition{Topic: "b", Partition: 0}
		require.NoError(t, c1.CommitWithMetadata(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]group.CommittedOffset{
			a0: {Offset: 10, LeaderEpoch: 3, Metadata: "checkpoint-1"},
			a1: {Offset: 20, LeaderEpoch: 4},
		}))
		// A plain commit later: no epoch, no metadata any more.
		require.NoError(t, c1.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{a1: 21}))
		// A simple consumer's group, then deleted: its commits are gone.
		require.NoError(t, c1.CommitWithMetadata(ctx, "solo", "", -1, map[group.TopicPartition]group.CommittedOffset{b0: {Offset: 7, LeaderEpoch: 0, Metadata: "m"}}))
		require.NoError(t, c1.Delete(ctx, "solo"))
		require.NoError(t, c1.CommitWithMetadata(ctx, "kept", "", -1, map[group.TopicPartition]group.CommittedOffset{b0: {Offset: 8, LeaderEpoch: 2, Metadata: "x"}}))
		before, _ := c1.Describe("g")
		want := c1.CommittedWithMetadata("g", nil)
		require.Equal(t, map[group.TopicPartition]group.CommittedOffset{
			a0: {Offset: 10, LeaderEpoch: 3, Metadata: "checkpoint-1"},
			a1: {Offset: 21, LeaderEpoch: -1},
		}, want)
		require.NoError(t, c1.Close())

		c2 := openOn(t, l)
		require.Equal(t, want, c2.CommittedWithMetadata("g", nil))
		require.Equal(t, map[group.TopicPartition]group.CommittedOffset{b0: {Offset: 8, LeaderEpoch: 2, Metadata: "x"}}, c2.CommittedWithMetadata("kept", nil))
		require.Empty(t, c2.CommittedWithMetadata("solo", nil))
		d, ok := c2.Describe("g")
		require.True(t, ok)
		require.Equal(t, group.StateStable, d.State)
		require.Equal(t, before, d)
		require.NoError(t, c2.Heartbeat(ctx, "g", a.MemberID, a.Generation))
		require.ElementsMatch(t, []string{"g", "kept"}, c2.Groups())
	})
}

// Replay: the last record of a key wins, a tombstone removes it, group
// metadata of a key version Strata does not know is skipped, and a record
// that does not decode fails the open, as does a failed read.
func TestOpenReplay(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	rec := func(g string, tp group.TopicPartition, co group.CommittedOffset) group.Record {
		k, v := group.EncodeCommittedOffsetRecord(g, tp, co, now)
		if co.Offset < 0 {
			v = nil
		}
		return group.Record{Key: k, Value: v}
	}
	a0, a1 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "a", Partition: 1}
	l := &grouptest.Log{}
	require.NoError(t, l.Append([]group.Record{
		rec("g", a0, group.CommittedOffset{Offset: 5, LeaderEpoch: 1, Metadata: "five"}),
		rec("g", a1, group.CommittedOffset{Offset: 7, LeaderEpoch: -1}),
		rec("h", a0, group.CommittedOffset{Offset: 1, LeaderEpoch: -1}),
	}))
	require.NoError(t, l.Append([]group.Record{rec("g", a0, group.CommittedOffset{Offset: 9, LeaderEpoch: 2, Metadata: "nine"})}))
	require.NoError(t, l.Append([]group.Record{rec("h", a0, group.CommittedOffset{Offset: -1})}))
	// A key of a kind Strata does not know (version 100): skipped.
	require.NoError(t, l.Append([]group.Record{{Key: []byte{0, 100, 0, 1, 'g'}, Value: []byte{1, 2, 3}}}))
	// A group metadata record that does not decode is logged and skipped
	// at restore; its tombstone removes it.
	require.NoError(t, l.Append([]group.Record{{Key: group.EncodeGroupMetadataKey("g"), Value: []byte{0, 3, 1}}}))
	require.NoError(t, l.Append([]group.Record{{Key: group.EncodeGroupMetadataKey("g"), Value: nil}}))

	c := openOn(t, l)
	require.Equal(t, map[group.TopicPartition]group.CommittedOffset{
		a0: {Offset: 9, LeaderEpoch: 2, Metadata: "nine"},
		a1: {Offset: 7, LeaderEpoch: -1},
	}, c.CommittedWithMetadata("g", nil))
	require.Empty(t, c.Committed("h", nil))
	require.Equal(t, []string{"g"}, c.Groups())
	d, _ := c.Describe("g")
	require.Equal(t, group.StateEmpty, d.State)

	// A corrupt commit record (a negative offset in the value): no
	// coordinator.
	k, v := group.EncodeCommittedOffsetRecord("g", a0, group.CommittedOffset{Offset: 1, LeaderEpoch: -1}, now)
	v[2] = 0xff // the offset's top byte: negative
	require.NoError(t, l.Append([]group.Record{{Key: k, Value: v}}))
	_, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, l)
	require.ErrorIs(t, err, group.ErrCorruptOffsetRecord)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = group.Open(ctx, group.Config{Partitions: partitionsOf(testTopics)}, &grouptest.Log{})
	require.NoError(t, err, "an empty log reads nothing, whatever the context")
	_, err = group.Open(ctx, group.Config{Partitions: partitionsOf(testTopics)}, l)
	require.ErrorIs(t, err, context.Canceled)
}

// A failed append fails the commit, which changes nothing; Open refuses
// a Config that brings its own store or initial state.
func TestOpenAppendFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := &grouptest.Log{}
		c := openOn(t, l)
		a0 := group.TopicPartition{Topic: "a", Partition: 0}
		require.NoError(t, c.CommitWithMetadata(ctx, "g", "", -1, map[group.TopicPartition]group.CommittedOffset{a0: {Offset: 1, LeaderEpoch: 0, Metadata: "one"}}))
		errDisk := errors.New("disk gone")
		l.FailWith(errDisk)
		err := c.CommitWithMetadata(ctx, "g", "", -1, map[group.TopicPartition]group.CommittedOffset{a0: {Offset: 2, LeaderEpoch: 1, Metadata: "two"}})
		require.ErrorIs(t, err, errDisk)
		require.Equal(t, map[group.TopicPartition]group.CommittedOffset{a0: {Offset: 1, LeaderEpoch: 0, Metadata: "one"}}, c.CommittedWithMetadata("g", nil))
		require.Equal(t, 1, l.Batches())
	})
	for _, cfg := range []group.Config{
		{Store: grouptest.NewStore(nil)},
		{Initial: map[string]map[group.TopicPartition]int64{}},
		{InitialGroups: map[string][]byte{}},
	} {
		cfg.Partitions = partitionsOf(testTopics)
		_, err := group.Open(context.Background(), cfg, &grouptest.Log{})
		require.ErrorIs(t, err, group.ErrInvalidConfig)
	}
	_, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, nil)
	require.ErrorIs(t, err, group.ErrInvalidConfig)
}
