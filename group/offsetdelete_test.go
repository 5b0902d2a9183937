package group_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// TestDeleteOffsets: Kafka's OffsetDelete. An active consumer group keeps
// the commits of the topics it consumes (GROUP_SUBSCRIBED_TO_TOPIC) and
// loses the others; an active group of another protocol type is not
// empty; an empty one loses every commit asked for, durably; a Store
// failure deletes nothing.
func TestDeleteOffsets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := grouptest.NewStore(nil)
		c := newCoordinator(t, group.Config{Store: store})
		a0, a1 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "a", Partition: 1}
		b0, b1 := group.TopicPartition{Topic: "b", Partition: 0}, group.TopicPartition{Topic: "b", Partition: 1}
		_, err := c.DeleteOffsets(ctx, "g", []group.TopicPartition{a0})
		require.ErrorIs(t, err, group.ErrGroupNotFound)
		_, err = c.DeleteOffsets(ctx, "", []group.TopicPartition{a0})
		require.ErrorIs(t, err, group.ErrInvalidGroup)

		m, err := c.Join(ctx, req("m", "a"))
		require.NoError(t, err)
		require.NoError(t, c.Commit(ctx, "g", m.MemberID, m.Generation, map[group.TopicPartition]int64{a0: 5, a1: 6, b0: 7, b1: 8}))
		res, err := c.DeleteOffsets(ctx, "g", []group.TopicPartition{a0, b0, {Topic: "c", Partition: 0}})
		require.NoError(t, err)
		require.Len(t, res, 3)
		require.ErrorIs(t, res[a0], group.ErrGroupSubscribedToTopic)
		require.NoError(t, res[b0])
		require.NoError(t, res[group.TopicPartition{Topic: "c", Partition: 0}], "no commit: answered as deleted")
		require.Equal(t, map[group.TopicPartition]int64{a0: 5, a1: 6, b1: 8}, c.Committed("g", nil))

		boom := errors.New("disk full")
		store.FailWith(boom)
		_, err = c.DeleteOffsets(ctx, "g", []group.TopicPartition{b1})
		require.ErrorIs(t, err, boom)
		require.Len(t, c.Committed("g", nil), 3, "a failed delete deletes nothing")
		store.FailWith(nil)

		// Empty: everything asked for goes, durably.
		require.NoError(t, c.Leave(ctx, "g", m.MemberID))
		res, err = c.DeleteOffsets(ctx, "g", []group.TopicPartition{a0, b1})
		require.NoError(t, err)
		require.NoError(t, res[a0])
		require.NoError(t, res[b1])
		require.Equal(t, map[group.TopicPartition]int64{a1: 6}, c.Committed("g", nil))
		initial, err := store.Initial()
		require.NoError(t, err)
		require.Equal(t, map[group.TopicPartition]int64{a1: 6}, initial["g"])

		// Another protocol type, active: NON_EMPTY_GROUP, nothing deleted.
		other := group.JoinRequest{Group: "conn", ClientID: "w", ProtocolType: "connect",
			Protocols: []group.Protocol{{Name: "default", Metadata: []byte("x")}}}
		w, err := c.Join(ctx, other)
		require.NoError(t, err)
		_, err = c.Sync(ctx, group.SyncRequest{Group: "conn", MemberID: w.MemberID, Generation: w.Generation,
			Assignments: map[string][]byte{w.MemberID: nil}})
		require.NoError(t, err)
		require.NoError(t, c.Commit(ctx, "conn", w.MemberID, w.Generation, map[group.TopicPartition]int64{a0: 1}))
		_, err = c.DeleteOffsets(ctx, "conn", []group.TopicPartition{a0})
		require.ErrorIs(t, err, group.ErrNonEmptyGroup)
		require.Equal(t, map[group.TopicPartition]int64{a0: 1}, c.Committed("conn", nil))
	})
}

// TestDeleteOffsetsConsumerProtocol: a KIP-848 group with members keeps
// the commits of its subscribed topics.
func TestDeleteOffsetsConsumerProtocol(t *testing.T) {
	c := newCoordinator(t, group.Config{})
	ctx := context.Background()
	a0, b0 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "b", Partition: 0}
	m := joinClient(t, c, "cg", "", "a")
	require.NoError(t, c.Commit(ctx, "cg", m.id, m.epoch, map[group.TopicPartition]int64{a0: 3, b0: 4}))
	res, err := c.DeleteOffsets(ctx, "cg", []group.TopicPartition{a0, b0})
	require.NoError(t, err)
	require.ErrorIs(t, res[a0], group.ErrGroupSubscribedToTopic)
	require.NoError(t, res[b0])
	require.Equal(t, map[group.TopicPartition]int64{a0: 3}, c.Committed("cg", nil))
	// A consumer group that never committed: nothing to delete, no error.
	joinClient(t, c, "fresh", "", "a")
	res, err = c.DeleteOffsets(ctx, "fresh", []group.TopicPartition{b0})
	require.NoError(t, err)
	require.NoError(t, res[b0])
}
