package group_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// TestGroupTypes: a Coordinator with a classic group (commits only) and a
// consumer group lists both with their types (KIP-1043), Groups has both,
// and the classic Describe answers only the classic one, as Kafka's
// DescribeGroups does.
func TestGroupTypes(t *testing.T) {
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, &grouptest.Log{})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, c.Commit(ctx, "classic", "", -1, map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 3}))
	joinClient(t, c, "new", "m", "a")

	require.Equal(t, []group.Listing{
		{Group: "classic", State: group.StateEmpty, Type: group.TypeClassic},
		{Group: "new", ProtocolType: "consumer", State: "Stable", Type: group.TypeConsumer},
	}, c.List())
	require.Equal(t, []string{"classic", "new"}, c.Groups())

	typ, ok := c.Type("new")
	require.True(t, ok)
	require.Equal(t, group.TypeConsumer, typ)
	typ, ok = c.Type("classic")
	require.True(t, ok)
	require.Equal(t, group.TypeClassic, typ)
	_, ok = c.Type("nope")
	require.False(t, ok)

	d, ok := c.Describe("classic")
	require.True(t, ok)
	require.Equal(t, group.StateEmpty, d.State)
	d, ok = c.Describe("new")
	require.False(t, ok, "a consumer group is not described as a classic one")
	require.Equal(t, group.StateDead, d.State)
	require.Empty(t, d.Members)

	// A consumer group with commits is still one group, of type consumer.
	m := &consumerClient{c: c, group: "new", id: "m", epoch: 1}
	require.NoError(t, c.Commit(ctx, "new", m.id, m.epoch, map[group.TopicPartition]int64{{Topic: "a", Partition: 0}: 5}))
	require.Equal(t, []string{"classic", "new"}, c.Groups())
	require.Len(t, c.List(), 2)
	_, ok = c.Describe("new")
	require.False(t, ok)
}

// TestCheckOffsetFetch: Kafka's ConsumerGroup.validateOffsetFetch — a
// consumer group's member fetches at its own epoch only; an admin's fetch
// (no member, epoch -1) passes; a classic group's fetch is not checked.
func TestCheckOffsetFetch(t *testing.T) {
	c, err := group.Open(context.Background(), group.Config{Partitions: partitionsOf(testTopics)}, &grouptest.Log{})
	require.NoError(t, err)
	defer c.Close()
	a := joinClient(t, c, "g", "a", "a")
	b := joinClient(t, c, "g", "b", "a")
	settle(t, c, "g", a, b)
	require.Greater(t, b.epoch, int32(1))

	require.NoError(t, c.CheckOffsetFetch("g", b.id, b.epoch))
	require.NoError(t, c.CheckOffsetFetch("g", "", -1), "an admin's fetch")
	require.ErrorIs(t, c.CheckOffsetFetch("g", b.id, b.epoch-1), group.ErrStaleMemberEpoch, "the previous epoch is stale for a fetch")
	require.ErrorIs(t, c.CheckOffsetFetch("g", b.id, b.epoch+1), group.ErrStaleMemberEpoch)
	require.ErrorIs(t, c.CheckOffsetFetch("g", "stranger", b.epoch), group.ErrUnknownMember)
	require.ErrorIs(t, c.CheckOffsetFetch("g", "", 3), group.ErrUnknownMember, "an epoch without a member")

	require.NoError(t, c.CheckOffsetFetch("classic", "x", 7), "a classic group is not checked")
	require.NoError(t, c.CheckOffsetFetch("none", "x", 7))

	// A member that left is unknown.
	require.NoError(t, (&consumerClient{c: c, group: "g", id: a.id, epoch: -1}).tryBeat())
	require.ErrorIs(t, c.CheckOffsetFetch("g", a.id, a.epoch), group.ErrUnknownMember)
}
