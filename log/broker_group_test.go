package log

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/segment/batch"
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

// TestGroupClassicProtocol: the Broker's GroupClient speaks the classic
// protocol: JoinGroup with protocols, SyncGroup with the leader's
// assignment; commits are checked against the generation; a simple
// consumer's commit (no member id, generation -1) works while the group has
// no members, as in Kafka.
func TestGroupClassicProtocol(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	b := openT(t, vfs.NewMem(), "/d")
	defer func() { require.NoError(t, b.Close()) }()
	_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	tp0 := TopicPartition{Topic: "t", Partition: 0}

	require.NoError(t, b.CommitOffsets(ctx, "g", "", -1, map[TopicPartition]int64{tp0: 3}), "a simple consumer's commit")
	resp, err := b.JoinGroup(ctx, group.JoinRequest{Group: "g", ClientID: "k", ProtocolType: "consumer",
		Protocols: []group.Protocol{{Name: "roundrobin", Metadata: []byte{1}}}})
	require.NoError(t, err)
	require.Equal(t, resp.MemberID, resp.Leader)
	require.Equal(t, []group.MemberMetadata{{ID: resp.MemberID, Metadata: []byte{1}}}, resp.MemberMetadata)
	require.ErrorIs(t, b.CommitOffsets(ctx, "g", resp.MemberID, resp.Generation, map[TopicPartition]int64{tp0: 4}),
		ErrRebalanceInProgress, "no commit while the group awaits its assignment")
	_, err = b.SyncGroup(ctx, group.SyncRequest{Group: "g", MemberID: resp.MemberID, Generation: resp.Generation - 1})
	require.ErrorIs(t, err, ErrIllegalGeneration)
	got, err := b.SyncGroup(ctx, group.SyncRequest{Group: "g", MemberID: resp.MemberID, Generation: resp.Generation,
		Assignments: map[string][]byte{resp.MemberID: []byte("mine")}})
	require.NoError(t, err)
	require.Equal(t, group.SyncResponse{ProtocolType: "consumer", Protocol: "roundrobin", Assignment: []byte("mine")}, got)
	require.NoError(t, b.CommitOffsets(ctx, "g", resp.MemberID, resp.Generation, map[TopicPartition]int64{tp0: 4}))
	require.ErrorIs(t, b.CommitOffsets(ctx, "g", "", -1, map[TopicPartition]int64{tp0: 5}), ErrUnknownMember,
		"no simple commit to a group with members")
	_, err = b.JoinGroup(ctx, group.JoinRequest{Group: "g", ProtocolType: "consumer",
		Protocols: []group.Protocol{{Name: "range"}}})
	require.ErrorIs(t, err, ErrInconsistentGroupProtocol)
	require.NoError(t, b.LeaveGroup(ctx, "g", resp.MemberID))
	require.NoError(t, b.CommitOffsets(ctx, "g", "", -1, map[TopicPartition]int64{tp0: 6}), "empty again")
	offs, err := b.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{tp0: 6}, offs)
}

// TestGroupDeleteIsDurable: a deleted group's offsets are tombstoned in
// __consumer_offsets and stay deleted after a reopen; ListGroups and
// DescribeGroups come from the coordinator.
func TestGroupDeleteIsDurable(t *testing.T) {
	leaktest.Check(t)
	ctx := context.Background()
	fs := vfs.NewMem()
	b := openT(t, fs, "/d")
	tp0 := TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, b.CommitOffsets(ctx, "gone", "", -1, map[TopicPartition]int64{tp0: 3}))
	require.NoError(t, b.CommitOffsets(ctx, "kept", "", -1, map[TopicPartition]int64{tp0: 4}))
	gc := b.GroupCoordinator()
	require.Equal(t, []group.Listing{{Group: "gone", State: group.StateEmpty, Type: group.TypeClassic}, {Group: "kept", State: group.StateEmpty, Type: group.TypeClassic}}, gc.List())
	require.NoError(t, gc.Delete(ctx, "gone"))
	require.ErrorIs(t, gc.Delete(ctx, "gone"), group.ErrGroupNotFound)
	require.NoError(t, b.Close())

	b = openT(t, fs, "/d")
	defer func() { require.NoError(t, b.Close()) }()
	got, err := b.FetchOffsets(ctx, "gone", nil)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = b.FetchOffsets(ctx, "kept", nil)
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{tp0: 4}, got)
	_, ok := b.GroupCoordinator().Describe("gone")
	require.False(t, ok)
}

