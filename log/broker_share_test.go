package log

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/share"
	"github.com/strata-log/strata/vfs"
)

// TestShareStateIsDurable: a share group's acknowledgements go to
// __share_group_state and come back after a reopen and after a crash; the
// internal topic is neither listed nor user-creatable; the group's
// configuration is kept in share_group_configs.json.
func TestShareStateIsDurable(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	tp, err := b.CreateTopic("t", TopicConfig{Partitions: 1, FlushMessages: 1})
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendN(t, p, 1, 10)
	require.NoError(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	require.ErrorIs(t, b.ShareCoordinator().SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "sometimes"}), ErrInvalidConfig)

	sc := b.ShareCoordinator()
	resp, err := sc.Heartbeat(ctx, share.HeartbeatRequest{Group: "g", MemberID: "m1", SubscribedTopics: []string{"t"}})
	require.NoError(t, err)
	require.Len(t, resp.Assignment, 1)
	t0 := TopicPartition{Topic: "t"}
	rs, err := sc.Acquire(ctx, "g", "m1", t0, 6)
	require.NoError(t, err)
	require.Equal(t, []share.AcquiredRange{{First: 0, Last: 5, DeliveryCount: 1}}, rs)
	require.NoError(t, sc.Acknowledge(ctx, "g", "m1", t0, []share.AckBatch{{First: 0, Last: 3, Types: []share.AckType{share.AckAccept}}}))

	require.Equal(t, []string{"t"}, b.Topics())
	_, err = b.CreateTopic(ShareStateTopic, TopicConfig{})
	require.ErrorIs(t, err, ErrInvalidTopic)
	require.ErrorIs(t, b.DeleteTopic(ShareStateTopic), ErrInvalidTopic)
	// A share heartbeat to a classic group's id is refused.
	_, err = b.JoinGroup(ctx, group.JoinRequest{Group: "classic", Topics: []string{"t"}})
	require.NoError(t, err)
	_, err = sc.Heartbeat(ctx, share.HeartbeatRequest{Group: "classic", MemberID: "m1", SubscribedTopics: []string{"t"}})
	require.ErrorIs(t, err, share.ErrGroupNotFound)

	crashed := fs.CrashClone()
	require.NoError(t, b.Close())
	for _, fs := range []vfs.FS{fs, crashed} {
		b = openT(t, fs, "/d")
		st := b.ShareCoordinator().Offsets("g")[t0]
		require.Equal(t, int64(4), st.StartOffset)
		require.Equal(t, 0, st.Acquired, "a lock does not outlive the broker")
		require.Equal(t, share.GroupConfig{AutoOffsetReset: "earliest"}, b.ShareCoordinator().GroupConfig("g"))
		rs, err := b.ShareCoordinator().Acquire(ctx, "g", "m2", t0, 100)
		require.NoError(t, err)
		require.Equal(t, []share.AcquiredRange{{First: 4, Last: 9, DeliveryCount: 1}}, rs)
		require.Equal(t, 30*time.Second, b.ShareCoordinator().LockDuration("g"))
		require.NoError(t, b.Close())
	}
}

// TestShareStateIsPruned: once every share-partition has a snapshot past
// them, the records of __share_group_state before it are dropped, and
// what is left restores the same state.
func TestShareStateIsPruned(t *testing.T) {
	leaktest.Check(t)
	fs := vfs.NewMem()
	ctx := context.Background()
	b := openT(t, fs, "/d")
	tp, err := b.CreateTopic("t", TopicConfig{Partitions: 1})
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendN(t, p, 1, 1200)
	sc := b.ShareCoordinator()
	require.NoError(t, sc.SetGroupConfig("g", share.GroupConfig{AutoOffsetReset: "earliest"}))
	t0 := TopicPartition{Topic: "t"}
	for range 1100 { // one update record each, a snapshot every 500
		rs, err := sc.Acquire(ctx, "g", "m1", t0, 1)
		require.NoError(t, err)
		require.NoError(t, sc.Acknowledge(ctx, "g", "m1", t0, []share.AckBatch{{First: rs[0].First, Last: rs[0].Last, Types: []share.AckType{share.AckAccept}}}))
	}
	st, err := b.Partition(ShareStateTopic, 0)
	require.NoError(t, err)
	require.Greater(t, st.StartOffset(), int64(900), "records before the latest snapshot dropped")
	require.NoError(t, b.Close())
	b = openT(t, fs, "/d")
	defer b.Close()
	require.Equal(t, int64(1100), b.ShareCoordinator().Offsets("g")[t0].StartOffset)
}
