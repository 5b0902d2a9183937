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

// TestDelete: Kafka's DeleteGroups. A group with members is refused, an
// unknown one is not found; an empty one's offsets are deleted durably
// (tombstones in the store, so a restart does not bring them back) and the
// group is forgotten. A Store failure deletes nothing.
func TestDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := grouptest.NewStore(nil)
		c := newCoordinator(t, group.Config{Store: store})
		tp0, tp1 := group.TopicPartition{Topic: "a", Partition: 0}, group.TopicPartition{Topic: "a", Partition: 1}
		require.ErrorIs(t, c.Delete(ctx, "g"), group.ErrGroupNotFound)

		a, err := c.Join(ctx, req("a", "a"))
		require.NoError(t, err)
		require.NoError(t, c.Commit(ctx, "g", a.MemberID, a.Generation, map[group.TopicPartition]int64{tp0: 5, tp1: 6}))
		require.NoError(t, c.Commit(ctx, "other", "", -1, map[group.TopicPartition]int64{tp0: 1}))
		require.ErrorIs(t, c.Delete(ctx, "g"), group.ErrNonEmptyGroup)
		require.NoError(t, c.Leave(ctx, "g", a.MemberID))

		boom := errors.New("disk full")
		store.FailWith(boom)
		require.ErrorIs(t, c.Delete(ctx, "g"), boom)
		require.Len(t, c.Committed("g", nil), 2, "a failed delete deletes nothing")
		store.FailWith(nil)

		require.NoError(t, c.Delete(ctx, "g"))
		require.Empty(t, c.Committed("g", nil))
		d, ok := c.Describe("g")
		require.False(t, ok)
		require.Equal(t, group.StateDead, d.State)
		require.Equal(t, []string{"other"}, c.Groups())

		initial, err := store.Initial()
		require.NoError(t, err)
		require.Equal(t, map[string]map[group.TopicPartition]int64{"g": {}, "other": {tp0: 1}}, initial)
		records := store.Records()
		for _, r := range records[len(records)-2:] {
			require.Nil(t, r.Value, "tombstones")
		}
	})
}