// TestGroupMembershipIsDurable: a stable group's generation and members
// come back after a reopen: its member heartbeats and commits on without
// rejoining; once it leaves, the group comes back empty.
func TestGroupMembershipIsDurable(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	resp, err := b.JoinGroup(ctx, group.JoinRequest{Group: "g", Topics: []string{"t"}})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	b = openT(t, fs, "/d")
	require.NoError(t, b.Heartbeat(ctx, "g", resp.MemberID, resp.Generation))
	tp := TopicPartition{Topic: "t", Partition: 1}
	require.NoError(t, b.CommitOffsets(ctx, "g", resp.MemberID, resp.Generation, map[TopicPartition]int64{tp: 4}))
	require.ErrorIs(t, b.Heartbeat(ctx, "g", "stranger", resp.Generation), ErrUnknownMember)
	d, ok := b.GroupCoordinator().Describe("g")
	require.True(t, ok)
	require.Equal(t, group.StateStable, d.State)
	require.Len(t, d.Members, 1)
	require.NoError(t, b.LeaveGroup(ctx, "g", resp.MemberID))
	require.NoError(t, b.Close())

	b = openT(t, fs, "/d")
	defer b.Close()
	require.ErrorIs(t, b.Heartbeat(ctx, "g", resp.MemberID, resp.Generation), ErrUnknownMember)
	got, err := b.FetchOffsets(ctx, "g", []TopicPartition{tp})
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{tp: 4}, got)
}

// TestOffsetsBatchesUseTheirTopicsCodec: a builder from the shared pool
// keeps the codec of its last user (an append to a zstd topic); commits
// and group records are written with the offsets topic's own codec (none),
// not with that one.
func TestOffsetsBatchesUseTheirTopicsCodec(t *testing.T) {
	ctx := context.Background()
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	_, err := b.CreateTopic("t", TopicConfig{})
	require.NoError(t, err)
	tp := TopicPartition{Topic: "t", Partition: 0}
	for i := range 10 {
		used := new(batch.Builder)
		used.SetCompression(batch.CompressionZstd)
		builders.Put(used) // what the pool gives the next Get, without a GC
		require.NoError(t, b.CommitOffsets(ctx, "g", "", -1, map[TopicPartition]int64{tp: int64(i)}))
	}
	p, err := b.offsetsPartition()
	require.NoError(t, err)
	n := 0
	require.NoError(t, batch.Batches(allBatches(t, p), func(_ []byte, h batch.Header) error {
		require.Equal(t, batch.CompressionNone, h.Compression(), "batch at %d", h.BaseOffset)
		n++
		return nil
	}))
	require.Equal(t, 10, n)
}

// TestGroupCommitMetadataSurvivesCrash: a member's commits keep their
// leader epochs and metadata across a clean restart and a crash (only
// synced data survives), and its group comes back in its generation.
func TestGroupCommitMetadataSurvivesCrash(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	_, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	resp, err := b.JoinGroup(ctx, group.JoinRequest{Group: "g", Topics: []string{"t"}})
	require.NoError(t, err)
	tp0, tp1 := TopicPartition{Topic: "t"}, TopicPartition{Topic: "t", Partition: 1}
	want := map[TopicPartition]group.CommittedOffset{
		tp0: {Offset: 11, LeaderEpoch: 4, Metadata: "after batch 11"},
		tp1: {Offset: 2, LeaderEpoch: 0, Metadata: ""},
	}
	require.NoError(t, b.GroupCoordinator().CommitWithMetadata(ctx, "g", resp.MemberID, resp.Generation, want))
	crashed := fs.CrashClone()
	require.NoError(t, b.Close())
	for _, fs := range []vfs.FS{fs, crashed} {
		b = openT(t, fs, "/d")
		require.Equal(t, want, b.GroupCoordinator().CommittedWithMetadata("g", nil))
		require.NoError(t, b.Heartbeat(ctx, "g", resp.MemberID, resp.Generation), "the group comes back in its generation")
		require.NoError(t, b.Close())
	}
}

// PartitionOffsetsLog replays a partition of OffsetsTopic record by record,
// in order, and stops at a cancelled context; its Append is the caller's.
func TestPartitionOffsetsLogReplay(t *testing.T) {
	st, err := OpenStore(t.TempDir(), StoreConfig{})
	require.NoError(t, err)
	defer st.Close()
	p, err := st.CreatePartition(OffsetsTopic, 0, TopicConfig{})
	require.NoError(t, err)
	var appended [][]group.Record
	l := PartitionOffsetsLog(p, func(records []group.Record) error {
		appended = append(appended, records)
		var bd batch.Builder
		bd.Reset(1)
		for _, r := range records {
			bd.Append(1, r.Key, r.Value, nil)
		}
		_, _, err := p.AppendBatch(bd.Bytes())
		return err
	})
	want := []group.Record{{Key: []byte("k0"), Value: []byte("v0")}, {Key: []byte("k1"), Value: nil}, {Key: []byte("k2"), Value: []byte("v2")}}
	require.NoError(t, l.Append(want[:2]))
	require.NoError(t, l.Append(want[2:]))
	require.Len(t, appended, 2)
	var got []group.Record
	require.NoError(t, l.Replay(context.Background(), func(key, value []byte) error {
		got = append(got, group.Record{Key: slices.Clone(key), Value: slices.Clone(value)})
		return nil
	}))
	require.Equal(t, want, got)

	errStop := errors.New("stop")
	err = l.Replay(context.Background(), func(key, value []byte) error { return errStop })
	require.ErrorIs(t, err, errStop)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.Replay(ctx, func(key, value []byte) error { return nil }), context.Canceled)
}
